package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/journal"
)

// The HTTP benchmark measures each server's CPU per operation from the
// server process's own counters, so Cairn runs there as a child process,
// as Azurite does: this binary started again as "host-child". The child
// prints "ready <HTTP URL>" once it serves, and answers each line on its
// stdin with its memory after a full collection, as a JSON line; a line
// that names a file first has the heap profile written there.

// hostChild runs a host for the parent benchmark until its stdin closes.
func hostChild(args []string) error {
	fs := flag.NewFlagSet("host-child", flag.ContinueOnError)
	dir := fs.String("data", "", "data directory")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the host to this file")
	natsURL := fs.String("nats-url", "", "join this NATS server instead of embedding one")
	replicas := fs.Int("view-replicas", 0, "hosts holding each view shard (node.Config.ViewReplicas)")
	noSnapshots := fs.Bool("no-snapshots", false, "write and read no snapshots (node.Config.NoSnapshots)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan *node.Node, 1)
	done := make(chan error, 1)
	cfg := node.Config{DataDir: *dir, NATSListen: "127.0.0.1:0", HTTP: "127.0.0.1:0", NATSURL: *natsURL, ViewReplicas: *replicas,
		NoSnapshots: *noSnapshots, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	go func() { done <- node.Run(ctx, cfg, func(h *node.Node) { ready <- h }) }()
	var h *node.Node
	select {
	case h = <-ready:
		fmt.Printf("ready %s\n", h.HTTPURL())
	case err := <-done:
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		runtime.GC()
		if path := strings.TrimSpace(in.Text()); path != "" {
			if err := writeHeapProfile(path); err != nil {
				return err
			}
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		rss, _ := processRSS(os.Getpid())
		// What the views hold: entities, views of some shards, and the
		// lowest position (a placed cluster's parent waits on these).
		var entities, partial, seq uint64
		for i, info := range h.Views().Tables() {
			if t, ok := h.Views().Table(info.Name); ok {
				snap := t.Snapshot()
				entities += uint64(snap.Len())
				if t.Partial() {
					partial++
				}
				if i == 0 || snap.Seq < seq {
					seq = snap.Seq
				}
			}
		}
		b, _ := json.Marshal(map[string]uint64{"live": ms.HeapAlloc, "rss": rss, "entities": entities, "partial": partial, "seq": seq})
		fmt.Printf("%s\n", b)
	}
	cancel() // stdin closed: the parent is done
	return <-done
}

// writeHeapProfile writes the heap profile of this process to path: as
// of the last collection, which its caller has just run.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cairnChild is a host in a child process.
type cairnChild struct {
	cmd    *exec.Cmd
	dir    string
	in     io.WriteCloser
	out    *bufio.Reader
	url    string
	exited chan struct{}
}

// floorChild serves HTTP with net/http and nothing else until its stdin
// closes: a GET is answered 200 with one stored entity, with the headers a
// Tables API read has; any other request's body is read and answered 204
// with the headers of an insert that asked for no content. It is the
// floor of a point read's server CPU, and the HTTP part of an insert's:
// what net/http and the system calls cost before any work. With
// -nats-store it is instead the journal's part of an insert's floor
// (natsFloorChild, benchfloor.go).
func floorChild(args []string) error {
	fs := flag.NewFlagSet("http-floor-child", flag.ContinueOnError)
	store := fs.String("nats-store", "", "embed a NATS server storing in this directory and measure raw appends and deliveries, instead of serving HTTP")
	skeleton := fs.String("skeleton-store", "", "embed a NATS server storing in this directory, and answer each insert once its body is appended, acknowledged and delivered (skeletonHTTPChild)")
	readSkeleton := fs.Int("read-skeleton", 0, "answer point reads of the point-read workload's first n rows as the Tables protocol asks, with no Cairn code (readSkeletonChild)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *store != "" {
		return natsFloorChild(*store)
	}
	if *skeleton != "" {
		return skeletonHTTPChild(*skeleton)
	}
	if *readSkeleton > 0 {
		return readSkeletonChild(*readSkeleton)
	}
	body := benchEntity(key("p", 0), key("r", 0), 0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	return serveFloor(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			_, _ = io.Copy(io.Discard, r.Body)
			answerInsert(w, r)
			return
		}
		floorHeaders(w)
		w.Header()["Content-Type"] = []string{"application/json;odata=nometadata;streaming=true;charset=utf-8"}
		_, _ = w.Write(body)
	}))
}

// serveFloor serves h on ln until stdin closes.
func serveFloor(ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("ready http://%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent is done
	return srv.Close()
}

// floorHeaders sets the headers every Tables API answer has.
func floorHeaders(w http.ResponseWriter) {
	h := w.Header()
	h["Etag"] = []string{`W/"datetime'2026-11-23T00%3A00%3A00.0000000Z'"`}
	h["X-Ms-Version"] = []string{"2019-02-02"}
	h["Dataserviceversion"] = []string{"3.0;"}
}

// answerInsert answers an insert that asked for no content, as the Tables
// API does.
func answerInsert(w http.ResponseWriter, r *http.Request) {
	floorHeaders(w)
	h := w.Header()
	h["Location"] = []string{"http://" + r.Host + r.URL.Path + "(PartitionKey='p0000000',RowKey='r0000000')"}
	h["Preference-Applied"] = []string{"return-no-content"}
	w.WriteHeader(http.StatusNoContent)
}

// skeletonHTTPChild is the HTTP benchmark's insert with today's protocol
// and no Cairn code: net/http, and an embedded NATS server storing in
// store (connected in process, as a host's), each insert's body appended
// to a subject of its own expecting it empty, as a new partition's first
// record is, and answered as floorChild answers once the append is
// acknowledged and its message delivered back through an ordered
// consumer. Nothing is parsed, checked or applied.
func skeletonHTTPChild(store string) error {
	ns, err := journal.StartEmbedded(journal.EmbeddedConfig{StoreDir: store, Port: -1, NoLog: true})
	if err != nil {
		return err
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL(), nats.InProcessServer(ns))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SKEL", Subjects: []string{"skel.>"}, Storage: jetstream.FileStorage}); err != nil {
		return err
	}
	cons, err := js.OrderedConsumer(ctx, "SKEL", jetstream.OrderedConsumerConfig{})
	if err != nil {
		return err
	}
	var d deliveries
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if meta, err := m.Metadata(); err == nil {
			d.deliver(meta.Sequence.Stream)
		}
	})
	if err != nil {
		return err
	}
	defer cc.Stop()
	var next atomic.Uint64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	return serveFloor(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m := &nats.Msg{Subject: "skel.p" + strconv.FormatUint(next.Add(1), 10), Data: body, Header: nats.Header{}}
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		ack, err := js.PublishMsg(r.Context(), m)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		done := make(chan struct{})
		d.acked(ack.Sequence, func() { close(done) })
		<-done
		answerInsert(w, r)
	}))
}

// startCairnChild starts this binary as a host on a new temporary
// directory and waits until it serves; a cpuprofile names the file the
// child writes its CPU profile to when it stops. With everyAlloc its heap
// profiles record every allocation rather than a sample (runtime's
// memprofilerate=1: exact, and slower).
func startCairnChild(ctx context.Context, cpuprofile string, everyAlloc bool) (*cairnChild, error) {
	dir, err := os.MkdirTemp("", "cairn-bench-child-")
	if err != nil {
		return nil, err
	}
	var env []string
	if everyAlloc {
		env = append(os.Environ(), "GODEBUG="+strings.TrimPrefix(os.Getenv("GODEBUG")+",memprofilerate=1", ","))
	}
	return startChildEnv(ctx, dir, env, "host-child", "-data", filepath.Join(dir, "data"), "-cpuprofile", cpuprofile)
}

// startChild starts this binary with args, and waits until it prints
// "ready <URL>"; dir, if any, is removed when it stops.
func startChild(ctx context.Context, dir string, args ...string) (*cairnChild, error) {
	return startChildEnv(ctx, dir, nil, args...)
}

// startChildEnv is startChild with the environment env (nil: this
// process's).
func startChildEnv(ctx context.Context, dir string, env []string, args ...string) (*cairnChild, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &cairnChild{dir: dir, exited: make(chan struct{})}
	c.cmd = exec.CommandContext(ctx, self, args...)
	c.cmd.Env = env
	c.cmd.Stderr = os.Stderr
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.out = bufio.NewReader(stdout)
	if err := c.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start the %s child: %w", args[0], err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	line, err := c.out.ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ok {
		c.stop()
		return nil, fmt.Errorf("the %s child did not start: %q %v", args[0], line, err)
	}
	c.url = url
	return c, nil
}

// memory asks the child for its live heap after a collection.
func (c *cairnChild) memory() (memSample, error) { return c.memoryProfiled("") }

// heapProfile has the child write its heap profile to path after a
// collection.
func (c *cairnChild) heapProfile(path string) error {
	_, err := c.memoryProfiled(path)
	return err
}

// memoryProfiled is memory, the child first writing its heap profile to
// path ("": none).
func (c *cairnChild) memoryProfiled(path string) (memSample, error) {
	if strings.ContainsAny(path, "\n\r") {
		return memSample{}, fmt.Errorf("heap profile path %q: one line only", path)
	}
	if _, err := io.WriteString(c.in, path+"\n"); err != nil {
		return memSample{}, err
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return memSample{}, fmt.Errorf("the host child's memory: %w", err)
	}
	var m struct{ Live, RSS, Entities, Partial, Seq uint64 }
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return memSample{}, err
	}
	return memSample{live: m.Live, rss: m.RSS, entities: m.Entities, partial: m.Partial, seq: m.Seq}, nil
}

// stop closes the child's stdin (it then stops cleanly), kills it if it
// has not exited after 10 s, and removes its directory.
func (c *cairnChild) stop() {
	_ = c.in.Close()
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	os.RemoveAll(c.dir)
}

// kill kills the child with SIGKILL and waits until it has exited,
// keeping its directory.
func (c *cairnChild) kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// processCPU returns the CPU time (user and system) a process has used:
// the sum of its threads' run time from /proc/<pid>/task/*/schedstat
// (nanoseconds), or, where that is missing, /proc/<pid>/stat in clock
// ticks (10 ms).
func processCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err == nil && len(tasks) > 0 {
		var sum time.Duration
		for _, p := range tasks {
			b, err := os.ReadFile(p)
			if err != nil {
				continue // a thread that just exited
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				continue
			}
			ns, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %q: %v", p, b, err)
			}
			sum += time.Duration(ns)
		}
		return sum, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errUnmeasured, err)
	}
	// The command name (field 2) may hold spaces: count from its ")".
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, errors.New("/proc stat: too few fields")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc stat: %q", b)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
