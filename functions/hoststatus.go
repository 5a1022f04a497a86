package functions

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
)

// HostStatus is what one node's runner answers on HostStatusSubject: the
// functions it runs (deployed ones at the version it loaded, built-in and
// native ones with Manifest.Builtin set) and the deployed versions it
// could not load. The deploy command asks every node for it, to know which
// hosts there are and which version each runs; "functions list" shows the
// built-in functions from it.
type HostStatus struct {
	Node      string                 `json:"node"`
	Functions []Manifest             `json:"functions"`
	Unloaded  map[string]LoadFailure `json:"unloaded,omitempty"`
}

// Running returns the version of a function the host runs, and whether
// it runs it.
func (s HostStatus) Running(name string) (int, bool) {
	for _, m := range s.Functions {
		if m.Name == name {
			return m.Version, true
		}
	}
	return 0, false
}

// HostStatusSubject is the subject every node's runner answers with its
// HostStatus, <prefix>.events.functions-status. Like the load reports it
// is outside what the development user and the service users may publish
// to: only node users ask.
func HostStatusSubject(prefix string) string { return prefix + ".events.functions-status" }

// status returns this node's HostStatus, functions sorted by name.
func (rn *Runner) status() HostStatus {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	s := HostStatus{Node: rn.cfg.Node, Functions: rn.runningLocked()}
	if len(rn.unloaded) > 0 {
		s.Unloaded = make(map[string]LoadFailure, len(rn.unloaded))
		for name, f := range rn.unloaded {
			s.Unloaded[name] = f
		}
	}
	return s
}

// serveStatus answers HostStatusSubject until stop unsubscribes. Each
// answer costs a copy of the running manifests under the runner's lock. A
// request whose reply subject is not an inbox is dropped (Config.Replies).
func (rn *Runner) serveStatus() error {
	sub, err := rn.serveConn().Subscribe(HostStatusSubject(rn.cfg.Prefix), func(msg *nats.Msg) {
		if msg.Reply == "" || !rn.cfg.Replies.Allow(msg.Subject, msg.Reply) {
			return
		}
		b, err := json.Marshal(rn.status())
		if err == nil {
			err = msg.Respond(b)
		}
		if err != nil {
			rn.log.Warn("functions: host status not sent", "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("functions: answer %s: %w", HostStatusSubject(rn.cfg.Prefix), err)
	}
	rn.mu.Lock()
	rn.statusSub = sub
	rn.mu.Unlock()
	return nil
}

// HostStatuses is a scatter-gather of the nodes' HostStatus over one
// subscription: Ask sends a request, and every node's answer to any of
// them comes on C. Close unsubscribes.
type HostStatuses struct {
	nc     *nats.Conn
	prefix string
	inbox  string
	sub    *nats.Subscription
	raw    chan *nats.Msg
	C      chan HostStatus
	done   chan struct{}
}

// SubscribeHostStatuses subscribes to the answers (as a node user) and
// returns once the server has the subscription. Its goroutine decodes
// the answers until Close.
func SubscribeHostStatuses(nc *nats.Conn, prefix string) (*HostStatuses, error) {
	hs := &HostStatuses{nc: nc, prefix: prefix, inbox: nc.NewInbox(), raw: make(chan *nats.Msg, 256), C: make(chan HostStatus, 256), done: make(chan struct{})}
	sub, err := nc.ChanSubscribe(hs.inbox, hs.raw)
	if err != nil {
		return nil, fmt.Errorf("functions: subscribe to the hosts' status: %w", err)
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("functions: subscribe to the hosts' status: %w", err)
	}
	hs.sub = sub
	go func() {
		for {
			select {
			case <-hs.done:
				return
			case m := <-hs.raw:
				var s HostStatus
				if json.Unmarshal(m.Data, &s) != nil || s.Node == "" {
					continue
				}
				select {
				case hs.C <- s:
				case <-hs.done:
					return
				}
			}
		}
	}()
	return hs, nil
}

// Ask asks every node for its status; the answers come on C.
func (hs *HostStatuses) Ask() error {
	return hs.nc.PublishRequest(HostStatusSubject(hs.prefix), hs.inbox, nil)
}

// Close unsubscribes and stops the decoding goroutine.
func (hs *HostStatuses) Close() {
	_ = hs.sub.Unsubscribe()
	close(hs.done)
}

// GatherHostStatus asks every node once and returns their answers, one
// per node, sorted by node: it waits up to first for the first answer,
// then until quiet has passed without another (nodes answer at about the
// same time, so a busy machine delays them all). It costs at least quiet,
// or first when no node answers.
func GatherHostStatus(ctx context.Context, nc *nats.Conn, prefix string, first, quiet time.Duration) ([]HostStatus, error) {
	hs, err := SubscribeHostStatuses(nc, prefix)
	if err != nil {
		return nil, err
	}
	defer hs.Close()
	if err := hs.Ask(); err != nil {
		return nil, err
	}
	byNode := map[string]HostStatus{}
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case s := <-hs.C:
			byNode[s.Node] = s
			t.Reset(quiet) // no stale tick after Reset (Go 1.23 timers)
		case <-t.C:
			out := make([]HostStatus, 0, len(byNode))
			for _, s := range byNode {
				out = append(out, s)
			}
			sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
			return out, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
