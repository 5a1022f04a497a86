package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/functions"
	"github.com/cairn-dev/cairn/functions/admin"
)

// seen is what one invocation of a settings reader read.
type seen struct {
	greeting string
	set      bool
	token    bool // the secret read equals the one set
	err      error
}

// settingsReader registers a native function on th that reads GREETING
// and TOKEN, logs the token's length (never the token), reports what it
// read on out, and then waits for hold (nil: does not wait).
func settingsReader(t *testing.T, th *testHost, name, queue, token string, out chan<- seen, hold <-chan struct{}) {
	t.Helper()
	err := th.h.Functions().Register(fast(functions.Manifest{Name: name, Trigger: functions.Trigger{Queue: queue}}), functions.NativeFunc(func(ctx context.Context, inv *functions.Invocation) error {
		var s seen
		s.greeting, s.set, s.err = inv.Setting("GREETING")
		tok, ok, err := inv.Setting("TOKEN")
		if err != nil {
			s.err = err
		}
		s.token = ok && tok == token
		inv.Log(fmt.Sprintf("read a token of %d bytes", len(tok)))
		out <- s
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
			}
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
}

// operatorSend sends body to the operators' API and returns the status
// and the answer.
func operatorSend(t *testing.T, th *testHost, method, path, body string) (int, string) {
	t.Helper()
	resp := operatorDo(t, th.h.OperatorToken(), method, th.h.HTTPURL()+admin.Prefix+path, strings.NewReader(body))
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func nextSeen(t *testing.T, ch <-chan seen) seen {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("no invocation within 30s")
	}
	return seen{}
}

// TestFunctionSettings: settings and secrets set through the operators'
// API while a function runs are read by its next invocation, on the node
// that took the change and on another node of the cluster (which opens a
// secret sealed under the first one's key: the same node credentials);
// the secret is in no log, no answer of the API, and not in clear in the
// bucket; bad input is refused with a code and stores nothing.
func TestFunctionSettings(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := startNode(t, node.Config{Log: log})
	b := startNode(t, node.Config{NATSURL: a.h.ClientURL(), NATSCreds: a.h.NATSCredsFile(), Log: log})
	ctx := ctxT(t)
	const token = "tok-3f9a1c77e2b04d51-never-shown"
	var answers []string // every answer of the API, to search for the token

	seenA, hold := make(chan seen, 4), make(chan struct{})
	settingsReader(t, a, "reader", "read-a", token, seenA, hold)
	seenB := make(chan seen, 16)
	settingsReader(t, b, "reader-b", "read-b", token, seenB, nil)

	if st, ans := operatorSend(t, a, "POST", "functions/reader/settings/GREETING", "hello"); st != http.StatusOK || !strings.Contains(ans, `"value":"hello"`) {
		t.Fatalf("set GREETING: %d %s", st, ans)
	}
	if err := a.h.Functions().Queues().Enqueue(ctx, "read-a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if s := nextSeen(t, seenA); s.greeting != "hello" || !s.set || s.token || s.err != nil {
		t.Fatalf("first invocation read %+v", s)
	}
	// While it runs: change the setting, set the secret.
	st, ans := operatorSend(t, a, "POST", "functions/reader/settings/GREETING", "bonjour")
	answers = append(answers, ans)
	if st != http.StatusOK {
		t.Fatalf("change GREETING: %d %s", st, ans)
	}
	st, ans = operatorSend(t, a, "POST", "functions/reader/secrets/TOKEN", token)
	answers = append(answers, ans)
	if st != http.StatusOK || !strings.Contains(ans, `"secret":true`) {
		t.Fatalf("set TOKEN: %d %s", st, ans)
	}
	close(hold)
	if err := a.h.Functions().Queues().Enqueue(ctx, "read-a", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if s := nextSeen(t, seenA); s.greeting != "bonjour" || !s.token || s.err != nil {
		t.Fatalf("the next invocation read %+v", s)
	}

	// The other node: a secret set through a's API, sealed under a's key,
	// opened by b; then a change seen by b's next invocations.
	for _, kv := range [][2]string{{"secrets/TOKEN", token}, {"settings/GREETING", "hallo"}} {
		st, ans := operatorSend(t, a, "POST", "functions/reader-b/"+kv[0], kv[1])
		answers = append(answers, ans)
		if st != http.StatusOK {
			t.Fatalf("set %s of reader-b: %d %s", kv[0], st, ans)
		}
	}
	eventually(t, 20*time.Second, "reader-b on the other node reads the setting and the secret", func() bool {
		if err := b.h.Functions().Queues().Enqueue(ctx, "read-b", []byte("x")); err != nil {
			t.Fatal(err)
		}
		s := nextSeen(t, seenB)
		if s.err != nil {
			t.Fatal(s.err)
		}
		return s.greeting == "hallo" && s.token
	})

	// Bad input: coded, nothing stored, the value not echoed.
	js, err := jetstream.New(a.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "CAIRN_SETTINGS")
	if err != nil {
		t.Fatal(err)
	}
	before, err := kv.Get(ctx, "reader")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"POST", "functions/reader/secrets/BAD-NAME", token, 400, "InvalidInput"},
		{"POST", "functions/reader/secrets/9LIVES", token, 400, "InvalidInput"},
		{"POST", "functions/reader/settings/TOKEN", token, 400, "InvalidInput"}, // a secret's name
		{"POST", "functions/reader/secrets/BIG", token + strings.Repeat("x", functions.MaxSettingValue), 413, "RequestBodyTooLarge"},
		{"POST", "functions/reader/secrets/UTF", token + "\xff", 400, "InvalidInput"},
		{"POST", "functions/Reader/secrets/TOKEN", token, 400, "InvalidInput"},
		{"DELETE", "functions/reader/settings/NONE", "", 404, "ResourceNotFound"},
		{"DELETE", "functions/reader/settings/TOKEN", "", 404, "ResourceNotFound"},
		{"PUT", "functions/reader/secrets/TOKEN", token, 405, "UnsupportedHttpVerb"},
	} {
		st, ans := operatorSend(t, a, c.method, c.path, c.body)
		answers = append(answers, ans)
		var e struct{ Code string }
		if st != c.status || json.Unmarshal([]byte(ans), &e) != nil || e.Code != c.code {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.path, st, ans, c.status, c.code)
		}
	}
	after, err := kv.Get(ctx, "reader")
	if err != nil {
		t.Fatal(err)
	}
	if after.Revision() != before.Revision() {
		t.Error("a refused change wrote the record")
	}
	for _, fn := range []string{"Reader", "BAD-NAME"} {
		if _, err := kv.Get(ctx, fn); err != jetstream.ErrKeyNotFound {
			t.Errorf("a record for %q: %v", fn, err)
		}
	}

	// Listed by name; the settings with their values.
	_, ans = operatorSend(t, a, "GET", "functions/reader/settings", "")
	answers = append(answers, ans)
	var list []functions.Setting
	if err := json.Unmarshal([]byte(ans), &list); err != nil || len(list) != 2 || list[0].Name != "GREETING" || *list[0].Value != "bonjour" ||
		list[1].Name != "TOKEN" || !list[1].Secret || list[1].Value != nil || list[1].Set.IsZero() {
		t.Fatalf("settings: %s (%v)", ans, err)
	}
	_, ans = operatorSend(t, a, "GET", "functions/reader/secrets", "")
	answers = append(answers, ans)
	if err := json.Unmarshal([]byte(ans), &list); err != nil || len(list) != 1 || list[0].Name != "TOKEN" {
		t.Fatalf("secrets: %s (%v)", ans, err)
	}

	// Nowhere in clear.
	for _, e := range []string{"reader", "reader-b"} {
		raw, err := kv.Get(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw.Value(), []byte(token)) || bytes.Contains(raw.Value(), []byte("never-shown")) {
			t.Errorf("the secret is in clear in the bucket's entry %s: %s", e, raw.Value())
		}
	}
	for i, ans := range answers {
		if strings.Contains(ans, token) || strings.Contains(ans, "never-shown") {
			t.Errorf("answer %d of the API holds the secret: %s", i, ans)
		}
	}
	var fnLogs []string
	for _, th := range []*testHost{a, b} {
		for _, fn := range []string{"reader", "reader-b"} {
			lines, _ := th.h.Functions().FunctionLogs(fn)
			for _, l := range lines {
				fnLogs = append(fnLogs, l.Line)
			}
		}
	}
	if !strings.Contains(strings.Join(fnLogs, "\n"), fmt.Sprintf("read a token of %d bytes", len(token))) {
		t.Fatalf("the function's logs: %q", fnLogs)
	}
	if !strings.Contains(logs.String(), "read a token of") {
		t.Fatal("the node's log was not captured")
	}
	for _, l := range append(fnLogs, logs.String()) {
		if strings.Contains(l, token) || strings.Contains(l, "never-shown") {
			t.Errorf("a log holds the secret: %s", l)
		}
	}

	// Removed: the next invocation reads it unset.
	if st, _ := operatorSend(t, a, "DELETE", "functions/reader/secrets/TOKEN", ""); st != http.StatusNoContent {
		t.Fatalf("remove TOKEN: %d", st)
	}
	if err := a.h.Functions().Queues().Enqueue(ctx, "read-a", []byte("3")); err != nil {
		t.Fatal(err)
	}
	if s := nextSeen(t, seenA); s.token || s.greeting != "bonjour" {
		t.Fatalf("after the removal: %+v", s)
	}
}

// TestGuestReadsSettings: a WebAssembly guest reads settings and secrets
// through the Go SDK (ABI op 9): set, empty, unset, and changed between
// two invocations without a redeploy.
func TestGuestReadsSettings(t *testing.T) {
	th := startHost(t, "")
	deploy(t, th, functions.Manifest{Name: "guest-settings"}, buildGuest(t, "testdata/guest", ""))
	ask := func(name string) string {
		t.Helper()
		r, err := th.nc.Request(functions.DirectSubject("cairn", "guest-settings"), []byte("setting:"+name), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if e := r.Header.Get(functions.HeaderError); e != "" {
			t.Fatalf("setting %s: %s", name, e)
		}
		return string(r.Data)
	}
	set := func(kind, name, value string) {
		t.Helper()
		if st, ans := operatorSend(t, th, "POST", "functions/guest-settings/"+kind+"/"+name, value); st != http.StatusOK {
			t.Fatalf("set %s: %d %s", name, st, ans)
		}
	}
	if got := ask("GREETING"); got != "unset" {
		t.Fatalf("before any: %q", got)
	}
	set("settings", "GREETING", "hello")
	set("settings", "EMPTY", "")
	set("secrets", "TOKEN", "guest-token")
	for name, want := range map[string]string{"GREETING": "=hello", "EMPTY": "=", "TOKEN": "=guest-token", "OTHER": "unset"} {
		if got := ask(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	set("settings", "GREETING", "bonjour")
	if got := ask("GREETING"); got != "=bonjour" {
		t.Fatalf("after the change: %q", got)
	}
}
