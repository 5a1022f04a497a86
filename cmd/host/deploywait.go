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

// awaitHosts waits until every host that answers the status requests
// (asked before the deploy, then every askEvery) runs version of name,
// taking both their load reports and their status answers. It returns the
// hosts, sorted, once all have loaded it and settleWindow has passed since
// asked; an error naming the host that refused it as soon as one does; or,
// when ctx ends first, an error naming the hosts that have not loaded it
// (or saying that none answered). A host never goes back from loaded.
func awaitHosts(ctx context.Context, hs *functions.HostStatuses, reports *functions.LoadReports, name string, version int, asked time.Time, progress io.Writer) ([]string, error) {
	loaded := map[string]bool{} // every host heard from: whether it runs the version
	// note records what a host said: it runs the version, or (why != "")
	// refused it, which ends the wait unless it had loaded it already.
	note := func(node string, ok bool, why string) error {
		loaded[node] = loaded[node] || ok
		if !loaded[node] && why != "" {
			return fmt.Errorf("%s version %d is deployed, but host %s refused to load it: %s (the hosts keep running the version before, if any; fix it and deploy again, or roll back)", name, version, node, why)
		}
		return nil
	}
	tick := time.NewTicker(askEvery)
	defer tick.Stop()
	settled := time.NewTimer(time.Until(asked.Add(settleWindow)))
	defer settled.Stop()
	isSettled := false
	for {
		if isSettled && len(loaded) > 0 && len(pendingHosts(loaded)) == 0 {
			return sortedHosts(loaded, func(bool) bool { return true }), nil
		}
		var err error
		select {
		case <-ctx.Done():
			if len(loaded) == 0 {
				return nil, fmt.Errorf("%s version %d is deployed, but no host answered (are the hosts running, with this -prefix? each loads it when it starts)", name, version)
			}
			pending := pendingHosts(loaded)
			return nil, fmt.Errorf("%s version %d is deployed, but %d of %d hosts had not loaded it when the wait ended: %s (see their logs and GET /$cairn/functions on each)", name, version, len(pending), len(loaded), strings.Join(pending, ", "))
		case <-settled.C:
			isSettled = true
		case <-tick.C:
			err = hs.Ask()
		case m := <-reports.Msgs():
			r, ok := functions.ParseLoadReport(m.Data)
			if !ok || r.Version != version {
				continue
			}
			if r.Loaded {
				fmt.Fprintf(progress, "loaded on host %s\n", r.Node)
			}
			err = note(r.Node, r.Loaded, r.Error)
		case s := <-hs.C:
			v, running := s.Running(name)
			why := ""
			if f, ok := s.Unloaded[name]; ok && f.Version == version {
				why = f.Error
			}
			err = note(s.Node, running && v >= version, why)
		}
		if err != nil {
			return nil, err
		}
	}
}

// pendingHosts returns the hosts, sorted, that have not loaded the version.
func pendingHosts(loaded map[string]bool) []string {
	return sortedHosts(loaded, func(l bool) bool { return !l })
}

func sortedHosts(loaded map[string]bool, keep func(loaded bool) bool) []string {
	var out []string
	for node, l := range loaded {
		if keep(l) {
			out = append(out, node)
		}
	}
	sort.Strings(out)
	return out
}
