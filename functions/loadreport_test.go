package functions

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/journal/jstest"
)

// TestLoadReportsArriveAndParse: the reports published on a function's
// subject arrive in order on Msgs; ParseLoadReport decodes each and
// refuses a message that is not a report.
func TestLoadReportsArriveAndParse(t *testing.T) {
	_, nc := jstest.Server(t)
	lr, err := SubscribeLoadReports(nc, "cairn", "fn")
	if err != nil {
		t.Fatal(err)
	}
	defer lr.Close()
	send := func(b []byte) {
		t.Helper()
		if err := nc.Publish(LoadReportSubject("cairn", "fn"), b); err != nil {
			t.Fatal(err)
		}
	}
	report := func(r LoadReport) []byte {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sent := []LoadReport{
		{Function: "fn", Version: 1, Node: "a", Loaded: true},
		{},
		{Function: "fn", Version: 2, Node: "c", Error: "does not fit"},
	}
	send(report(sent[0]))
	send([]byte("not a report"))
	send(report(sent[2]))
	timeout := time.After(30 * time.Second)
	for i, want := range sent {
		select {
		case m := <-lr.Msgs():
			got, ok := ParseLoadReport(m.Data)
			if ok != (want.Node != "") || got != want {
				t.Fatalf("message %d: %+v, %v; want %+v", i, got, ok, want)
			}
		case <-timeout:
			t.Fatalf("message %d never arrived", i)
		}
	}
}
