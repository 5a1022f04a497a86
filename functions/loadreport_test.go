package functions

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/journal/jstest"
)

// TestLoadReportsWaitForTheirVersion: Wait returns the first report of
// the version asked for, past reports of other versions and messages
// that are not reports, and ctx's error when none comes.
func TestLoadReportsWaitForTheirVersion(t *testing.T) {
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
	send(report(LoadReport{Function: "fn", Version: 1, Node: "a", Loaded: true}))
	send([]byte("not a report"))
	send(report(LoadReport{Function: "fn", Version: 3, Node: "b", Loaded: true}))
	send(report(LoadReport{Function: "fn", Version: 2, Node: "c", Error: "does not fit"}))
	send(report(LoadReport{Function: "fn", Version: 2, Node: "d", Loaded: true}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := lr.Wait(ctx, 2)
	if err != nil || r.Node != "c" || r.Loaded || r.Error != "does not fit" {
		t.Fatalf("Wait(2) = %+v, %v; want node c's refusal", r, err)
	}

	done, stop := context.WithCancel(context.Background())
	stop()
	if _, err := lr.Wait(done, 4); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with no report of version 4: %v", err)
	}
}
