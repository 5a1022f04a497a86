package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
)

// lockedBuffer is a log destination the node's goroutines share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogFormatJSON: CAIRN_LOG_FORMAT=json makes a node log one JSON
// object per line, from its start to its stop.
func TestLogFormatJSON(t *testing.T) {
	t.Setenv("CAIRN_LOG_FORMAT", "json")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	logger := logFlags(fs)
	if err := cli.Parse(fs, nil); err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	log, err := logger(&out)
	if err != nil {
		t.Fatal(err)
	}
	_, stop := nodetest.Start(t, node.Config{Log: log})
	stop()
	msgs := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	lines := 0
	for sc.Scan() {
		lines++
		var rec struct {
			Time  string `json:"time"`
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil || rec.Time == "" || rec.Level == "" {
			t.Fatalf("line %d is not a JSON log record: %q (%v)", lines, sc.Text(), err)
		}
		msgs[rec.Msg] = true
	}
	if !msgs["cairn host ready"] || !msgs["stopped"] {
		t.Fatalf("%d lines without the ready and stopped records:\n%s", lines, out.String())
	}
}

// TestLogFormatFlag: text by default, the command line wins over the
// environment, anything else is refused naming the flag.
func TestLogFormatFlag(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	logger := logFlags(fs)
	if err := cli.Parse(fs, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log, err := logger(&out)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hello", "k", "v")
	if got := out.String(); !strings.Contains(got, "msg=hello k=v") {
		t.Fatalf("text log: %q", got)
	}
	t.Setenv("CAIRN_LOG_FORMAT", "json")
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	logger = logFlags(fs)
	if err := cli.Parse(fs, []string{"-log-format", "text"}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if log, err = logger(&out); err != nil {
		t.Fatal(err)
	}
	if log.Info("hello"); strings.HasPrefix(out.String(), "{") {
		t.Fatalf("the flag did not win over the environment: %q", out.String())
	}
	for _, args := range [][]string{{"-log-format", "xml"}, {"-log-level", "loud"}} {
		fs = flag.NewFlagSet("serve", flag.ContinueOnError)
		logger = logFlags(fs)
		if err := cli.Parse(fs, args); err != nil {
			t.Fatal(err)
		}
		if _, err := logger(&out); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Fatalf("%q: %v", args, err)
		}
	}
}
