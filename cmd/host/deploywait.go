package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/functions"
)

// settleWindow is how long deploy listens for the hosts' answers before
// it may conclude that the hosts it has heard from are all there are.
const settleWindow = time.Second

// askEvery is how often deploy asks the hosts again while it waits: a
// host that started meanwhile, or whose load report was lost, is seen.
const askEvery = time.Second

// hostLoad is where one host stands with the deployed version.
type hostLoad struct {
	loaded  bool
	refused string // why it refused the version
}

// awaitHosts waits until every host that answers the status requests
// (asked before the deploy, then every askEvery) runs version of name,
// taking both their load reports and their status answers. It returns the
// hosts, sorted, once all have loaded it and settleWindow has passed since
// asked; an error naming the host that refused it as soon as one does; or,
// when ctx ends first, an error naming the hosts that have not loaded it
// (or saying that none answered). A host never goes back from loaded.
func awaitHosts(ctx context.Context, hs *functions.HostStatuses, reports *functions.LoadReports, name string, version int, asked time.Time, progress io.Writer) ([]string, error) {
	hosts := map[string]*hostLoad{}
	host := func(node string) *hostLoad {
		h := hosts[node]
		if h == nil {
			h = &hostLoad{}
			hosts[node] = h
		}
		return h
	}
	tick := time.NewTicker(askEvery)
	defer tick.Stop()
	settled := time.NewTimer(time.Until(asked.Add(settleWindow)))
	defer settled.Stop()
	isSettled := false
	for {
		for node, h := range hosts {
			if h.refused != "" {
				return nil, fmt.Errorf("%s version %d is deployed, but host %s refused to load it: %s (the hosts keep running the version before, if any; fix it and deploy again, or roll back)", name, version, node, h.refused)
			}
		}
		if isSettled && len(hosts) > 0 && allLoaded(hosts) {
			return sortedNodes(hosts, func(*hostLoad) bool { return true }), nil
		}
		select {
		case <-ctx.Done():
			if len(hosts) == 0 {
				return nil, fmt.Errorf("%s version %d is deployed, but no host answered (are the hosts running, with this -prefix? each loads it when it starts)", name, version)
			}
			pending := sortedNodes(hosts, func(h *hostLoad) bool { return !h.loaded })
			return nil, fmt.Errorf("%s version %d is deployed, but %d of %d hosts had not loaded it when the wait ended: %s (see their logs and GET /$cairn/functions on each)", name, version, len(pending), len(hosts), strings.Join(pending, ", "))
		case <-settled.C:
			isSettled = true
		case <-tick.C:
			if err := hs.Ask(); err != nil {
				return nil, err
			}
		case m := <-reports.Msgs():
			r, ok := functions.ParseLoadReport(m.Data)
			if !ok || r.Version != version {
				continue
			}
			h := host(r.Node)
			if r.Loaded {
				h.loaded = true
			} else if !h.loaded {
				h.refused = r.Error
			}
			if r.Loaded {
				fmt.Fprintf(progress, "loaded on host %s\n", r.Node)
			}
		case s := <-hs.C:
			h := host(s.Node)
			if v, ok := s.Running(name); ok && v >= version {
				h.loaded = true
			} else if f, ok := s.Unloaded[name]; ok && f.Version == version && !h.loaded {
				h.refused = f.Error
			}
		}
	}
}

func allLoaded(hosts map[string]*hostLoad) bool {
	for _, h := range hosts {
		if !h.loaded {
			return false
		}
	}
	return true
}

func sortedNodes(hosts map[string]*hostLoad, keep func(*hostLoad) bool) []string {
	var out []string
	for node, h := range hosts {
		if keep(h) {
			out = append(out, node)
		}
	}
	sort.Strings(out)
	return out
}
