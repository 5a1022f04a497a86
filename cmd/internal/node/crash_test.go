package node_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/client"
)

// ackedCommand is a command the host acknowledged: a batch of three inserts.
type ackedCommand struct {
	pk, id string
	rows   [3]string
	etags  [3]string
}

// TestCrashRecovery runs a write load against a host process, kills it with
// SIGKILL at a random moment, restarts it and checks: every acknowledged
// command is present with the ETags it was acknowledged with; no command is
// half-applied (each is a three-row batch: all rows or none); a command
// retried with its id after the crash is answered from its first result,
// not applied twice (its inserts would otherwise fail with
// EntityAlreadyExists); the view rebuilt by a second restart is identical.
// The host writes a view snapshot every 25 records, so the kill often
// lands while one is being written: the restarts load the newest whole
// one, never a half-written file, and leave no temporary file behind.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts host processes")
	}
	r := seededRand(t, 1)
	dir, listen := t.TempDir(), nodetest.FreeAddr(t)
	cc := nodetest.ChildConfig{DataDir: dir, NATSListen: listen, SnapshotEvery: 25}
	c1 := nodetest.StartChild(t, cc)
	cl := retryingClient(t, listen)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := cl.CreateTable(ctx, "Crash"); err != nil {
		t.Fatal(err)
	}
	load := startCrashLoad(ctx, cl, "Crash")
	time.Sleep(time.Duration(300+r.IntN(900)) * time.Millisecond)
	before := load.count()
	c1.Kill(t)
	t.Logf("killed the host after %d acknowledged commands", before)
	c2 := nodetest.StartChild(t, cc)
	time.Sleep(700 * time.Millisecond)
	acked := load.stop(t, c2)
	if len(acked) <= before {
		t.Fatalf("no command was acknowledged after the restart (%d before, %d after)", before, len(acked))
	}
	t.Logf("restart: %s", firstLine(c2.Tail(), "snapshot loaded", "view replayed table=Crash"))
	checkAcked(ctx, t, cl, "Crash", acked, "after crash")
	c2.Kill(t)
	c3 := nodetest.StartChild(t, cc)
	t.Logf("second restart: %s", firstLine(c3.Tail(), "snapshot loaded", "view replayed table=Crash"))
	checkAcked(ctx, t, cl, "Crash", acked, "after second restart")
	// No new record since the start: c3 wrote no snapshot, and the
	// temporary files of the kills are gone.
	if tmp, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", ".*")); len(tmp) > 0 {
		t.Fatalf("temporary snapshot files after a restart: %v", tmp)
	}
	if !strings.Contains(c2.Tail(), "cairn host ready") {
		t.Logf("host log:\n%s", c2.Tail())
	}
}

// crashLoad is a write load of eight workers, each sending three-row
// batches with command ids to its own partition until stopped, keeping
// the commands acknowledged.
type crashLoad struct {
	stopped    atomic.Bool
	mu         sync.Mutex
	acked      []ackedCommand
	duplicates atomic.Int64
	errs       chan error
	wg         sync.WaitGroup
}

func startCrashLoad(ctx context.Context, cl *client.Client, table string) *crashLoad {
	const workers = 8
	l := &crashLoad{errs: make(chan error, workers)}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			pk := fmt.Sprintf("p%d", w)
			for k := 0; !l.stopped.Load(); k++ {
				a := ackedCommand{pk: pk, id: fmt.Sprintf("w%d-%d", w, k)}
				ops := make([]engine.Operation, 3)
				for i := range ops {
					a.rows[i] = fmt.Sprintf("%06d-%c", k, 'a'+i)
					ops[i] = engine.Operation{Op: engine.OpInsert, Entity: engine.NewEntity(pk, a.rows[i],
						engine.Property{Name: "Cmd", Value: engine.String(a.id)})}
				}
				rep, err := cl.Batch(ctx, table, ops, client.WithID(a.id))
				if err != nil {
					l.errs <- fmt.Errorf("command %s: %w", a.id, err)
					return
				}
				if rep.Duplicate {
					l.duplicates.Add(1)
				}
				for i := range a.etags {
					a.etags[i] = rep.Results[i].ETag
				}
				l.mu.Lock()
				l.acked = append(l.acked, a)
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// count is the commands acknowledged so far.
func (l *crashLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// stop stops the workers and returns the commands acknowledged; a worker
// that failed fails the test with the host's log.
func (l *crashLoad) stop(t *testing.T, host *nodetest.Child) []ackedCommand {
	t.Helper()
	l.stopped.Store(true)
	l.wg.Wait()
	close(l.errs)
	for err := range l.errs {
		t.Fatalf("%v\nhost log:\n%s", err, host.Tail())
	}
	t.Logf("%d commands acknowledged, %d answered as duplicates of a first attempt", len(l.acked), l.duplicates.Load())
	return l.acked
}

// checkAcked checks that every acknowledged command is in the table with
// the ETags it was acknowledged with, and nothing beyond them: each
// worker's next rows are absent (a half-applied or phantom command would
// show there).
func checkAcked(ctx context.Context, t *testing.T, cl *client.Client, table string, acked []ackedCommand, phase string) {
	t.Helper()
	perPK := map[string]int{}
	for _, a := range acked {
		perPK[a.pk]++
		for i, rk := range a.rows {
			e, rep, err := cl.Retrieve(ctx, table, a.pk, rk)
			if err != nil {
				t.Fatalf("%s: acknowledged command %s: row %s: %v", phase, a.id, rk, err)
			}
			if rep.ETag != a.etags[i] {
				t.Fatalf("%s: row %s/%s has ETag %s, acknowledged %s", phase, a.pk, rk, rep.ETag, a.etags[i])
			}
			if v, _ := e.Get("Cmd"); v.Str() != a.id {
				t.Fatalf("%s: row %s/%s written by %q, want %q", phase, a.pk, rk, v.Str(), a.id)
			}
		}
	}
	for pk, n := range perPK {
		for k := n; k < n+3; k++ {
			for i := 0; i < 3; i++ {
				rk := fmt.Sprintf("%06d-%c", k, 'a'+i)
				_, _, err := cl.Retrieve(ctx, table, pk, rk)
				var ce *engine.Error
				if !errors.As(err, &ce) || ce.Code != engine.CodeResourceNotFound {
					t.Fatalf("%s: row %s/%s of an unacknowledged command: %v", phase, pk, rk, err)
				}
			}
		}
	}
}

// TestGracefulShutdown sends SIGTERM to a host process under load: it must
// stop on its own, exit 0, and every command it took must have been
// answered or be recognised by its id after a restart.
func TestGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts host processes")
	}
	dir, listen := t.TempDir(), nodetest.FreeAddr(t)
	c1 := nodetest.StartChild(t, nodetest.ChildConfig{DataDir: dir, NATSListen: listen})
	cl := retryingClient(t, listen)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := cl.CreateTable(ctx, "Graceful"); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var acked atomic.Int64
	errs := make(chan error, 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; !stop.Load(); k++ {
				id := fmt.Sprintf("w%d-%d", w, k)
				if _, err := cl.Insert(ctx, "Graceful", engine.NewEntity(fmt.Sprint(w), fmt.Sprintf("%06d", k)), client.WithID(id)); err != nil {
					errs <- fmt.Errorf("%s: %w", id, err)
					return
				}
				acked.Add(1)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	if err := c1.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c1.Wait(); err != nil {
		t.Fatalf("host exited with %v after SIGTERM:\n%s", err, c1.Tail())
	}
	t.Logf("stopped %v after SIGTERM with %d commands acknowledged", time.Since(start).Round(time.Millisecond), acked.Load())
	if !strings.Contains(c1.Tail(), "msg=stopped") {
		t.Fatalf("no clean stop in the log:\n%s", c1.Tail())
	}
	nodetest.StartChild(t, nodetest.ChildConfig{DataDir: dir, NATSListen: listen})
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// seededRand returns a random source whose seed the test logs, so that a
// failing run can be replayed.
func seededRand(t *testing.T, stream uint64) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, stream))
}

// retryingClient connects to a node's server at listen without
// credentials, reconnecting for ever, with a client that sends a command
// with an id again until a node answers: what carries a write load across
// a node killed and restarted.
func retryingClient(t *testing.T, listen string) *client.Client {
	t.Helper()
	nc, err := nats.Connect("nats://"+listen, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return client.New(nc, client.WithTimeout(2*time.Second), client.WithAttempts(100))
}

// firstLine returns the first line of log holding one of the parts.
func firstLine(log string, parts ...string) string {
	for _, line := range strings.Split(log, "\n") {
		for _, p := range parts {
			if strings.Contains(line, p) {
				return line
			}
		}
	}
	return "(none)"
}
