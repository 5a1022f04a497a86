package functions

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// LoadReport is what one node did with a deployed version of a function:
// loaded it (it runs it now), or refused it, and why. Each node's runner
// publishes one every time the registry announces a version to it, on
// LoadReportSubject; the deploy command waits for the first report of the
// version it wrote.
type LoadReport struct {
	Function string    `json:"function"`
	Version  int       `json:"version"`
	Node     string    `json:"node"`
	Loaded   bool      `json:"loaded"`
	Error    string    `json:"error,omitempty"` // why it was refused
	Time     time.Time `json:"time"`
}

// LoadReportSubject is the subject of a function's load reports,
// <prefix>.events.functions.<name>. It is outside what the embedded
// server's development user may publish or subscribe to, so only node
// users send and read reports.
func LoadReportSubject(prefix, function string) string {
	return prefix + ".events.functions." + function
}

// report publishes the outcome of loading a version of a function (err
// nil: loaded). A report is a plain NATS message: nobody listening, it is
// gone; a failure to send it is logged and changes nothing else.
func (rn *Runner) report(name string, version int, err error) {
	r := LoadReport{Function: name, Version: version, Node: rn.cfg.Node, Loaded: err == nil, Time: rn.now().UTC()}
	if err != nil {
		r.Error = err.Error()
	}
	b, merr := json.Marshal(r)
	if merr == nil {
		merr = rn.nc.Publish(LoadReportSubject(rn.cfg.Prefix, name), b)
	}
	if merr != nil {
		rn.log.Warn("function: load report not sent", "function", name, "version", version, "err", merr)
	}
}

// LoadReports receives the load reports of one function. Subscribe
// before deploying, so that no report of the new version is missed.
type LoadReports struct {
	sub *nats.Subscription
	ch  chan *nats.Msg
}

// SubscribeLoadReports subscribes to a function's load reports (as a node
// user) and returns once the server has the subscription.
func SubscribeLoadReports(nc *nats.Conn, prefix, function string) (*LoadReports, error) {
	lr := &LoadReports{ch: make(chan *nats.Msg, 64)}
	sub, err := nc.ChanSubscribe(LoadReportSubject(prefix, function), lr.ch)
	if err != nil {
		return nil, fmt.Errorf("subscribe to the load reports of %q: %w", function, err)
	}
	lr.sub = sub
	// The flush's answer comes after the server has taken the
	// subscription (or refused it: then the error is the connection's).
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to the load reports of %q: %w", function, err)
	}
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+sub.Subject+`"`) {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("subscribe to the load reports of %q (the node user may): %w", function, err)
	}
	return lr, nil
}

// Msgs returns the report messages as they come; ParseLoadReport decodes
// them.
func (lr *LoadReports) Msgs() <-chan *nats.Msg { return lr.ch }

// ParseLoadReport decodes a report message; ok is false for a message
// that is not a report.
func ParseLoadReport(data []byte) (r LoadReport, ok bool) {
	if json.Unmarshal(data, &r) != nil || r.Node == "" || r.Version == 0 {
		return LoadReport{}, false
	}
	return r, true
}

// Close unsubscribes.
func (lr *LoadReports) Close() { _ = lr.sub.Unsubscribe() }
