package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal"
	"github.com/cairn-dev/cairn/projections"
)

// benchStart measures how long views take to become ready on start, from
// the whole journal and from a snapshot file, for one table as its history
// grows: every entity written once, then updated until it was written
// -updates times. The views run in this process on the host's server (the
// host itself writes no snapshots).
func benchStart(args []string) error {
	for _, a := range args {
		if a == "-kill" || a == "--kill" || a == "-kill=true" {
			return benchKill(args)
		}
	}
	fs := flag.NewFlagSet("start", flag.ContinueOnError)
	entities := fs.Int("entities", 200_000, "entities in the table")
	updates := fs.Int("updates", 5, "times each entity is written in the longest history")
	rounds := fs.Int("rounds", 3, "starts of each kind per history; the median is reported")
	valueBytes := fs.Int("value-bytes", 0, "pad each entity's Notes property so that its values take about this many bytes (0: about 150, unpadded)")
	dir := fs.String("dir", "", "data directory (default: a new temporary directory, removed afterwards)")
	fs.Bool("kill", false, "measure a node's start after SIGKILL under a write load instead (benchkill.go; -h with -kill for its flags)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, stop, err := startCairnConfig(ctx, *dir, func(c *nodeConfig) { c.NoSnapshots = true })
	if err != nil {
		return err
	}
	defer stop()
	nc, err := nats.Connect(h.ClientURL(), nodeCreds...)
	if err != nil {
		return err
	}
	defer nc.Close()
	j, err := journal.New(nc, journal.Config{})
	if err != nil {
		return err
	}
	const table = "StartBench"
	epoch, err := createJournalTable(ctx, j, table)
	if err != nil {
		return err
	}
	snapDir, err := os.MkdirTemp("", "cairn-bench-snapshots-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(snapDir)

	fmt.Printf("# cairn bench start: GOMAXPROCS=%d, %s/%s, %s, entities=%d of about %d bytes of values, rounds=%d (median)\n\n",
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), *entities, max(*valueBytes, 150), *rounds)
	fmt.Println("| history | records | full replay to ready | from the snapshot to ready | ratio | snapshot write | file |")
	fmt.Println("|---|---|---|---|---|---|---|")
	w := &historyWriter{j: j, table: table, epoch: epoch, shards: engine.DefaultShards, entities: *entities, last: make([]uint64, historyPartitions), pad: strings.Repeat("x", max(*valueBytes-150, 0))}
	for u := 1; u <= *updates; u++ {
		if err := w.round(ctx, u); err != nil {
			return err
		}
		if u != 1 && u != *updates {
			continue
		}
		var full, fromSnap, write []float64
		for r := 0; r < *rounds; r++ {
			el, _, err := startViews(ctx, j, projections.Config{}, false)
			if err != nil {
				return err
			}
			full = append(full, el.Seconds())
			// A full replay that writes the snapshot on stop, into an
			// empty directory.
			os.RemoveAll(snapDir)
			_, wr, err := startViews(ctx, j, projections.Config{SnapshotDir: snapDir, SnapshotEvery: 1 << 40}, true)
			if err != nil {
				return err
			}
			write = append(write, wr.Seconds())
			el, _, err = startViews(ctx, j, projections.Config{SnapshotDir: snapDir, SnapshotEvery: 1 << 40, NoSnapshotOnStop: true}, false)
			if err != nil {
				return err
			}
			fromSnap = append(fromSnap, el.Seconds())
		}
		files, _ := filepath.Glob(filepath.Join(snapDir, "*", "*.snap"))
		if len(files) != 1 {
			return fmt.Errorf("snapshot files %v, want one", files)
		}
		var size int64
		if st, err := os.Stat(files[0]); err == nil {
			size = st.Size()
		}
		fmt.Printf("| %d× (%d entities) | %d | %.2f s | %.2f s | %.2f | %.2f s | %.1f MB |\n",
			u, *entities, u**entities, median(full), median(fromSnap), median(fromSnap)/median(full), median(write), float64(size)/1e6)
	}
	return nil
}

// createJournalTable creates a table straight in the journal, with the
// shards a node gives it, and returns its epoch.
func createJournalTable(ctx context.Context, j *journal.Journal, table string) (uint64, error) {
	epoch, err := j.AppendCatalog(ctx, &engine.CatalogRecord{Kind: engine.CatalogTableCreated, Name: table, Time: engine.TimeToTicks(time.Now()), Shards: engine.DefaultShards}, 0)
	if err != nil {
		return 0, err
	}
	return epoch, j.EnsureTableStream(ctx, table, epoch)
}

// startViews runs views on j until they are ready and stops them; it
// returns the time to ready and the time the stop took (which writes the
// snapshot when timeStop and the config asks for one).
func startViews(ctx context.Context, j *journal.Journal, cfg projections.Config, timeStop bool) (ready, stopped time.Duration, err error) {
	runtime.GC()
	v := projections.NewViews(j, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg)
	vctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- v.Run(vctx) }()
	err = v.WaitReady(ctx)
	ready = time.Since(start)
	start = time.Now()
	cancel()
	if rerr := <-done; err == nil {
		err = rerr
	}
	if timeStop {
		stopped = time.Since(start)
	}
	return ready, stopped, err
}

// historyPartitions is how many partitions the table's entities spread
// over, each appended to by one goroutine.
const historyPartitions = 256

// historyWriter appends the table's history: one record per entity write,
// each entity of four properties (about 150 bytes of values, and pad).
type historyWriter struct {
	j        *journal.Journal
	table    string
	epoch    uint64
	shards   uint32
	entities int
	parts    int           // partitions the entities spread over (historyPartitions when 0)
	last     []uint64      // each partition's last sequence
	pad      string        // appended to each entity's Notes
	appended atomic.Uint64 // records appended so far
}

// round writes every entity once more (its u-th version).
func (w *historyWriter) round(ctx context.Context, u int) error {
	start := time.Now()
	parts := cmp.Or(w.parts, historyPartitions)
	if len(w.last) < parts {
		w.last = make([]uint64, parts)
	}
	var wg sync.WaitGroup
	errs := make(chan error, parts)
	for p := 0; p < parts; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := fmt.Sprintf("p%03d", p)
			for i := p; i < w.entities; i += parts {
				rec := &engine.Record{Time: engine.TimeToTicks(time.Now()), PartitionKey: pk, Nonce: fmt.Sprintf("%d-%d", u, i),
					Commands: []engine.CommandRef{{Count: 1}},
					Events: []engine.Event{{Kind: engine.EventPut, RowKey: fmt.Sprintf("r%08d", i), Properties: []engine.Property{
						{Name: "Name", Value: engine.String("Jones, Margaret Anne (Sales)")},
						{Name: "Email", Value: engine.String("margaret.jones@contoso.example")},
						{Name: "Notes", Value: engine.String(fmt.Sprintf("version %d of entity %d, with some text to make it longer: %s%s", u, i, "lorem ipsum dolor sit amet", w.pad))},
						{Name: "Version", Value: engine.Int64(int64(u))},
					}}}}
				seq, err := w.j.Append(ctx, w.table, w.epoch, w.shards, rec, w.last[p])
				if err != nil {
					errs <- err
					return
				}
				w.last[p] = seq
				w.appended.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "history round %d written in %v\n", u, time.Since(start).Round(time.Millisecond))
	return nil
}
