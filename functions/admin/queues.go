package admin

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/functions"
)

// QueueInfo is a queue as GET /$cairn/queues lists it.
type QueueInfo struct {
	Name   string `json:"name"`
	Depth  uint64 `json:"depth"`  // messages waiting, in flight included
	Poison bool   `json:"poison"` // a poison queue (<queue>-poison)
	// Function is the deployed function the queue triggers ("" for none).
	Function string `json:"function,omitempty"`
	// Oldest is when the oldest message waiting was stored, and
	// OldestAgeSeconds its age then (QueueDepth's).
	Oldest           time.Time `json:"oldest,omitzero"`
	OldestAgeSeconds float64   `json:"oldestAgeSeconds"`
}

// listQueues is GET /$cairn/queues: the queues holding messages, deepest
// first, with their oldest message's age (queueadmin.Admin.Depths), then
// the queues of the functions that hold none, by name.
func (h *Handler) listQueues(ctx context.Context) ([]QueueInfo, error) {
	ds, err := h.queues.Depths(ctx)
	if err != nil {
		return nil, err
	}
	ms, err := h.rn.Registry().List(ctx)
	if err != nil {
		return nil, err
	}
	qs := make([]QueueInfo, len(ds))
	at := make(map[string]int, len(ds))
	for i, d := range ds {
		qs[i] = QueueInfo{Name: d.Queue, Depth: d.Messages, Poison: strings.HasSuffix(d.Queue, functions.PoisonSuffix), Oldest: d.Oldest, OldestAgeSeconds: d.OldestAgeSeconds}
		at[d.Queue] = i
	}
	var idle []QueueInfo
	for _, m := range append(ms, h.unregistered(ms)...) {
		if m.Trigger.Queue == "" {
			continue
		}
		if i, ok := at[m.Trigger.Queue]; ok {
			qs[i].Function = m.Name
			continue
		}
		idle = append(idle, QueueInfo{Name: m.Trigger.Queue, Function: m.Name})
	}
	slices.SortFunc(idle, func(a, b QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return append(qs, idle...), nil
}
