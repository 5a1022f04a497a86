package functions

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/outbox"
	"github.com/cairn-dev/cairn/projections"
)

func TestParseFloors(t *testing.T) {
	for _, c := range []struct {
		name string
		hdr  nats.Header
		want []floor
		bad  bool
	}{
		{"none", nil, nil, false},
		{"one", nats.Header{HeaderPosition: {"Employees/42"}}, []floor{{table: "Employees", seq: 42}}, false},
		{"several, spaces, repeated header", nats.Header{HeaderPosition: {"Employees/42, contoso.Orders/7", "Archive/1"}},
			[]floor{{table: "Employees", seq: 42}, {table: "contoso.Orders", seq: 7}, {table: "Archive", seq: 1}}, false},
		{"outbox", nats.Header{outbox.PositionHeader: {"orders/3/99/0"}}, []floor{{table: "orders", epoch: 3, seq: 99}}, false},
		{"no table", nats.Header{HeaderPosition: {"/42"}}, nil, true},
		{"no position", nats.Header{HeaderPosition: {"Employees"}}, nil, true},
		{"position 0", nats.Header{HeaderPosition: {"Employees/0"}}, nil, true},
		{"not a number", nats.Header{HeaderPosition: {"Employees/x"}}, nil, true},
		{"too many parts", nats.Header{HeaderPosition: {"Employees/1/2"}}, nil, true},
		{"empty entry", nats.Header{HeaderPosition: {"Employees/1,"}}, nil, true},
		{"bad outbox", nats.Header{outbox.PositionHeader: {"Orders/3/99"}}, nil, true},
		{"too many", nats.Header{HeaderPosition: {"A/1,A/2,A/3,A/4,A/5,A/6,A/7,A/8,A/9,A/10,A/11,A/12,A/13,A/14,A/15,A/16,A/17"}}, nil, true},
	} {
		got, err := parseFloors(c.hdr)
		if (err != nil) != c.bad {
			t.Errorf("%s: error %v, want one: %v", c.name, err, c.bad)
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
			}
		}
	}
}

// oneTable finds one table by name: the Views the invocation needs.
type oneTable struct{ t *projections.Table }

func (o oneTable) Table(name string) (*projections.Table, bool) { return o.t, name == o.t.Name() }
func (o oneTable) Lookup(_ context.Context, name string) (*projections.Table, bool, error) {
	return o.t, name == o.t.Name(), nil
}
func (o oneTable) Readable(ctx context.Context, name string) (*projections.Table, bool, error) {
	return o.Lookup(ctx, name)
}

func putRecord(pk, rk string) *engine.Record {
	return &engine.Record{PartitionKey: pk, Time: 1, Events: []engine.Event{{Kind: engine.EventPut, RowKey: rk, Properties: []engine.Property{{Name: "N", Value: engine.Int32(1)}}}}}
}

// TestInvocationReadsWaitForTheirFloors: an invocation whose trigger names
// a position does not read a view that has not applied it: it waits, and
// fails with ServerBusy when it cannot wait longer; a floor of another
// incarnation of the table is void.
func TestInvocationReadsWaitForTheirFloors(t *testing.T) {
	tbl := projections.NewTable("Employees", 5, time.Minute)
	tbl.Apply(1, putRecord("p", "a"))
	tbl.Publish()
	rn := &Runner{views: oneTable{tbl}}
	inv := &Invocation{runner: rn, floors: []floor{{table: "Employees", seq: 3}}}

	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if e, _, err := inv.Get(short, "Employees", "p", "b"); engine.ErrorCode(err) != engine.CodeServerBusy {
		t.Fatalf("a read before the view reached the trigger's position: %v, %v; want ServerBusy", e, err)
	}

	got := make(chan error, 1)
	go func() {
		e, _, err := inv.Get(context.Background(), "Employees", "p", "b")
		if err == nil && e == nil {
			err = errors.New("entity b not found")
		}
		got <- err
	}()
	tbl.Apply(2, putRecord("p", "x"))
	tbl.Publish()
	tbl.Apply(3, putRecord("p", "b"))
	tbl.Publish()
	if err := <-got; err != nil {
		t.Fatalf("the read once the view reached position 3: %v", err)
	}

	// The outbox names tables lower-cased: the same table.
	lower := &Invocation{runner: rn, floors: []floor{{table: "employees", epoch: 5, seq: 4}}}
	if _, _, err := lower.Get(short, "Employees", "p", "a"); engine.ErrorCode(err) != engine.CodeServerBusy {
		t.Fatalf("a lower-cased floor beyond the view: %v; want ServerBusy", err)
	}

	other := &Invocation{runner: rn, floors: []floor{{table: "Employees", epoch: 4, seq: 100}}}
	if _, _, err := other.Get(short, "Employees", "p", "a"); err != nil {
		t.Fatalf("a floor of another incarnation held the read: %v", err)
	}
}
