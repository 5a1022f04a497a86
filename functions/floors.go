package functions

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/outbox"
	"github.com/cairn-dev/cairn/projections"
)

// HeaderPosition on a queue message or a direct invocation names journal
// positions the function's reads must reflect: "<table>/<seq>", the
// table's full name and a write's position (Reply.Seq, X-Cairn-Position),
// several separated by commas. A client that writes and then enqueues
// work about what it wrote sets it, so that the function, on whichever
// node takes the message, reads the write even if that node's view has
// not applied it yet. The outbox relay's messages need none: their
// Cairn-Outbox-Position is read the same way, and a table trigger reads
// its change's table at least at the change.
const HeaderPosition = "Cairn-Position"

// floor is a journal position an invocation's reads of a table wait for.
type floor struct {
	table string // its full name, in any case: table names are unique regardless of case
	epoch uint64 // the table's incarnation; 0: whichever is live
	seq   uint64
}

// maxFloors bounds the positions one message may name.
const maxFloors = 16

// parseFloors reads the positions of HeaderPosition and the outbox's
// header. A malformed value is the message's fault: an error that says
// what is wrong, so that it is moved to the poison queue, not retried.
func parseFloors(h nats.Header) ([]floor, error) {
	var fs []floor
	for _, v := range h.Values(HeaderPosition) {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			table, seqText, ok := strings.Cut(p, "/")
			seq, err := strconv.ParseUint(seqText, 10, 64)
			if !ok || table == "" || err != nil || seq == 0 || strings.Contains(seqText, "/") {
				return nil, fmt.Errorf("header %s: %q is not <table>/<position> (a write's position, a positive integer)", HeaderPosition, p)
			}
			fs = append(fs, floor{table: table, seq: seq})
		}
	}
	if v := h.Get(outbox.PositionHeader); v != "" {
		table, epoch, seq, _, ok := outbox.ParsePosition(v)
		if !ok {
			return nil, fmt.Errorf("header %s: %q is not <table>/<epoch>/<seq>/<index>", outbox.PositionHeader, v)
		}
		fs = append(fs, floor{table: table, epoch: epoch, seq: seq})
	}
	if len(fs) > maxFloors {
		return nil, fmt.Errorf("header %s: %d positions; at most %d", HeaderPosition, len(fs), maxFloors)
	}
	return fs, nil
}

// reach waits until t's view (a projection's: its source's position) has
// applied every floor the invocation has for it. A floor of another
// incarnation of the table is void: that table is gone.
func (inv *Invocation) reach(ctx context.Context, t *projections.Table) error {
	name, epoch := t.Name(), t.Epoch()
	if src, derived := t.Source(); derived {
		name, epoch = src.Name(), src.Epoch()
	}
	for _, f := range inv.floors {
		if !strings.EqualFold(f.table, name) || (f.epoch != 0 && f.epoch != epoch) || t.Snapshot().Seq >= f.seq {
			continue
		}
		if _, err := t.WaitAt(ctx, f.seq); err != nil {
			return engine.Errorf(engine.CodeServerBusy, "table %s has not reached position %d, which the trigger names (%s): %v", name, f.seq, HeaderPosition, err)
		}
	}
	return nil
}
