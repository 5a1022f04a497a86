package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
)

// DeclarationsBucket is the key-value bucket of the declared projections
// ("d.<full name, lowercase>": the Definition as JSON) and of every node's
// report of them ("n.<node>": a NodeReport).
func DeclarationsBucket(prefix string) string { return strings.ToUpper(prefix) + "_PROJECTIONS" }

// AdminPath is the operators' API of the declared projections.
const AdminPath = "/$cairn/projections"

func declKey(full string) string { return "d." + Lower(full) }
func nodeKey(node string) string { return "n." + node }

// ReportEvery is how often a node writes its NodeReport; a report older
// than three of these is a node gone.
const ReportEvery = 2 * time.Second

// NodeReport is what one node reports of its declared projections.
type NodeReport struct {
	Node        string             `json:"node"`
	Time        time.Time          `json:"time"`
	Projections []ProjectionStatus `json:"projections"`
}

// Declarations follows the declared projections in the key-value bucket
// and hands them to the views (Views.Declare); it writes the node's
// NodeReport every ReportEvery while anything is declared, and serves
// the operators' API.
type Declarations struct {
	kv     jetstream.KeyValue
	prefix string
	views  *Views
	log    *slog.Logger
	node   string

	ready chan struct{}

	reportedEmpty bool // the last report written held no projection (Run's goroutine)
}

// NewDeclarations returns the follower of the declarations in kv (the
// bucket OpenDeclarations opened) for views; it starts nothing (Run
// does). node names this node in reports.
func NewDeclarations(kv jetstream.KeyValue, prefix string, views *Views, log *slog.Logger, node string) *Declarations {
	return &Declarations{kv: kv, prefix: prefix, views: views, log: log, node: node, ready: make(chan struct{})}
}

// Ready is closed once the declarations in the bucket at the start were
// handed to the views: tables replayed after it follow them from their
// first record.
func (d *Declarations) Ready() <-chan struct{} { return d.ready }

// OpenDeclarations creates or opens the bucket.
func OpenDeclarations(ctx context.Context, js jetstream.JetStream, prefix string, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      DeclarationsBucket(prefix),
		Description: "Cairn declared projections and the nodes' reports of them",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("projections: bucket %s: %w", DeclarationsBucket(prefix), err)
	}
	return kv, nil
}

// Run follows the declarations until ctx ends. A declaration that cannot
// be read or is invalid is logged and left out (the others apply).
func (d *Declarations) Run(ctx context.Context) error {
	kv := d.kv
	w, err := kv.Watch(ctx, "d.>")
	if err != nil {
		return fmt.Errorf("projections: watch declarations: %w", err)
	}
	defer func() { _ = w.Stop() }()
	defs := map[string]*Definition{}
	declare := func() {
		all := make([]*Definition, 0, len(defs))
		for _, def := range defs {
			all = append(all, def)
		}
		d.views.Declare(all)
	}
	tick := time.NewTicker(ReportEvery)
	defer tick.Stop()
	loaded := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			d.report(ctx, kv)
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil // the watch ends with ctx
				}
				return errors.New("projections: the declarations' watch ended")
			}
			if e == nil { // the values there at the start are all in
				declare()
				if !loaded {
					loaded = true
					close(d.ready)
					d.log.Info("projections declared", "count", len(defs))
				}
				continue
			}
			key := strings.TrimPrefix(e.Key(), "d.")
			if e.Operation() != jetstream.KeyValuePut {
				delete(defs, key)
			} else {
				var def Definition
				err := json.Unmarshal(e.Value(), &def)
				if err == nil {
					err = def.Validate()
				}
				if err != nil {
					d.log.Error("projection declaration left out", "key", e.Key(), "err", err)
					delete(defs, key)
				} else {
					defs[key] = &def
				}
			}
			if loaded {
				declare()
				d.report(ctx, kv)
			}
		}
	}
}

// report writes the node's report. With nothing declared, one empty
// report is written and then none until something is: no reader needs a
// node's liveness without projections.
func (d *Declarations) report(ctx context.Context, kv jetstream.KeyValue) {
	sts := d.views.ProjectionStatuses()
	if len(sts) == 0 && d.reportedEmpty {
		return
	}
	b, _ := json.Marshal(NodeReport{Node: d.node, Time: time.Now().UTC(), Projections: sts})
	if _, err := kv.Put(ctx, nodeKey(d.node), b); err != nil {
		if ctx.Err() == nil {
			d.log.Warn("projections: write the node's report", "err", err)
		}
		return
	}
	d.reportedEmpty = len(sts) == 0
}

// Deploy declares def: a new name, or a higher version of a declared one
// (which nodes build beside the version before and swap in). The same
// version again is "unchanged" if identical and refused if not; a lower
// one is refused. It returns what it did: "declared", "replaced version
// N" or "unchanged".
func Deploy(ctx context.Context, kv jetstream.KeyValue, def *Definition) (string, error) {
	if err := def.Validate(); err != nil {
		return "", err
	}
	def.Generation = 0
	b, err := json.Marshal(def)
	if err != nil {
		return "", err
	}
	for {
		cur, rev, err := get(ctx, kv, def.Full())
		if err != nil {
			return "", err
		}
		if cur == nil {
			if err := checkPerTable(ctx, kv, def); err != nil {
				return "", err
			}
			if _, err := kv.Create(ctx, declKey(def.Full()), b); errors.Is(err, jetstream.ErrKeyExists) {
				continue
			} else if err != nil {
				return "", err
			}
			return "declared", nil
		}
		switch {
		case def.Version < cur.Version:
			return "", engine.Errorf(engine.CodeInvalidInput, "projection %s: version %d is below the declared version %d", def.Name, def.Version, cur.Version)
		case def.Version == cur.Version && def.Same(cur):
			return "unchanged", nil
		case def.Version == cur.Version:
			return "", engine.Errorf(engine.CodeInvalidInput, "projection %s: version %d is declared with another definition: give the new one a higher version", def.Name, def.Version)
		}
		if _, err := kv.Update(ctx, declKey(def.Full()), b, rev); isWrongRevision(err) {
			continue
		} else if err != nil {
			return "", err
		}
		return fmt.Sprintf("replaced version %d", cur.Version), nil
	}
}

// checkPerTable refuses a new projection on a source that has
// MaxProjectionsPerTable already: each change walks them all.
func checkPerTable(ctx context.Context, kv jetstream.KeyValue, def *Definition) error {
	defs, err := definitions(ctx, kv)
	if err != nil {
		return err
	}
	n := 0
	for _, d := range defs {
		if Lower(d.FullSource()) == Lower(def.FullSource()) {
			n++
		}
	}
	if n >= MaxProjectionsPerTable {
		return engine.Errorf(engine.CodeInvalidInput, "projection %s: table %s has %d projections already, the most a table may have", def.Name, def.Source, n)
	}
	return nil
}

// Rebuild asks every node to build the declared projection again and swap
// the result in (its generation goes up); it returns the definition as
// now declared.
func Rebuild(ctx context.Context, kv jetstream.KeyValue, full string) (*Definition, error) {
	for {
		cur, rev, err := get(ctx, kv, full)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, engine.Errorf(engine.CodeTableNotFound, "projection %s is not declared", engine.ShownTable(full))
		}
		cur.Generation++
		b, _ := json.Marshal(cur)
		if _, err := kv.Update(ctx, declKey(full), b, rev); isWrongRevision(err) {
			continue
		} else if err != nil {
			return nil, err
		}
		return cur, nil
	}
}

// Drop removes a declaration: every node drops the projection.
func Drop(ctx context.Context, kv jetstream.KeyValue, full string) error {
	cur, _, err := get(ctx, kv, full)
	if err != nil {
		return err
	}
	if cur == nil {
		return engine.Errorf(engine.CodeTableNotFound, "projection %s is not declared", engine.ShownTable(full))
	}
	return kv.Delete(ctx, declKey(full))
}

// Declared lists the declarations and the reports of the nodes seen in
// the last three ReportEvery.
func Declared(ctx context.Context, kv jetstream.KeyValue) ([]*Definition, []NodeReport, error) {
	defs, err := definitions(ctx, kv)
	if err != nil {
		return nil, nil, err
	}
	all, err := values[NodeReport](ctx, kv, "n.>")
	if err != nil {
		return nil, nil, err
	}
	var nodes []NodeReport
	for _, r := range all {
		if time.Since(r.Time) < 3*ReportEvery {
			nodes = append(nodes, *r)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node < nodes[j].Node })
	return defs, nodes, nil
}

// definitions returns the declarations, sorted by full name.
func definitions(ctx context.Context, kv jetstream.KeyValue) ([]*Definition, error) {
	defs, err := values[Definition](ctx, kv, "d.>")
	sort.Slice(defs, func(i, j int) bool { return defs[i].Full() < defs[j].Full() })
	return defs, err
}

// values reads the JSON values of the keys that filter matches; a key
// deleted meanwhile or a value that is not a T is left out.
func values[T any](ctx context.Context, kv jetstream.KeyValue, filter string) ([]*T, error) {
	lister, err := kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, err
	}
	var out []*T
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		v := new(T)
		if json.Unmarshal(e.Value(), v) == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

func get(ctx context.Context, kv jetstream.KeyValue, full string) (*Definition, uint64, error) {
	e, err := kv.Get(ctx, declKey(full))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var def Definition
	if err := json.Unmarshal(e.Value(), &def); err != nil {
		return nil, 0, fmt.Errorf("projections: declaration %s: %w", full, err)
	}
	return &def, e.Revision(), nil
}

func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// AdminHandler serves AdminPath. It authenticates nobody: the node serves
// it behind the operator token.
//
//	GET    /$cairn/projections               declarations, this node's status, the nodes' reports
//	PUT    /$cairn/projections               deploy the Definition in the body (JSON)
//	POST   /$cairn/projections/<name>/rebuild build it again and swap
//	DELETE /$cairn/projections/<name>        drop it
//
// <name> is the projection's full name ("EmployeesByEmail",
// "contoso.EmployeesByEmail").
func (d *Declarations) AdminHandler() http.Handler { return http.HandlerFunc(d.admin) }

func (d *Declarations) admin(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	fail := func(err error) {
		code := engine.ErrorCode(err)
		status := http.StatusInternalServerError
		switch code {
		case engine.CodeInvalidInput:
			status = http.StatusBadRequest
		case engine.CodeTableNotFound:
			status = http.StatusNotFound
		case engine.CodeTableAlreadyExists:
			status = http.StatusConflict
		}
		reply(status, map[string]string{"code": string(code), "error": err.Error()})
	}
	kv := d.kv
	ctx := r.Context()
	path := strings.Trim(strings.TrimPrefix(r.URL.Path, AdminPath), "/")
	name, op, _ := strings.Cut(path, "/")
	switch {
	case path == "" && r.Method == http.MethodGet:
		defs, nodes, err := Declared(ctx, kv)
		if err != nil {
			fail(err)
			return
		}
		reply(http.StatusOK, struct {
			Declared []*Definition      `json:"declared"`
			Node     string             `json:"node"`
			Status   []ProjectionStatus `json:"status"`
			Nodes    []NodeReport       `json:"nodes"`
		}{defs, d.node, d.views.ProjectionStatuses(), nodes})
	case path == "" && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		var def Definition
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&def); err != nil {
			fail(engine.Errorf(engine.CodeInvalidInput, "the body is not a projection's definition (JSON): %v", err))
			return
		}
		if _, _, live := d.views.CatalogEntry(def.Full()); live {
			fail(engine.Errorf(engine.CodeTableAlreadyExists, "a table named %s exists: a projection needs a name of its own", engine.ShownTable(def.Full())))
			return
		}
		did, err := Deploy(ctx, kv, &def)
		if err != nil {
			fail(err)
			return
		}
		reply(http.StatusOK, map[string]any{"result": did, "projection": def.Full(), "version": def.Version})
	case name != "" && op == "rebuild" && r.Method == http.MethodPost:
		def, err := Rebuild(ctx, kv, name)
		if err != nil {
			fail(err)
			return
		}
		reply(http.StatusOK, map[string]any{"result": "rebuilding", "projection": def.Full(), "version": def.Version, "generation": def.Generation})
	case name != "" && op == "" && r.Method == http.MethodDelete:
		if err := Drop(ctx, kv, name); err != nil {
			fail(err)
			return
		}
		reply(http.StatusOK, map[string]any{"result": "dropped", "projection": name})
	default:
		reply(http.StatusNotFound, map[string]string{"code": "ResourceNotFound", "error": r.Method + " " + r.URL.Path + " is not an operation of " + AdminPath})
	}
}
