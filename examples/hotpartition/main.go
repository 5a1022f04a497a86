// Command hotpartition is the Azure Table design guide's prepend/append
// anti-pattern and its remedy, against a running host, with the
// per-partition load the host reports: the same log entries written into
// one partition (PartitionKey = the day, RowKey = the time), then spread
// over ten partitions by a hash prefix of the key.
//
//	go run ./examples/hotpartition write date [-day 2026-11-28] [-n 500]    LogsByDate: every entry into the day's partition
//	go run ./examples/hotpartition write hashed [-day 2026-11-28] [-n 500]  LogsHashed: PartitionKey <hash % 10>-<day>
//	go run ./examples/hotpartition load <table>                             the table's partitions by writes, from $load
//	go run ./examples/hotpartition metrics <table>                          the same from /metrics (operator token)
//
// write sends its commands over NATS (one insert per entry, in order) and
// then reads the last entry back over HTTP at its journal position, so
// the host's views, and with them $load and /metrics, include every
// write when it returns. load reads $load over HTTP with an account SAS
// signed with the connection string's key. It exits 1 with the node's
// coded error, or a connection error when no node runs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
	"github.com/cairn-dev/cairn/examples/internal/demo"
)

func main() { demo.Main("hotpartition", run) }

const (
	dayLayout = "2006-01-02"
	// keyLayout is a RowKey: UTC, fixed width, so the keys sort as the
	// times do (and every new entry goes to the end of the partition:
	// the "append" of the anti-pattern).
	keyLayout = "2006-01-02T15:04:05.000Z"
	// every is the time between two entries of the fixed log.
	every = 10 * time.Second
	// buckets is how many partitions the hashed layout spreads a day over.
	buckets = 10
	// positionHeader asks the host to answer once its view has applied the
	// journal position it names (docs/HTTP.md, Read your writes).
	positionHeader = "X-Cairn-Position"
	// timeout bounds a command: twice the other examples' demo.Timeout,
	// as write sends its 500 entries one command at a time.
	timeout = 2 * demo.Timeout
)

// The layouts, and the table each writes.
var tables = map[string]string{"date": "LogsByDate", "hashed": "LogsHashed"}

func run(args []string) error {
	fs := demo.NewFlags("hotpartition", "write date|hashed | load <table> | metrics <table>")
	var host demo.Host
	host.NATSFlags(fs, "write: the host's NATS server")
	host.HTTPFlag(fs, "the host's HTTP API and the account to sign with")
	tokenFile := fs.String("operator-token-file", "data/operator.token", "metrics: the node's operator token (created in its data directory)")
	day := fs.String("day", "2026-11-28", "write: the day of the entries, yyyy-mm-dd")
	n := fs.Int("n", 500, "write: entries to write")
	cmd, rest, err := demo.Parse(fs, args, map[string]int{"write": 1, "load": 1, "metrics": 1})
	if err != nil {
		return err
	}
	account, err := host.Account()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	switch cmd {
	case "write":
		table, ok := tables[rest[0]]
		if !ok {
			return fmt.Errorf("the layout is date or hashed, not %q", rest[0])
		}
		d, err := time.Parse(dayLayout, *day)
		if err != nil {
			return fmt.Errorf("day %q: want yyyy-mm-dd", *day)
		}
		nc, err := host.Connect()
		if err != nil {
			return err
		}
		defer nc.Close()
		t, err := host.Table(table)
		if err != nil {
			return err
		}
		return write(ctx, client.New(nc), t, table, rest[0] == "hashed", d, *n)
	case "load":
		l, err := readLoad(ctx, account, rest[0])
		if err != nil {
			return err
		}
		printLoad(l)
		return nil
	default:
		token, err := demo.ReadOperatorToken(*tokenFile)
		if err != nil {
			return fmt.Errorf("the operator token: %w (the node writes it to <data>/operator.token)", err)
		}
		return printMetrics(ctx, account, token, rest[0])
	}
}

// entryKeys returns the keys of the day's i-th log entry (from 0): its
// RowKey is its time, every 10 s from midnight; its PartitionKey the day
// or, hashed, the day prefixed with a bucket from the RowKey's hash.
func entryKeys(day time.Time, i int, hashed bool) (pk, rk string) {
	rk = day.Add(time.Duration(i) * every).UTC().Format(keyLayout)
	pk = day.Format(dayLayout)
	if hashed {
		h := fnv.New32a()
		h.Write([]byte(rk))
		pk = strconv.Itoa(int(h.Sum32()%buckets)) + "-" + pk
	}
	return pk, rk
}

// write creates table (if needed) and writes the day's n entries, one
// insert each, then reads the last back at its journal position.
func write(ctx context.Context, c *client.Client, t *aztables.Client, table string, hashed bool, day time.Time, n int) error {
	if n < 1 {
		return errors.New("-n must be at least 1")
	}
	if _, err := c.CreateTable(ctx, table); err != nil && engine.ErrorCode(err) != engine.CodeTableAlreadyExists {
		return err
	}
	parts := map[string]bool{}
	var seq uint64
	var lastPK, lastRK string
	for i := 0; i < n; i++ {
		pk, rk := entryKeys(day, i, hashed)
		e := engine.NewEntity(pk, rk, engine.Property{Name: "Message", Value: engine.String(fmt.Sprintf("request %d", i+1))})
		r, err := c.InsertOrReplace(ctx, table, e)
		if err != nil {
			return err
		}
		parts[pk] = true
		seq, lastPK, lastRK = r.Seq, pk, rk
	}
	// The read waits until this host's view has applied the last write.
	rctx := runtime.WithHTTPHeader(ctx, http.Header{positionHeader: {strconv.FormatUint(seq, 10)}})
	if _, err := t.GetEntity(rctx, lastPK, lastRK, nil); err != nil {
		return err
	}
	fmt.Printf("%s: %d entries written into %d partition(s)\n", table, n, len(parts))
	return nil
}

// partitionLoad and tableLoad are what $load reports, as this program
// reads them.
type partitionLoad struct {
	Key     string `json:"partitionKey"`
	Records uint64 `json:"records"`
	Writes  uint64 `json:"writes"`
	Reads   uint64 `json:"reads"`
}

type tableLoad struct {
	Table      string          `json:"table"`
	Partitions int             `json:"partitions"`
	Records    uint64          `json:"records"`
	Writes     uint64          `json:"writes"`
	Hot        []partitionLoad `json:"hot"`
}

// readLoad reads GET /<account>/$load?table=<table>, signed with an
// account SAS that grants listing (l) on tables (c) for five minutes.
func readLoad(ctx context.Context, account demo.Account, table string) (tableLoad, error) {
	cred, err := aztables.NewSharedKeyCredential(account.Name, account.Key)
	if err != nil {
		return tableLoad{}, err
	}
	sas, err := aztables.AccountSASSignatureValues{
		Protocol:      aztables.SASProtocolHTTPSandHTTP,
		ExpiryTime:    time.Now().Add(5 * time.Minute).UTC(),
		Permissions:   aztables.AccountSASPermissions{List: true}.String(),
		Services:      "t",
		ResourceTypes: aztables.AccountSASResourceTypes{Container: true}.String(),
	}.Sign(cred)
	if err != nil {
		return tableLoad{}, err
	}
	u := account.Endpoint + "/$load?table=" + table + "&top=" + strconv.Itoa(1000) + "&" + sas.Encode()
	body, err := demo.Get(ctx, u, "")
	if err != nil {
		return tableLoad{}, err
	}
	var out struct{ Tables []tableLoad }
	if err := json.Unmarshal(body, &out); err != nil {
		return tableLoad{}, err
	}
	if len(out.Tables) != 1 {
		return tableLoad{}, fmt.Errorf("$load answered %d tables for %s", len(out.Tables), table)
	}
	return out.Tables[0], nil
}

// printLoad prints the table's partitions by writes, most first, each
// with its share of the table's writes, and the hottest one.
func printLoad(l tableLoad) {
	hot := append([]partitionLoad(nil), l.Hot...)
	sort.Slice(hot, func(i, j int) bool {
		if hot[i].Writes != hot[j].Writes {
			return hot[i].Writes > hot[j].Writes
		}
		return hot[i].Key < hot[j].Key
	})
	fmt.Printf("%s: %d writes in %d journal records, %d partition(s)\n", l.Table, l.Writes, l.Records, l.Partitions)
	w := demo.Columns()
	fmt.Fprintln(w, "  PARTITION\tWRITES\tSHARE")
	for _, p := range hot {
		fmt.Fprintf(w, "  %s\t%d\t%s\n", p.Key, p.Writes, share(p.Writes, l.Writes))
	}
	w.Flush()
	if len(hot) > 0 {
		fmt.Printf("hottest partition: %s with %s of %d writes\n", hot[0].Key, share(hot[0].Writes, l.Writes), l.Writes)
	}
}

// share is part of total as a percentage with one decimal.
func share(part, total uint64) string {
	if total == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(part)*100/float64(total), 'f', 1, 64) + "%"
}

// printMetrics prints the table's per-partition write counters from the
// node's /metrics (behind its operator token), sorted by partition.
func printMetrics(ctx context.Context, account demo.Account, token, table string) error {
	host, err := account.HostURL()
	if err != nil {
		return err
	}
	metrics, err := demo.Metrics(ctx, host, token)
	if err != nil {
		return err
	}
	prefix := `cairn_partition_writes_total{table="` + table + `",`
	var lines []string
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, prefix) {
			lines = append(lines, line)
		}
	}
	sort.Strings(lines)
	for _, line := range lines {
		fmt.Println(line)
	}
	if len(lines) == 0 {
		return fmt.Errorf("/metrics has no partition of %s", table)
	}
	return nil
}
