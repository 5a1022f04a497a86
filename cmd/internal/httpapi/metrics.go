package httpapi

import (
	"bufio"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections"
)

// hotPartitions is how many partitions per table /metrics labels: enough to
// spot a hot partition, few enough to keep the series count bounded.
const hotPartitions = 10

// metrics counts the HTTP requests by operation and table, and errors by
// code. Writes and reads per partition are counted by the views.
type metrics struct {
	mu       sync.Mutex
	requests map[[2]string]uint64
	errors   map[engine.Code]uint64
	examined atomic.Uint64
}

func newMetrics() *metrics {
	return &metrics{requests: map[[2]string]uint64{}, errors: map[engine.Code]uint64{}}
}

func (m *metrics) request(op, table string) {
	if op == "" {
		op = "Other"
	}
	m.mu.Lock()
	m.requests[[2]string{op, table}]++
	m.mu.Unlock()
}

func (m *metrics) failure(code engine.Code) {
	m.mu.Lock()
	m.errors[code]++
	m.mu.Unlock()
}

func (m *metrics) scanned(n int) { m.examined.Add(uint64(n)) }

// labelEscaper escapes a label value as the Prometheus text format
// requires: backslash, double quote and line feed.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// label quotes a Prometheus label value.
func label(s string) string { return `"` + labelEscaper.Replace(s) + `"` }

// MetricsHandler serves /metrics (GET) in the Prometheus text format:
// request and error counters, per table its entities, writes, reads and
// its hottest partitions (their keys are data: the node serves it behind
// the operator token, cmd/internal/operator), then Config.Metrics' series
// and the Go runtime's and the process's figures.
func (s *Server) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET on /metrics", http.StatusMethodNotAllowed)
			return
		}
		s.serveMetrics(w)
	})
}

func (s *Server) serveMetrics(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	b := bufio.NewWriter(w)
	defer b.Flush()
	m := s.metrics
	m.mu.Lock()
	reqs := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		reqs = append(reqs, k)
	}
	sort.Slice(reqs, func(i, j int) bool { return reqs[i][0]+"\x00"+reqs[i][1] < reqs[j][0]+"\x00"+reqs[j][1] })
	fmt.Fprintln(b, "# HELP cairn_http_requests_total HTTP API requests by operation and table.")
	fmt.Fprintln(b, "# TYPE cairn_http_requests_total counter")
	for _, k := range reqs {
		fmt.Fprintf(b, "cairn_http_requests_total{op=%s,table=%s} %d\n", label(k[0]), label(k[1]), m.requests[k])
	}
	codes := make([]string, 0, len(m.errors))
	for c := range m.errors {
		codes = append(codes, string(c))
	}
	sort.Strings(codes)
	fmt.Fprintln(b, "# HELP cairn_http_errors_total HTTP API error replies by error code.")
	fmt.Fprintln(b, "# TYPE cairn_http_errors_total counter")
	for _, c := range codes {
		fmt.Fprintf(b, "cairn_http_errors_total{code=%s} %d\n", label(c), m.errors[engine.Code(c)])
	}
	m.mu.Unlock()
	fmt.Fprintln(b, "# HELP cairn_query_examined_total Entities walked by queries (returned or not).")
	fmt.Fprintln(b, "# TYPE cairn_query_examined_total counter")
	fmt.Fprintf(b, "cairn_query_examined_total %d\n", m.examined.Load())
	fmt.Fprintln(b, "# HELP cairn_query_snapshots_held Snapshots held for queries with more pages.")
	fmt.Fprintln(b, "# TYPE cairn_query_snapshots_held gauge")
	fmt.Fprintf(b, "cairn_query_snapshots_held %d\n", s.held.Count())

	var loads []projections.Load
	for _, info := range s.views.Tables() {
		if t, ok := s.views.Table(info.Name); ok {
			loads = append(loads, t.Load(hotPartitions))
		}
	}
	series := []struct {
		name, help, kind string
		v                func(projections.Load) string
	}{
		{"cairn_table_entities", "Entities in the table's view.", "gauge", func(l projections.Load) string { return strconv.FormatInt(l.Entities, 10) }},
		{"cairn_table_partitions", "Partitions of the table.", "gauge", func(l projections.Load) string { return strconv.Itoa(l.Partitions) }},
		{"cairn_table_records_total", "Journal records (commits) of the table.", "counter", func(l projections.Load) string { return strconv.FormatUint(l.Records, 10) }},
		{"cairn_table_writes_total", "Entity writes of the table.", "counter", func(l projections.Load) string { return strconv.FormatUint(l.Writes, 10) }},
		{"cairn_table_reads_total", "Entities read from this host's view of the table.", "counter", func(l projections.Load) string { return strconv.FormatUint(l.Reads, 10) }},
		{"cairn_table_faulted", "1 when the table's view stopped for good at a record it cannot apply (see $load).", "gauge", func(l projections.Load) string {
			if l.Fault != nil {
				return "1"
			}
			return "0"
		}},
	}
	for _, sr := range series {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", sr.name, sr.help, sr.name, sr.kind)
		for _, l := range loads {
			fmt.Fprintf(b, "%s{table=%s} %s\n", sr.name, label(l.Table), sr.v(l))
		}
	}
	fmt.Fprintln(b, "# HELP cairn_catalog_records_skipped_total Catalog records the views skipped because they could not be used.")
	fmt.Fprintln(b, "# TYPE cairn_catalog_records_skipped_total counter")
	fmt.Fprintf(b, "cairn_catalog_records_skipped_total %d\n", s.views.CatalogSkipped())
	fmt.Fprintf(b, "# HELP cairn_partition_writes_total Entity writes of the %d hottest partitions of each table.\n# TYPE cairn_partition_writes_total counter\n", hotPartitions)
	for _, l := range loads {
		for _, p := range l.Hot {
			fmt.Fprintf(b, "cairn_partition_writes_total{table=%s,partition=%s} %d\n", label(l.Table), label(p.Key), p.Writes)
		}
	}
	fmt.Fprintf(b, "# HELP cairn_partition_reads_total Entities read from the %d hottest partitions of each table.\n# TYPE cairn_partition_reads_total counter\n", hotPartitions)
	for _, l := range loads {
		for _, p := range l.Hot {
			fmt.Fprintf(b, "cairn_partition_reads_total{table=%s,partition=%s} %d\n", label(l.Table), label(p.Key), p.Reads)
		}
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics(b)
	}
	writeRuntimeMetrics(b)
	writeProcessMetrics(b)
}

// load serves GET /<account>/$load[?table=t][&top=n]: per table the totals
// and the hottest partitions, as JSON.
func (c *call) load() {
	c.op = "Load"
	if c.r.Method != http.MethodGet {
		c.fail(errMethod(c.r.Method, "$load"))
		return
	}
	if err := c.allowTables('l'); err != nil {
		c.fail(err)
		return
	}
	q := c.params()
	top := 20
	if v := q.Get("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			c.fail(engine.Errorf(codeInvalidQueryParameter, "top must be a whole number from 1 to 10000, not %q", v))
			return
		}
		top = n
	}
	pos, err := c.position()
	if err != nil {
		c.fail(err)
		return
	}
	var out []projections.Load
	if name := q.Get("table"); name == "" && pos > 0 {
		c.fail(engine.Errorf(codeInvalidHeaderValue, "%s is a position in one table's journal: name the table (?table=)", PositionHeader))
		return
	} else if name != "" {
		// A faulted table's load is where its fault shows: only a table
		// this host does not know goes through the refusals of view.
		full, err := c.fullName(name)
		if err != nil {
			c.fail(err)
			return
		}
		t, ok := c.s.views.Table(full)
		if !ok {
			var err error
			if t, err = c.view(full); err != nil {
				c.fail(err)
				return
			}
		}
		if pos > 0 {
			// The load as it stands once the view has applied the
			// write the client names, as any read's.
			if _, err := t.WaitPosition(c.r.Context(), pos, c.s.cfg.PositionWait); err != nil {
				c.fail(err)
				return
			}
		}
		out = append(out, t.Load(top))
	} else {
		for _, info := range c.s.views.TablesOf(c.account) {
			if t, ok := c.s.views.Table(engine.FullTableName(c.account, info.Name)); ok {
				out = append(out, t.Load(top))
			}
		}
	}
	// The account sees its tables by their names, not by their full names.
	for i := range out {
		out[i].Table = engine.ShownTable(out[i].Table)
		if f := out[i].Fault; f != nil {
			g := *f
			g.Table = engine.ShownTable(g.Table)
			out[i].Fault = &g
		}
	}
	c.json(http.StatusOK, struct {
		Tables []projections.Load `json:"tables"`
	}{out})
}
