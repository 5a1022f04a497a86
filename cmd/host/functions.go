package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/queueadmin"
	"github.com/cairn-dev/cairn/functions/wasm"
)

// ManifestFile is the manifest's name next to a function's source.
const ManifestFile = "cairn.json"

// connFlags are the flags of the subcommands that talk to a running host's
// NATS server.
type connFlags struct {
	url    string
	ca     string
	creds  string
	data   string
	prefix string
}

func (c *connFlags) declare(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "nats-url", "", "NATS server of the host (tls://… when it requires TLS) (default: the one the host recorded in <-data>/nats/url)")
	fs.StringVar(&c.ca, "nats-ca", "", "PEM file of the certificate authority (or the self-signed certificate) to trust for a NATS server with TLS")
	fs.StringVar(&c.creds, "nats-creds", "", "file with the node credentials (user:password; default: <-data>/nats/node.user, else the credentials in -nats-url)")
	fs.StringVar(&c.data, "data", "./data", "data directory of the host to operate: its NATS URL and credentials are read from it")
	fs.StringVar(&c.prefix, "prefix", "cairn", "first token of every subject and stream name")
}

// dial connects to the host's NATS server as the node user and returns
// the connection and its JetStream context.
func (c *connFlags) dial() (*nats.Conn, jetstream.JetStream, error) {
	fromData := c.url == ""
	if fromData {
		u, err := natsauth.ReadURL(c.data)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("no NATS URL: %s does not exist: no host has run with -data %s; %s", natsauth.URLPath(c.data), c.data, startHost(c.data))
		}
		if err != nil {
			return nil, nil, err
		}
		c.url = u
	}
	opts := []nats.Option{nats.Name("cairn-cli")}
	if c.ca != "" {
		opts = append(opts, nats.RootCAs(c.ca))
	}
	credsFile := c.creds
	if credsFile == "" {
		if f := natsauth.Path(c.data); fileExists(f) {
			credsFile = f
		}
	}
	if credsFile == "" && !strings.Contains(c.url, "@") {
		// Without credentials the server lets a client send commands
		// only; the JetStream requests below would wait for replies that
		// never come.
		return nil, nil, fmt.Errorf("no NATS credentials: %s does not exist; give the host's data directory (-data) or its credentials file (-nats-creds <data>/nats/node.user)", natsauth.Path(c.data))
	}
	if credsFile != "" {
		cr, err := natsauth.Read(credsFile)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, cr.Options()...)
	}
	nc, err := nats.Connect(c.url, opts...)
	if errors.Is(err, nats.ErrAuthorization) {
		src := credsFile
		if src == "" {
			src = "-nats-url"
		}
		return nil, nil, fmt.Errorf("connect to %s: the credentials of %s are refused (another host's? -data, -nats-creds)", c.url, src)
	}
	if errors.Is(err, nats.ErrNoServers) {
		if fromData {
			return nil, nil, fmt.Errorf("no host answers at %s, the NATS URL in %s (%v): %s", c.url, natsauth.URLPath(c.data), err, startHost(c.data))
		}
		return nil, nil, fmt.Errorf("no host answers at %s (%v): start the host, or the NATS server, of -nats-url %s", c.url, err, c.url)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s (is the host running? -nats-url): %w", c.url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// connect returns the queues and registry of the host's NATS server.
func (c *connFlags) connect(ctx context.Context) (*nats.Conn, *functions.Queues, *functions.Registry, error) {
	nc, js, err := c.dial()
	if err != nil {
		return nil, nil, nil, err
	}
	q, err := functions.OpenQueues(ctx, js, c.prefix, functions.QueueConfig{})
	if err == nil {
		var r *functions.Registry
		if r, err = functions.OpenRegistry(ctx, js, c.prefix, 0); err == nil {
			return nc, q, r, nil
		}
	}
	nc.Close()
	return nil, nil, nil, err
}

// startHost tells how to start a host on data, or to reach a running one.
func startHost(data string) string {
	here := ""
	if !filepath.IsAbs(data) {
		here = " in this directory"
	}
	return fmt.Sprintf("start one in another terminal with `host -data %s`%s, or give a running host's data directory (-data) or its NATS server (-nats-url)", data, here)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// deploy builds a function package (or takes a .wasm file) and deploys it.
func deploy(args []string) error {
	fs := flag.NewFlagSet("deploy", flag.ContinueOnError)
	var conn connFlags
	conn.declare(fs)
	var m functions.Manifest
	manifest := fs.String("manifest", "", "manifest file (default: "+ManifestFile+" in the package directory, or next to the .wasm file)")
	fs.StringVar(&m.Name, "name", "", "function name (overrides the manifest)")
	fs.StringVar(&m.Trigger.Queue, "queue", "", "trigger: a queue")
	fs.StringVar(&m.Trigger.Table, "table", "", "trigger: the changes of a table")
	every := fs.Duration("every", 0, "trigger: a timer interval")
	cronSpec := fs.String("cron", "", `trigger: a cron schedule ("*/5 * * * *", "@hourly")`)
	fs.IntVar(&m.MaxDequeueCount, "max-dequeue-count", 0, "deliveries before a failing message moves to the poison queue (5)")
	timeout := fs.Duration("timeout", 0, "limit of one invocation (30s)")
	fs.IntVar(&m.Concurrency, "concurrency", 0, "invocations at once per host (4)")
	wait := fs.Duration("wait", 2*time.Minute, "how long to wait for every host to load the new version (a host compiles a module it has not seen before: a second or two on an idle machine, far longer on a busy one); 0: do not wait")
	cli.Usage(fs, deployUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("deploy: give one package directory or .wasm file")
	}
	src := fs.Arg(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	mf := *manifest
	if mf == "" {
		if strings.HasSuffix(src, ".wasm") {
			mf = strings.TrimSuffix(src, ".wasm") + ".json"
		} else {
			mf = filepath.Join(src, ManifestFile)
		}
		if _, err := os.Stat(mf); err != nil {
			mf = ""
		}
	}
	base := functions.Manifest{}
	if mf != "" {
		b, err := os.ReadFile(mf)
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&base); err != nil {
			return fmt.Errorf("manifest %s: %w", mf, err)
		}
	}
	// Flags override the file.
	if m.Name != "" {
		base.Name = m.Name
	}
	if m.Trigger.Queue != "" || m.Trigger.Table != "" || *every != 0 || *cronSpec != "" {
		base.Trigger = functions.Trigger{Queue: m.Trigger.Queue, Table: m.Trigger.Table, Every: functions.Duration(*every), Cron: *cronSpec}
	}
	if m.MaxDequeueCount != 0 {
		base.MaxDequeueCount = m.MaxDequeueCount
	}
	if *timeout != 0 {
		base.Timeout = functions.Duration(*timeout)
	}
	if m.Concurrency != 0 {
		base.Concurrency = m.Concurrency
	}
	if base.Name == "" {
		base.Name = strings.TrimSuffix(filepath.Base(filepath.Clean(src)), ".wasm")
	}
	if err := base.Validate(); err != nil {
		return err
	}

	if *wait < 0 {
		return errors.New("deploy: -wait must not be negative")
	}
	// The host first: a build takes seconds, finding that no host runs
	// takes one connection attempt (nats.Connect's 2 s at most).
	nc, _, reg, err := conn.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	module, err := cli.Module(ctx, src)
	if err != nil {
		return err
	}
	rt, err := wasm.NewRuntime(ctx, wasm.Config{})
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	if err := rt.Validate(ctx, module); err != nil {
		return fmt.Errorf("refused: %w", err)
	}
	// Subscribed, and the hosts asked, before the manifest is written: no
	// host can report the new version before the subscriptions exist.
	var reports *functions.LoadReports
	var hosts *functions.HostStatuses
	asked := time.Now()
	if *wait > 0 {
		if reports, err = functions.SubscribeLoadReports(nc, conn.prefix, base.Name); err != nil {
			return err
		}
		defer reports.Close()
		if hosts, err = functions.SubscribeHostStatuses(nc, conn.prefix); err != nil {
			return err
		}
		defer hosts.Close()
		if err := hosts.Ask(); err != nil {
			return err
		}
	}
	d, err := reg.Deploy(ctx, base, module)
	if err != nil {
		return err
	}
	about := fmt.Sprintf("(%d bytes, sha256 %s…), trigger %s", d.Size, d.Digest[:12], describeTrigger(d))
	if *wait == 0 {
		fmt.Printf("deployed %s version %d %s; not waiting for the hosts to load it\n", d.Name, d.Version, about)
		return nil
	}
	fmt.Fprintf(os.Stderr, "deployed %s version %d; waiting up to %v for every host to load it…\n", d.Name, d.Version, *wait)
	wctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	loaded, err := awaitHosts(wctx, hosts, reports, d.Name, d.Version, asked, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Printf("deployed %s version %d: loaded on %d host(s): %s %s\n", d.Name, d.Version, len(loaded), strings.Join(loaded, ", "), about)
	return nil
}

func describeTrigger(m functions.Manifest) string {
	switch m.Trigger.Kind() {
	case "queue":
		return "queue " + m.Trigger.Queue
	case "table":
		return "changes of table " + m.Trigger.Table
	case "timer":
		if m.Trigger.Cron != "" {
			return "cron " + m.Trigger.Cron
		}
		return "every " + m.Trigger.Every.D().String()
	case "http":
		routes := make([]string, len(m.Trigger.HTTP.Routes))
		for i, r := range m.Trigger.HTTP.Routes {
			routes[i] = r.Method + " " + functions.HTTPPrefix + m.Name + r.Path
			switch r.Auth {
			case functions.AuthAnonymous:
				routes[i] += " (anonymous)"
			case functions.AuthAccount:
				routes[i] += " (signed for account " + m.Trigger.HTTP.Account + ")"
			}
		}
		return "http " + strings.Join(routes, ", ")
	}
	return "direct invocation only"
}

// functionsCmd lists, undeploys and rolls back functions.
func functionsCmd(args []string) error {
	fs := flag.NewFlagSet("functions", flag.ContinueOnError)
	var conn connFlags
	conn.declare(fs)
	file := fs.String("file", "", "settings/secrets set: read the value from this file (default: stdin)")
	cli.Usage(fs, functionsUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	a := fs.Args()
	if len(a) == 0 {
		a = []string{"list"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, _, reg, err := conn.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	need := func(n int) error {
		if len(a) < n {
			fs.Usage()
			return fmt.Errorf("functions %s: missing arguments", a[0])
		}
		return nil
	}
	switch a[0] {
	case "list":
		ms, err := reg.List(ctx)
		if err != nil {
			return err
		}
		sts, err := functions.GatherHostStatus(ctx, nc, conn.prefix, listFirst, listQuiet)
		if err != nil {
			return err
		}
		printManifests(os.Stdout, ms)
		printBuiltins(os.Stdout, sts)
	case "history":
		if err := need(2); err != nil {
			return err
		}
		ms, err := reg.History(ctx, a[1])
		if err != nil {
			return err
		}
		printManifests(os.Stdout, ms)
	case "undeploy":
		if err := need(2); err != nil {
			return err
		}
		if err := reg.Undeploy(ctx, a[1]); err != nil {
			return err
		}
		fmt.Printf("undeployed %s (its queue keeps its messages)\n", a[1])
	case "rollback":
		if err := need(2); err != nil {
			return err
		}
		v := 0
		if len(a) > 2 {
			if v, err = strconv.Atoi(a[2]); err != nil {
				return fmt.Errorf("rollback: version %q is not a number", a[2])
			}
		}
		m, err := reg.Rollback(ctx, a[1], v)
		if err != nil {
			return err
		}
		fmt.Printf("%s is now version %d, with the module of an earlier version (sha256 %s…)\n", m.Name, m.Version, m.Digest[:12])
	case "settings", "secrets":
		return settingsCmd(ctx, &conn, nc, a, *file, os.Stdin, os.Stdout)
	case "reseal-secrets":
		if len(a) > 1 {
			return errors.New("functions reseal-secrets: the previous password comes on stdin or with -file, not as an argument (shell history keeps it)")
		}
		return resealCmd(ctx, &conn, nc, *file, os.Stdin, os.Stdout)
	case "keys":
		if err := need(2); err != nil {
			return err
		}
		return keysCmd(ctx, nc, conn.prefix, a[1], a[2:])
	default:
		fs.Usage()
		return fmt.Errorf("functions: unknown command %q", a[0])
	}
	return nil
}

// keysCmd lists a function's keys, makes one (printing its text, shown
// this once) or revokes one.
func keysCmd(ctx context.Context, nc *nats.Conn, prefix, fn string, a []string) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ks, err := functions.OpenKeyStore(ctx, js, prefix, 0)
	if err != nil {
		return err
	}
	switch {
	case len(a) == 0:
		list, err := ks.List(ctx, fn)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			fmt.Printf("%s has no keys: host functions keys %s create NAME\n", fn, fn)
		}
		for _, k := range list {
			fmt.Printf("%s  %-20s  made %s\n", k.ID, k.Name, k.Created.Format(time.RFC3339))
		}
	case a[0] == "create" && len(a) <= 2:
		name := "default"
		if len(a) == 2 {
			name = a[1]
		}
		k, text, err := ks.Create(ctx, fn, name, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "made key %s (%s) of %s; callers send the line below in %s (it is shown this once)\n", k.ID, k.Name, fn, functions.KeyHeader)
		fmt.Println(text)
	case a[0] == "revoke" && len(a) == 2:
		if err := ks.Revoke(ctx, fn, a[1]); err != nil {
			return err
		}
		fmt.Printf("revoked key %s of %s\n", a[1], fn)
	default:
		return fmt.Errorf("functions keys %s: want no more, create [NAME], or revoke ID", fn)
	}
	return nil
}

// listFirst and listQuiet bound how long "functions list" waits for the
// hosts to say which built-in functions they run: up to listFirst for the
// first answer, then until listQuiet passes without another.
const (
	listFirst = 3 * time.Second
	listQuiet = 300 * time.Millisecond
)

// printBuiltins lists the functions the hosts run that are not deployed
// (the built-ins, and native ones of an embedding program), each with
// the hosts that run it; a deployed function of the same name replaces
// a built-in, and is listed with the deployed ones.
func printBuiltins(w io.Writer, sts []functions.HostStatus) {
	type row struct {
		m     functions.Manifest
		hosts []string
	}
	rows := map[string]*row{}
	var names []string
	for _, s := range sts {
		for _, m := range s.Functions {
			if m.Builtin == "" {
				continue
			}
			r := rows[m.Name]
			if r == nil {
				r = &row{m: m}
				rows[m.Name] = r
				names = append(names, m.Name)
			}
			r.hosts = append(r.hosts, s.Node)
		}
	}
	if len(names) == 0 {
		if len(sts) == 0 {
			fmt.Fprintln(w, "(no host answered: the built-in functions are not shown)")
		}
		return
	}
	sort.Strings(names)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUILT-IN\tKIND\tTRIGGER\tHOSTS")
	for _, n := range names {
		r := rows[n]
		kind := "built-in"
		if r.m.Builtin == "native" {
			kind = "native"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d of %d: %s\n", n, kind, describeTrigger(r.m), len(r.hosts), len(sts), strings.Join(r.hosts, ", "))
	}
	tw.Flush()
}

func printManifests(w io.Writer, ms []functions.Manifest) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tTRIGGER\tMAX DEQUEUE\tTIMEOUT\tCONCURRENCY\tDEPLOYED\tSHA256")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%v\t%d\t%s\t%.12s\n", m.Name, m.Version, describeTrigger(m), m.MaxDequeueCount, m.Timeout.D(), m.Concurrency, m.Deployed.Format(time.RFC3339), m.Digest)
	}
	tw.Flush()
}

// poisonCmd inspects, requeues and deletes poison messages.
func poisonCmd(args []string) error {
	fs := flag.NewFlagSet("poison", flag.ContinueOnError)
	var conn connFlags
	conn.declare(fs)
	cli.Usage(fs, poisonUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	a := fs.Args()
	if len(a) < 2 || (a[0] != "list" && len(a) < 3) {
		fs.Usage()
		return errors.New("poison: missing arguments")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, queues, _, err := conn.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	q := queueadmin.New(queues, nil)
	queue := a[1]
	seqs := func() ([]uint64, error) {
		if a[2] != "all" {
			s, err := strconv.ParseUint(a[2], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not a message sequence number (or all)", a[2])
			}
			return []uint64{s}, nil
		}
		ps, err := q.Poison(ctx, queue, 0, 1<<20)
		var out []uint64
		for _, p := range ps {
			out = append(out, p.Seq)
		}
		return out, err
	}
	switch a[0] {
	case "list":
		ps, err := q.Poison(ctx, queue, 0, 1000)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEQ\tQUEUE\tFUNCTION\tATTEMPTS\tENQUEUED\tPOISONED\tERROR")
		for _, p := range ps {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", p.Seq, p.Queue, p.Function, p.Attempts, p.Enqueued.Format(time.RFC3339), p.Poisoned.Format(time.RFC3339), firstLine(p.Error, 80))
		}
		tw.Flush()
		fmt.Fprintf(os.Stderr, "%d message(s)\n", len(ps))
	case "show":
		s, err := strconv.ParseUint(a[2], 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a message sequence number", a[2])
		}
		p, err := q.PoisonMessage(ctx, queue, s)
		if err != nil {
			return err
		}
		fmt.Printf("seq:       %d\nqueue:     %s\nfunction:  %s\nattempts:  %d\nenqueued:  %s\npoisoned:  %s\nerror:     %s\nbody:      %s\n",
			p.Seq, p.Queue, p.Function, p.Attempts, p.Enqueued.Format(time.RFC3339Nano), p.Poisoned.Format(time.RFC3339Nano), p.Error, p.Body)
	case "requeue", "delete":
		ss, err := seqs()
		if err != nil {
			return err
		}
		for _, s := range ss {
			if a[0] == "requeue" {
				err = q.Requeue(ctx, queue, s)
			} else {
				err = q.Delete(ctx, queue, s)
			}
			if err != nil {
				return err
			}
		}
		fmt.Printf("%sd %d message(s)\n", a[0], len(ss))
	default:
		fs.Usage()
		return fmt.Errorf("poison: unknown command %q", a[0])
	}
	return nil
}

func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// enqueue sends messages to a queue: the arguments, or stdin's lines.
func enqueue(args []string) error {
	fs := flag.NewFlagSet("enqueue", flag.ContinueOnError)
	var conn connFlags
	conn.declare(fs)
	cli.Usage(fs, enqueueUsage)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 {
		fs.Usage()
		return errors.New("enqueue: name a queue")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	nc, q, _, err := conn.connect(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	msgs := fs.Args()[1:]
	if len(msgs) == 0 {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(l) != "" {
				msgs = append(msgs, l)
			}
		}
	}
	for _, m := range msgs {
		if err := q.Enqueue(ctx, fs.Arg(0), []byte(m)); err != nil {
			return err
		}
	}
	fmt.Printf("enqueued %d message(s) on %s\n", len(msgs), fs.Arg(0))
	return nil
}
