package functions

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal/jstest"
)

// TestSettingsGolden: a record written in format 1 (testdata, kept
// forever) still decodes, and its secret opens with the key derived from
// the password it was sealed under, and with no other.
func TestSettingsGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/settings-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := decodeSettings(b)
	if err != nil {
		t.Fatal(err)
	}
	if st := rec.Values["REGION"]; st.Secret || st.Value != "eu-west" || !st.Set.Equal(time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("REGION: %+v", st)
	}
	st := rec.Values["API_KEY"]
	if !st.Secret || st.Value != "" || len(st.Sealed) == 0 || st.Sealed[0] != sealVersion {
		t.Fatalf("API_KEY: %+v", st)
	}
	s, err := newSealer(SecretsKey([]byte("golden password")))
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.open("golden-fn", "API_KEY", st.Sealed)
	if err != nil || string(v) != "golden secret value" {
		t.Fatalf("open: %q, %v", v, err)
	}
	other, _ := newSealer(SecretsKey([]byte("another password")))
	if _, err := other.open("golden-fn", "API_KEY", st.Sealed); err == nil {
		t.Fatal("opened with another password's key")
	}
	// Bound to its place: under another name or function it does not open.
	if _, err := s.open("golden-fn", "OTHER", st.Sealed); err == nil {
		t.Fatal("opened under another name")
	}
	if _, err := s.open("other-fn", "API_KEY", st.Sealed); err == nil {
		t.Fatal("opened under another function")
	}
	// A newer format is refused, never guessed at; so is a damaged one.
	newer := append([]byte{sealVersion + 1}, st.Sealed[1:]...)
	if _, err := s.open("golden-fn", "API_KEY", newer); err == nil || !strings.Contains(err.Error(), "format 2") {
		t.Fatalf("a newer format: %v", err)
	}
	for i := range st.Sealed {
		bad := bytes.Clone(st.Sealed)
		bad[i] ^= 1
		if _, err := s.open("golden-fn", "API_KEY", bad); err == nil {
			t.Fatalf("opened with byte %d changed", i)
		}
	}
	if _, err := decodeSettings([]byte(`{"v":2,"values":{}}`)); err == nil {
		t.Fatal("decoded a record of version 2")
	}
}

func TestSecretsKey(t *testing.T) {
	if SecretsKey(nil) != nil {
		t.Fatal("a key without a password")
	}
	a, b := SecretsKey([]byte("p")), SecretsKey([]byte("p"))
	if len(a) != 32 || !bytes.Equal(a, b) || bytes.Equal(a, SecretsKey([]byte("q"))) {
		t.Fatalf("keys: %x %x", a, b)
	}
	// The bounds count a sealed value less sealOverhead: what seal adds.
	s, err := newSealer(a)
	if err != nil {
		t.Fatal(err)
	}
	if sealed, err := s.seal("f", "N", []byte("value")); err != nil || len(sealed)-len("value") != sealOverhead {
		t.Fatalf("sealing adds %d bytes, sealOverhead says %d (%v)", len(sealed)-len("value"), sealOverhead, err)
	}
}

func openTestSettings(t *testing.T, key []byte) (*Settings, jetstream.KeyValue, context.Context) {
	t.Helper()
	_, nc := jstest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenSettings(ctx, js, "cairn", 1, key)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "CAIRN_SETTINGS")
	if err != nil {
		t.Fatal(err)
	}
	return s, kv, ctx
}

// rawSettings is the bucket's entry of fn as stored (nil when none).
func rawSettings(t *testing.T, ctx context.Context, kv jetstream.KeyValue, fn string) []byte {
	t.Helper()
	e, err := kv.Get(ctx, fn)
	if err == jetstream.ErrKeyNotFound {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return e.Value()
}

// TestSettingsRefusals: every bad input is a coded error that quotes no
// value, and leaves the bucket as it was.
func TestSettingsRefusals(t *testing.T) {
	s, kv, ctx := openTestSettings(t, SecretsKey([]byte("node password")))
	const secret = "s3cr3t-value-never-shown"
	if _, _, err := s.Set(ctx, "fn-a", "KEEP", "kept", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Set(ctx, "fn-a", "TOKEN", secret, true); err != nil {
		t.Fatal(err)
	}
	before := rawSettings(t, ctx, kv, "fn-a")
	big := strings.Repeat("x", MaxSettingValue+1)
	cases := []struct {
		fn, name, value string
		secret          bool
		code            engine.Code
	}{
		{"fn-a", "", "v", false, engine.CodeInvalidInput},
		{"fn-a", "1ABC", "v", false, engine.CodeInvalidInput},
		{"fn-a", "A-B", "v", false, engine.CodeInvalidInput},
		{"fn-a", "A.B", "v", true, engine.CodeInvalidInput},
		{"fn-a", "Ä", "v", false, engine.CodeInvalidInput},
		{"fn-a", strings.Repeat("A", MaxSettingName+1), "v", false, engine.CodeInvalidInput},
		{"Bad_Fn", "A", "v", false, engine.CodeInvalidInput},
		{"fn-a", "A", big, false, engine.CodeRequestBodyTooLarge},
		{"fn-a", "A", secret + big, true, engine.CodeRequestBodyTooLarge},
		{"fn-a", "A", secret + "\xff", true, engine.CodeInvalidInput},
		{"fn-a", "TOKEN", "a setting over a secret", false, engine.CodeInvalidInput},
		{"fn-a", "KEEP", secret, true, engine.CodeInvalidInput},
	}
	for _, c := range cases {
		_, _, err := s.Set(ctx, c.fn, c.name, c.value, c.secret)
		if engine.ErrorCode(err) != c.code {
			t.Errorf("Set(%q, %.20q): %v, want %s", c.fn, c.name, err, c.code)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("the error quotes the value: %v", err)
		}
	}
	if _, err := s.Remove(ctx, "fn-a", "MISSING", false); engine.ErrorCode(err) != engine.CodeResourceNotFound {
		t.Errorf("remove a missing one: %v", err)
	}
	if _, err := s.Remove(ctx, "fn-a", "TOKEN", false); engine.ErrorCode(err) != engine.CodeResourceNotFound {
		t.Errorf("remove a secret as a setting: %v", err)
	}
	if after := rawSettings(t, ctx, kv, "fn-a"); !bytes.Equal(before, after) {
		t.Fatalf("a refusal changed the record:\n%s\n%s", before, after)
	}
	if raw := rawSettings(t, ctx, kv, "Bad_Fn"); raw != nil {
		t.Fatalf("stored for a bad function name: %s", raw)
	}

	// The count and the total, exactly.
	for i := 2; i < MaxSettings; i++ {
		if _, _, err := s.Set(ctx, "fn-a", "N"+strings.Repeat("_", i), "v", false); err != nil {
			t.Fatal(i, err)
		}
	}
	before = rawSettings(t, ctx, kv, "fn-a")
	if _, _, err := s.Set(ctx, "fn-a", "ONE_MORE", "v", false); engine.ErrorCode(err) != engine.CodeInvalidInput {
		t.Fatalf("setting %d: %v", MaxSettings+1, err)
	}
	if _, _, err := s.Set(ctx, "fn-a", "KEEP", "replaced", false); err != nil {
		t.Fatalf("replace at the count: %v", err)
	}
	s2, kv2, ctx2 := openTestSettings(t, nil)
	for i := range MaxSettingsBytes/MaxSettingValue - 1 {
		if _, _, err := s2.Set(ctx2, "fn-a", "V"+strings.Repeat("_", i), strings.Repeat("v", MaxSettingValue), false); err != nil {
			t.Fatal(i, err)
		}
	}
	before = rawSettings(t, ctx2, kv2, "fn-a")
	if _, _, err := s2.Set(ctx2, "fn-a", "LAST", strings.Repeat("v", MaxSettingValue), false); engine.ErrorCode(err) != engine.CodeRequestBodyTooLarge {
		t.Fatalf("over the total: %v", err)
	}
	if after := rawSettings(t, ctx2, kv2, "fn-a"); !bytes.Equal(before, after) {
		t.Fatal("the refusal over the total changed the record")
	}
	// Without a key, secrets are refused and settings work.
	if _, _, err := s2.Set(ctx2, "fn-a", "S", "x", true); err != ErrNoSecretsKey {
		t.Fatalf("a secret without a key: %v", err)
	}
}

// TestSecretAtRest: a secret is stored sealed (its bytes are not in the
// bucket's entry), listed by name only, and opens to its value.
func TestSecretAtRest(t *testing.T) {
	s, kv, ctx := openTestSettings(t, SecretsKey([]byte("node password")))
	const secret = "s3cr3t-value-never-shown"
	st, rev, err := s.Set(ctx, "fn-a", "TOKEN", secret, true)
	if err != nil || st.Value != nil || !st.Secret || rev == 0 {
		t.Fatalf("set: %+v %d %v", st, rev, err)
	}
	if _, _, err := s.Set(ctx, "fn-a", "REGION", "eu", false); err != nil {
		t.Fatal(err)
	}
	raw := rawSettings(t, ctx, kv, "fn-a")
	if bytes.Contains(raw, []byte(secret)) || bytes.Contains(raw, []byte("c3t-val")) {
		t.Fatalf("the secret is in the bucket in clear: %s", raw)
	}
	all, err := s.List(ctx, "fn-a")
	if err != nil || len(all) != 2 || all[0].Name != "REGION" || *all[0].Value != "eu" || all[1].Name != "TOKEN" || all[1].Value != nil || all[1].Set.IsZero() {
		t.Fatalf("list: %+v %v", all, err)
	}
	rec, err := decodeSettings(raw)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.seal.open("fn-a", "TOKEN", rec.Values["TOKEN"].Sealed)
	if err != nil || string(v) != secret {
		t.Fatalf("open: %q %v", v, err)
	}
	if _, err := s.Remove(ctx, "fn-a", "TOKEN", true); err != nil {
		t.Fatal(err)
	}
	if all, _ := s.List(ctx, "fn-a"); len(all) != 1 {
		t.Fatalf("after remove: %+v", all)
	}
	// History 1: the sealed value is gone from the stream, not only
	// from the key's last value.
	hist, err := kv.History(ctx, "fn-a")
	if err != nil || len(hist) != 1 {
		t.Fatalf("history: %d entries, %v", len(hist), err)
	}
}

// TestSettingsRace: concurrent sets of distinct names of one function
// all land (each compare-and-set retried), none lost.
func TestSettingsRace(t *testing.T) {
	s, _, ctx := openTestSettings(t, SecretsKey([]byte("node password")))
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, _, err := s.Set(ctx, "fn-a", "K"+strings.Repeat("_", i), "v", i%2 == 0)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil && engine.ErrorCode(err) != engine.CodeServerBusy {
			t.Fatal(err)
		}
	}
	all, err := s.List(ctx, "fn-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < n-1 { // ServerBusy after ten lost races is possible, not likely
		t.Fatalf("%d of %d sets landed", len(all), n)
	}
}

// BenchmarkSettingLookup is the cost of a function's read of a setting
// (Invocation.Setting, op 9 without the ABI's encoding): a map lookup
// under a read lock.
func BenchmarkSettingLookup(b *testing.B) {
	c := newSettingsCache()
	vals := map[string]cachedSetting{}
	for i := range MaxSettings {
		vals["NAME_"+strings.Repeat("X", i)] = cachedSetting{value: "v"}
	}
	c.fns["billing"] = vals
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok, _ := c.lookup("billing", "NAME_XXXX"); !ok {
				b.Fatal("not found")
			}
		}
	})
}

// TestCachedSecretThatDoesNotOpen: a secret sealed under another key
// (another cluster's credentials, a changed password) is kept as an error
// that the read returns, InternalError naming the secret; the settings
// beside it still read, and neither the log nor the error holds a byte of
// the value.
func TestCachedSecretThatDoesNotOpen(t *testing.T) {
	var logs bytes.Buffer
	rn := &Runner{log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	theirs, _ := newSealer(SecretsKey([]byte("their password")))
	ours, _ := newSealer(SecretsKey([]byte("our password")))
	const secret = "sealed-elsewhere-value"
	sealed, err := theirs.seal("fn-a", "TOKEN", []byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	rec := &settingsRecord{V: settingsVersion, Values: map[string]storedSetting{
		"TOKEN":  {Secret: true, Sealed: sealed, Set: time.Now()},
		"REGION": {Value: "eu", Set: time.Now()},
	}}
	c := newSettingsCache()
	for _, seal := range []*sealer{ours, nil} {
		c.apply(rn, "fn-a", rec, nil, 7, seal)
		_, ok, err := c.lookup("fn-a", "TOKEN")
		if ok || engine.ErrorCode(err) != engine.CodeInternalError || !strings.Contains(err.Error(), "TOKEN") || strings.Contains(err.Error(), secret) {
			t.Fatalf("read: %v %v", ok, err)
		}
		if v, ok, err := c.lookup("fn-a", "REGION"); v != "eu" || !ok || err != nil {
			t.Fatalf("the setting beside it: %q %v %v", v, ok, err)
		}
	}
	if !strings.Contains(logs.String(), "does not open") || strings.Contains(logs.String(), secret) {
		t.Fatalf("log: %s", logs.String())
	}
	// Removed: unset, and WaitSettings's revision moved on.
	c.apply(rn, "fn-a", nil, nil, 8, ours)
	if _, ok, err := c.lookup("fn-a", "TOKEN"); ok || err != nil {
		t.Fatalf("after removal: %v %v", ok, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.rev.wait(ctx, 8); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if err := c.rev.wait(short, 9); err == nil {
		t.Fatal("waited past a revision not delivered")
	}
}

// TestReseal: after the node password changes, Reseal opens each secret
// with the previous password's key and seals it with the new one; a
// setting and a secret already under the new key are untouched, one
// that neither key opens is named and left as it was, and running it
// again changes nothing.
func TestReseal(t *testing.T) {
	oldKey, newKey := SecretsKey([]byte("old password")), SecretsKey([]byte("new password"))
	before, kv, ctx := openTestSettings(t, oldKey)
	for _, c := range []struct{ fn, name, value string }{{"fn-a", "TOKEN", "a-token"}, {"fn-a", "OTHER", "a-other"}, {"fn-b", "TOKEN", "b-token"}} {
		if _, _, err := before.Set(ctx, c.fn, c.name, c.value, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := before.Set(ctx, "fn-b", "REGION", "eu", false); err != nil {
		t.Fatal(err)
	}
	stranger := &Settings{kv: before.kv}
	var err error
	if stranger.seal, err = newSealer(SecretsKey([]byte("someone else's"))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := stranger.Set(ctx, "fn-c", "LOST", "c-lost", true); err != nil {
		t.Fatal(err)
	}
	after := &Settings{kv: before.kv}
	if after.seal, err = newSealer(newKey); err != nil {
		t.Fatal(err)
	}
	if _, _, err := after.Set(ctx, "fn-c", "FRESH", "c-fresh", true); err != nil {
		t.Fatal(err)
	}
	lost := rawSettings(t, ctx, kv, "fn-c")

	done, err := after.Reseal(ctx, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if done.Resealed != 3 || done.Current != 1 || done.Functions != 2 || !slices.Equal(done.Unopened, []string{"fn-c/LOST"}) {
		t.Fatalf("reseal: %+v", done)
	}
	open := func(fn, name string) string {
		t.Helper()
		rec, err := decodeSettings(rawSettings(t, ctx, kv, fn))
		if err != nil {
			t.Fatal(err)
		}
		v, err := after.seal.open(fn, name, rec.Values[name].Sealed)
		if err != nil {
			t.Fatalf("%s/%s does not open with the new key: %v", fn, name, err)
		}
		return string(v)
	}
	if open("fn-a", "TOKEN") != "a-token" || open("fn-a", "OTHER") != "a-other" || open("fn-b", "TOKEN") != "b-token" || open("fn-c", "FRESH") != "c-fresh" {
		t.Fatal("a resealed secret changed")
	}
	if all, _ := after.List(ctx, "fn-b"); len(all) != 2 || all[0].Name != "REGION" || *all[0].Value != "eu" {
		t.Fatalf("fn-b's setting: %+v", all)
	}
	if !bytes.Equal(rawSettings(t, ctx, kv, "fn-c"), lost) {
		t.Fatal("a record with nothing to reseal was written")
	}
	again, err := after.Reseal(ctx, oldKey)
	if err != nil || again.Resealed != 0 || again.Current != 4 || again.Functions != 0 || len(again.Unopened) != 1 {
		t.Fatalf("a second reseal: %+v %v", again, err)
	}
	if _, err := (&Settings{kv: before.kv}).Reseal(ctx, oldKey); err != ErrNoSecretsKey {
		t.Fatalf("a reseal without a key: %v", err)
	}
	if _, err := after.Reseal(ctx, []byte("short")); engine.AsError(err).Code != engine.CodeInvalidInput {
		t.Fatalf("a reseal with a bad key: %v", err)
	}
}

// TestSettingsRecordBound: values within every bound of names and bytes
// whose JSON grows six times (each < stored as \u003c) are refused once
// the record as stored would pass what a NATS message takes, with
// RequestBodyTooLarge, and the record stays as it was.
func TestSettingsRecordBound(t *testing.T) {
	s, kv, ctx := openTestSettings(t, nil)
	value := strings.Repeat("<", MaxSettingValue)
	var refused int
	for i := range 15 {
		before := rawSettings(t, ctx, kv, "fn-a")
		_, _, err := s.Set(ctx, "fn-a", fmt.Sprintf("V%d", i), value, false)
		if err == nil {
			continue
		}
		if engine.ErrorCode(err) != engine.CodeRequestBodyTooLarge || strings.Contains(err.Error(), "<<") {
			t.Fatalf("value %d: %v", i, err)
		}
		if !bytes.Equal(rawSettings(t, ctx, kv, "fn-a"), before) {
			t.Fatalf("value %d refused, and the record changed", i)
		}
		refused = i
		break
	}
	if refused == 0 {
		t.Fatal("15 values of 16 KiB, each stored as 96 KiB, were all accepted")
	}
	if raw := rawSettings(t, ctx, kv, "fn-a"); len(raw) > maxSettingsRecord {
		t.Fatalf("a record of %d bytes was stored", len(raw))
	}
}
