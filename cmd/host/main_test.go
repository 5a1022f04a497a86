package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/cmd/internal/natsauth"
	"github.com/cairn-dev/cairn/cmd/internal/node"
)

func TestFlagsFromEnvironment(t *testing.T) {
	t.Setenv("CAIRN_DATA", "/env/data")
	t.Setenv("CAIRN_NATS_URL", "nats://env:4222")
	t.Setenv("CAIRN_REPLICAS", "3")
	t.Setenv("CAIRN_NATS_USERS", "/env/users.json")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := hostFlags(fs)
	if err := cli.Parse(fs, []string{"-data", "/flag/data"}); err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/flag/data" || cfg.NATSURL != "nats://env:4222" || cfg.Replicas != 3 || cfg.NATSUsers != "/env/users.json" || cfg.HTTP != "127.0.0.1:10002" || cfg.NATSListen != "127.0.0.1:4222" {
		t.Fatalf("config %+v", cfg)
	}
	t.Setenv("CAIRN_REPLICAS", "three")
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	hostFlags(fs)
	if err := cli.Parse(fs, nil); err == nil || !strings.Contains(err.Error(), "CAIRN_REPLICAS") {
		t.Fatalf("bad environment value: %v", err)
	}
}

// TestOutboxSubjectsFlag: -outbox-subjects a,b, or CAIRN_OUTBOX_SUBJECTS,
// with the command line winning.
func TestOutboxSubjectsFlag(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := hostFlags(fs)
	if err := cli.Parse(fs, nil); err != nil || cfg.OutboxSubjects != nil {
		t.Fatalf("default: %q, %v", cfg.OutboxSubjects, err)
	}
	t.Setenv("CAIRN_OUTBOX_SUBJECTS", "audit.>")
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg = hostFlags(fs)
	if err := cli.Parse(fs, nil); err != nil || strings.Join(cfg.OutboxSubjects, "|") != "audit.>" {
		t.Fatalf("environment: %q, %v", cfg.OutboxSubjects, err)
	}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg = hostFlags(fs)
	if err := cli.Parse(fs, []string{"-outbox-subjects", "orders.>, billing.*.created,"}); err != nil || strings.Join(cfg.OutboxSubjects, "|") != "orders.>|billing.*.created" {
		t.Fatalf("flag: %q, %v", cfg.OutboxSubjects, err)
	}
	cfg.DataDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestOutboxCoreFlag: -outbox-core a,b, or CAIRN_OUTBOX_CORE, with the
// command line winning.
func TestOutboxCoreFlag(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := hostFlags(fs)
	if err := cli.Parse(fs, nil); err != nil || cfg.OutboxCore != nil {
		t.Fatalf("default: %q, %v", cfg.OutboxCore, err)
	}
	t.Setenv("CAIRN_OUTBOX_CORE", "notify.>")
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg = hostFlags(fs)
	if err := cli.Parse(fs, nil); err != nil || strings.Join(cfg.OutboxCore, "|") != "notify.>" {
		t.Fatalf("environment: %q, %v", cfg.OutboxCore, err)
	}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg = hostFlags(fs)
	if err := cli.Parse(fs, []string{"-outbox-core", "cache.*.invalidate, notify.>"}); err != nil || strings.Join(cfg.OutboxCore, "|") != "cache.*.invalidate|notify.>" {
		t.Fatalf("flag: %q, %v", cfg.OutboxCore, err)
	}
	cfg.DataDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  node.Config
		want string
	}{
		{node.Config{DataDir: "d", Replicas: 3}, "needs -nats-url"},
		{node.Config{DataDir: "d", Replicas: 7, NATSURL: "nats://x"}, "between 1 and 5"},
		{node.Config{DataDir: "d", NATSListen: "nonsense"}, "nats-listen"},
		{node.Config{DataDir: "d", Prefix: "Bad.Prefix"}, "prefix"},
		{node.Config{}, "data directory is required"},
		{node.Config{DataDir: "d", OperatorToken: "short"}, "at least 16"},
		{node.Config{DataDir: "d", TLSCert: "cert.pem"}, "-tls-key"},
		{node.Config{DataDir: "d", NATSURL: "nats://x", NATSUsers: "users.json"}, "configure the users on that server"},
		{node.Config{DataDir: "d", OutboxSubjects: []string{"orders.>", "orders.>.x"}}, "-outbox-subjects"},
		{node.Config{DataDir: "d", OutboxSubjects: []string{"$JS.API.>"}}, "-outbox-subjects"},
		{node.Config{DataDir: "d", OutboxSubjects: []string{"cairn.j.>"}}, "node's prefix"},
		{node.Config{DataDir: "d", OutboxCore: []string{"notify.>", "notify.>.x"}}, "-outbox-core"},
		{node.Config{DataDir: "d", OutboxCore: []string{"_INBOX.>"}}, "-outbox-core"},
		{node.Config{DataDir: "d", OutboxCore: []string{"not a subject"}}, "-outbox-core"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error about %s", c.cfg, err, c.want)
		}
	}
	ok := node.Config{DataDir: "d"}
	if err := ok.Validate(); err != nil || ok.Replicas != 1 || ok.Prefix != "cairn" {
		t.Fatalf("defaults: %+v, %v", ok, err)
	}
}

func TestAccountFlags(t *testing.T) {
	t.Setenv("CAIRN_ACCOUNTS", "prod:cHJvZGtleQ==,test:dGVzdGtleQ==")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := hostFlags(fs)
	if err := cli.Parse(fs, []string{"-dev-account=false"}); err != nil {
		t.Fatal(err)
	}
	if len(cfg.API.Accounts) != 2 || cfg.API.Accounts[0].Name != "prod" || string(cfg.API.Accounts[1].Key) != "testkey" || !cfg.API.NoDevAccount {
		t.Fatalf("accounts %+v, no dev account %v", cfg.API.Accounts, cfg.API.NoDevAccount)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		"-accounts=nokey":             "name:base64key",
		"-accounts=a:!!":              "not base64",
		"-dev-account=false":          "no account can sign",
		"-accounts=abc:eA==,abc:eA==": "twice",
		"-accounts=a:eA==":            "3 to 24 characters",
		"-accounts=Contoso:eA==":      "lowercase letters and digits",
		"-accounts=healthz:eA==":      "reserved",
		"-accounts=readyz:eA==":       "reserved",
	} {
		t.Setenv("CAIRN_ACCOUNTS", "")
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg := hostFlags(fs)
		err := cli.Parse(fs, strings.Fields(args))
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error about %q", args, err, want)
		}
	}
}

func TestSecurityFlags(t *testing.T) {
	t.Setenv("CAIRN_OPERATOR_TOKEN", "from-the-environment-0123")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := hostFlags(fs)
	if err := cli.Parse(fs, []string{"-cors-origins", "https://app.example,http://localhost:5173", "-tls-cert", "c.pem", "-tls-key", "k.pem"}); err != nil {
		t.Fatal(err)
	}
	if cfg.OperatorToken != "from-the-environment-0123" || cfg.TLSCert != "c.pem" || cfg.TLSKey != "k.pem" {
		t.Fatalf("config %+v", cfg)
	}
	if !cfg.API.CORS.Named("https://app.example") || !cfg.API.CORS.Named("http://localhost:5173") || cfg.API.CORS.Allows("https://other.example") {
		t.Fatalf("-cors-origins: %+v", cfg.API.CORS)
	}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg = hostFlags(fs)
	if err := cli.Parse(fs, nil); err != nil || cfg.API.CORS.Enabled() {
		t.Fatalf("CORS is on by default: %v", err)
	}
	if err := cli.Parse(fs, []string{"-cors-origins", "https://app.example/"}); err == nil || !strings.Contains(err.Error(), "not an origin") {
		t.Fatalf("an origin with a path: %v", err)
	}
}

// TestHTTPHostsFlag: -http-hosts (or CAIRN_HTTP_HOSTS) lists the names
// the HTTP API answers; none by default; a name with a port is refused.
func TestHTTPHostsFlag(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg := hostFlags(fs)
	if err := cli.Parse(fs, nil); err != nil || cfg.API.Hosts.Listed() || cfg.API.Hosts.Allows("tables.example.com") {
		t.Fatalf("names listed by default: %v %s", err, cfg.API.Hosts)
	}
	t.Setenv("CAIRN_HTTP_HOSTS", "tables.example.com, console.example.com")
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg = hostFlags(fs)
	if err := cli.Parse(fs, nil); err != nil || !cfg.API.Hosts.Allows("tables.example.com:10002") || !cfg.API.Hosts.Allows("console.example.com") {
		t.Fatalf("from the environment: %v %s", err, cfg.API.Hosts)
	}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg = hostFlags(fs)
	if err := cli.Parse(fs, []string{"-http-hosts", "a.example.com"}); err != nil || !cfg.API.Hosts.Allows("a.example.com") || cfg.API.Hosts.Allows("tables.example.com") {
		t.Fatalf("the flag over the environment: %v %s", err, cfg.API.Hosts)
	}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	hostFlags(fs)
	if err := cli.Parse(fs, []string{"-http-hosts", "a.example.com:443"}); err == nil || !strings.Contains(err.Error(), "port") {
		t.Fatalf("a name with a port: %v", err)
	}
}

func TestQueueMaxMessagesFlag(t *testing.T) {
	t.Setenv("CAIRN_QUEUE_MAX_MESSAGES", "2500")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := hostFlags(fs)
	if err := cli.Parse(fs, nil); err != nil || cfg.Functions.QueueMaxMessages != 2500 {
		t.Fatalf("from the environment: %d, %v", cfg.Functions.QueueMaxMessages, err)
	}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg = hostFlags(fs)
	if err := cli.Parse(fs, []string{"-queue-max-messages", "-1"}); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = "d"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "queue-max-messages") {
		t.Fatalf("a negative cap: %v", err)
	}
}

// TestQueueMaxBytesFlag: -queue-max-bytes is also CAIRN_QUEUE_MAX_BYTES;
// a bound below one message of the largest size is refused.
func TestQueueMaxBytesFlag(t *testing.T) {
	t.Setenv("CAIRN_QUEUE_MAX_BYTES", "5000000")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := hostFlags(fs)
	if err := cli.Parse(fs, nil); err != nil || cfg.Functions.QueueMaxBytes != 5_000_000 {
		t.Fatalf("from the environment: %d, %v", cfg.Functions.QueueMaxBytes, err)
	}
	for _, bad := range []string{"-1", "1000"} {
		fs = flag.NewFlagSet("serve", flag.ContinueOnError)
		cfg = hostFlags(fs)
		if err := cli.Parse(fs, []string{"-queue-max-bytes", bad}); err != nil {
			t.Fatal(err)
		}
		cfg.DataDir = "d"
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "queue-max-bytes") {
			t.Fatalf("a bound of %s: %v", bad, err)
		}
	}
}

// TestValueFlags: the large values' flags reach the node's
// configuration (and come from the environment too); a bound below its
// least is refused at start, naming the flag.
func TestValueFlags(t *testing.T) {
	t.Setenv("CAIRN_VALUE_MAX_BYTES", "2097152")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := hostFlags(fs)
	if err := cli.Parse(fs, []string{"-value-claim-window", "20m", "-value-sweep-margin", "1m", "-value-sweep-every", "30s"}); err != nil {
		t.Fatal(err)
	}
	if cfg.API.MaxValue != 2<<20 || cfg.Commit.ClaimWindow != 20*time.Minute || cfg.Functions.ValueSweepMargin != time.Minute || cfg.Functions.ValueSweepEvery != 30*time.Second {
		t.Fatalf("parsed: max %d, window %v, margin %v, every %v", cfg.API.MaxValue, cfg.Commit.ClaimWindow, cfg.Functions.ValueSweepMargin, cfg.Functions.ValueSweepEvery)
	}
	cfg.DataDir = "d"
	if err := cfg.Validate(); err != nil {
		t.Fatalf("valid values refused: %v", err)
	}
	for _, bad := range [][2]string{
		{"-value-max-bytes", "-1"},
		{"-value-claim-window", "-1h"},
		{"-value-claim-window", "10ms"},
		{"-value-sweep-margin", "-5m"},
		{"-value-sweep-every", "1ns"},
		{"-value-sessions", "-1"},
		{"-value-sessions", "5000"},
	} {
		fs = flag.NewFlagSet("serve", flag.ContinueOnError)
		cfg = hostFlags(fs)
		if err := cli.Parse(fs, bad[:]); err != nil {
			t.Fatal(err)
		}
		cfg.DataDir = "d"
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s %s: %v, want an error naming the flag", bad[0], bad[1], err)
		}
	}
}

// TestSnapshotsSharedFlag: snapshots are shared by default, and
// -snapshots-shared=false (or CAIRN_SNAPSHOTS_SHARED=false) keeps them
// the node's own.
func TestSnapshotsSharedFlag(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := hostFlags(fs)
	if err := cli.Parse(fs, nil); err != nil || cfg.NoSharedSnapshots || cfg.NoSnapshots {
		t.Fatalf("by default: shared off %v, snapshots off %v, %v", cfg.NoSharedSnapshots, cfg.NoSnapshots, err)
	}
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg = hostFlags(fs)
	if err := cli.Parse(fs, []string{"-snapshots-shared=false"}); err != nil || !cfg.NoSharedSnapshots || cfg.NoSnapshots {
		t.Fatalf("-snapshots-shared=false: shared off %v, snapshots off %v, %v", cfg.NoSharedSnapshots, cfg.NoSnapshots, err)
	}
	t.Setenv("CAIRN_SNAPSHOTS_SHARED", "false")
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg = hostFlags(fs)
	if err := cli.Parse(fs, nil); err != nil || !cfg.NoSharedSnapshots {
		t.Fatalf("from the environment: shared off %v, %v", cfg.NoSharedSnapshots, err)
	}
}

func TestUnknownSubcommand(t *testing.T) {
	if err := run([]string{"frobnicate"}); err == nil {
		t.Fatal("unknown subcommand accepted")
	}
}

func TestNATSPassword(t *testing.T) {
	var out strings.Builder
	if err := natsPassword([]string{"-cost", "4"}, strings.NewReader("s3cret pass\r\nignored\n"), &out); err != nil {
		t.Fatal(err)
	}
	hash := strings.TrimSuffix(out.String(), "\n")
	if !strings.HasPrefix(hash, "$2a$04$") || strings.Contains(hash, "\n") {
		t.Fatalf("hash %q", out.String())
	}
	if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte("s3cret pass")); err != nil {
		t.Fatalf("the hash is not the password's: %v", err)
	}
	// The users file takes it as a hashed password.
	if _, err := natsauth.ParseUsers([]byte(`{"users":[{"user":"u","password":"` + hash + `","queues":["mail"]}]}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{nil, "", "no password"},
		{nil, "\n", "no password"},
		{[]string{"pw"}, "pw\n", "on stdin"},
		{[]string{"-cost", "3"}, "pw\n", "-cost"},
		{nil, strings.Repeat("x", 73), "72 bytes"},
	} {
		err := natsPassword(c.args, strings.NewReader(c.stdin), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %q: %v, want an error with %q", c.args, c.stdin, err, c.want)
		}
	}
}
