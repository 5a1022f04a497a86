package cli

import (
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func testFlags() (*flag.FlagSet, *string, *bool, *time.Duration) {
	fs := flag.NewFlagSet("poison", flag.ContinueOnError)
	url := fs.String("nats-url", "nats://127.0.0.1:4222", "server")
	verbose := fs.Bool("v", false, "verbose")
	wait := fs.Duration("wait", time.Second, "wait")
	fs.String("failpoint", "", "for tests")
	Hide(fs, "failpoint")
	fs.Usage = func() { io.WriteString(fs.Output(), "usage: poison\n") }
	return fs, url, verbose, wait
}

// TestParseInterleaved: flags are taken wherever they stand among the
// positional arguments, "--" ends them, and an unknown flag is refused
// wherever it stands; none is ever left among the positional arguments.
func TestParseInterleaved(t *testing.T) {
	for _, c := range []struct {
		args    []string
		url     string
		verbose bool
		wait    time.Duration
		rest    string
		err     string
	}{
		{args: nil, url: "nats://127.0.0.1:4222", wait: time.Second},
		{args: []string{"list", "q"}, url: "nats://127.0.0.1:4222", wait: time.Second, rest: "list q"},
		{args: []string{"list", "-nats-url", "X", "q"}, url: "X", wait: time.Second, rest: "list q"},
		{args: []string{"list", "q", "--nats-url=Y"}, url: "Y", wait: time.Second, rest: "list q"},
		{args: []string{"-v", "list", "q", "-wait", "5s"}, url: "nats://127.0.0.1:4222", verbose: true, wait: 5 * time.Second, rest: "list q"},
		{args: []string{"list", "-v", "q"}, url: "nats://127.0.0.1:4222", verbose: true, wait: time.Second, rest: "list q"},
		{args: []string{"list", "-v=false", "q"}, url: "nats://127.0.0.1:4222", wait: time.Second, rest: "list q"},
		{args: []string{"enqueue", "q", "--", "-wait", "-h"}, url: "nats://127.0.0.1:4222", wait: time.Second, rest: "enqueue q -wait -h"},
		{args: []string{"x", "-", "y"}, url: "nats://127.0.0.1:4222", wait: time.Second, rest: "x - y"},
		{args: []string{"list", "-failpoint", "a.b", "q"}, url: "nats://127.0.0.1:4222", wait: time.Second, rest: "list q"},
		{args: []string{"list", "q", "-nope"}, err: "flag provided but not defined: -nope"},
		{args: []string{"list", "-wait", "soon"}, err: "invalid value"},
		{args: []string{"list", "q", "-nats-url"}, err: "flag needs an argument"},
	} {
		fs, url, verbose, wait := testFlags()
		err := Parse(fs, c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "poison: ") || !strings.Contains(err.Error(), "(-h for the flags)") {
				t.Errorf("%q: %v, want an error with %q and the hint", c.args, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if *url != c.url || *verbose != c.verbose || *wait != c.wait || strings.Join(fs.Args(), " ") != c.rest {
			t.Errorf("%q: url %q verbose %v wait %v args %q; want %q %v %v %q", c.args, *url, *verbose, *wait, fs.Args(), c.url, c.verbose, c.wait, c.rest)
		}
	}
}

// TestParseHelp: -h, -help, --help anywhere before "--", or "help" first,
// print the usage on stdout and return flag.ErrHelp; "help" further on is
// a name like any other.
func TestParseHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		help bool
	}{
		{[]string{"-h"}, true},
		{[]string{"--help"}, true},
		{[]string{"-help"}, true},
		{[]string{"undeploy", "-h"}, true},
		{[]string{"list", "q", "--help", "-nats-url", "x"}, true},
		{[]string{"help"}, true},
		{[]string{"help", "list"}, true},
		{[]string{"list", "help"}, false},
		{[]string{"list", "--", "-h"}, false},
	} {
		fs, _, _, _ := testFlags()
		out := captureStdout(t, func() error { return Parse(fs, c.args) })
		if c.help != errors.Is(out.err, flag.ErrHelp) || c.help != strings.Contains(out.text, "usage: poison") {
			t.Errorf("%q: %v, printed %q; help wanted: %v", c.args, out.err, out.text, c.help)
		}
	}
}

// TestPrintFlags: each flag with its environment variable and default,
// hidden ones left out; Usage prints the text first.
func TestPrintFlags(t *testing.T) {
	fs, _, _, _ := testFlags()
	Usage(fs, "usage: host poison list <queue>\n\n")
	out := captureStdout(t, func() error { return Help(fs) })
	for _, want := range []string{"usage: host poison list <queue>", "-nats-url string", "[CAIRN_NATS_URL]", `(default "nats://127.0.0.1:4222")`, "-wait duration", "(default 1s)", "[CAIRN_WAIT]", "-v\n", "[CAIRN_V]"} {
		if !strings.Contains(out.text, want) {
			t.Errorf("help lacks %q:\n%s", want, out.text)
		}
	}
	if strings.Contains(out.text, "failpoint") || strings.Contains(out.text, "CAIRN_FAILPOINT") {
		t.Errorf("help shows the hidden flag:\n%s", out.text)
	}
	// Hidden is still read from the environment.
	t.Setenv("CAIRN_FAILPOINT", "x.y")
	fs, _, _, _ = testFlags()
	if err := Parse(fs, nil); err != nil || fs.Lookup("failpoint").Value.String() != "x.y" {
		t.Fatalf("hidden flag from the environment: %v %q", err, fs.Lookup("failpoint").Value)
	}
	if EnvName("nats-url") != "CAIRN_NATS_URL" {
		t.Fatal(EnvName("nats-url"))
	}
}

type captured struct {
	text string
	err  error
}

func captureStdout(t *testing.T, f func() error) captured {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() { b, _ := io.ReadAll(r); done <- string(b) }()
	err = f()
	w.Close()
	os.Stdout = stdout
	return captured{<-done, err}
}
