package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cairn-dev/cairn/cmd/internal/cli"
	"github.com/cairn-dev/cairn/cmd/internal/httpapi"
	"github.com/cairn-dev/cairn/cmd/internal/node"
	"github.com/cairn-dev/cairn/cmd/internal/node/nodetest"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/journal/values"
)

// matches fails the test when what printed got, which does not match
// the regular expression want (anchored at both ends), and returns the
// submatches.
func matches(t *testing.T, what, got, want string) []string {
	t.Helper()
	m := regexp.MustCompile(`^` + want + `$`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("%s printed\n%s\nwhich does not match\n%s", what, got, want)
	}
	return m
}

// ref matches a large value's reference.
const ref = `(cairn-value:\d{8}T\d{6}\.\d{9}Z-[a-z2-7]{16})`

// TestExamplesLargeValues follows examples/largevalues/README.md with the
// commands it gives: an employee's photo uploaded as a large value and
// its reference inserted with the employee, read back the same; the
// photo downloaded to a file; a new photo replacing the reference, the
// old one left to the sweep; and a reference copied to another employee
// refused, that employee's own photo kept.
func TestExamplesLargeValues(t *testing.T) {
	h, _ := nodetest.Start(t, node.Config{})
	lv := buildExample(t, "largevalues", httpFlags(h)...)

	m := matches(t, "hire", lv.must("hire", "Sales", "000003", "David", "Brown"), `EmployeeProfiles Sales/000003: photo uploaded, 262144 bytes, sha256 6fa91933c61ffce3
  reference `+ref+`
EmployeeProfiles Sales/000003: David Brown hired, Photo = the reference
read back through GET …/\$value/Photo: 262144 bytes, sha256 6fa91933c61ffce3, the same as uploaded
`)
	first := m[1]
	m = matches(t, "hire 000006", lv.must("hire", "Sales", "000006", "Grace", "Wilson"), `EmployeeProfiles Sales/000006: photo uploaded, 262144 bytes, sha256 2e036b549df407d2
  reference `+ref+`
EmployeeProfiles Sales/000006: Grace Wilson hired, Photo = the reference
read back through GET …/\$value/Photo: 262144 bytes, sha256 2e036b549df407d2, the same as uploaded
`)
	graces := m[1]

	// A photo of one's own, read back to a file byte for byte.
	dir := t.TempDir()
	mine := bytes.Repeat([]byte("a photo of Ben Johnson "), 10000)
	if err := os.WriteFile(filepath.Join(dir, "ben.jpg"), mine, 0o644); err != nil {
		t.Fatal(err)
	}
	lv.must("hire", "Sales", "000009", "Ben", "Johnson", "-photo", filepath.Join(dir, "ben.jpg"))
	out := filepath.Join(dir, "out.jpg")
	matches(t, "photo -o", lv.must("photo", "Sales", "000009", "-o", out), `EmployeeProfiles Sales/000009: Ben Johnson, Photo `+ref+`
  230000 bytes, sha256 [0-9a-f]{16}, written to `+regexp.QuoteMeta(out)+`
`)
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, mine) {
		t.Fatalf("photo -o wrote %d bytes (%v), not the %d uploaded", len(got), err, len(mine))
	}

	m = matches(t, "new-photo", lv.must("new-photo", "Sales", "000003"), `EmployeeProfiles Sales/000003: new photo uploaded, 262144 bytes, sha256 3979baa92da713ac
  reference `+ref+`
EmployeeProfiles Sales/000003: Photo now holds the new reference \(merged, If-Match W/"[0-9.]+"\)
the old photo `+ref+` is held by no entity now:
  values-sweep removes it between \d\d:\d\d and \d\d:\d\d UTC \(its upload \+ claim window 1h \+ margin 5m, then the next scan, every 10m: the host's defaults\)
`)
	second, old := m[1], m[2]
	if old != first || second == first {
		t.Fatalf("new-photo: the old photo %s, the new %s; want the old %s", old, second, first)
	}
	matches(t, "photo after new-photo", lv.must("photo", "Sales", "000003"), `EmployeeProfiles Sales/000003: David Brown, Photo `+regexp.QuoteMeta(second)+`
  262144 bytes, sha256 3979baa92da713ac
`)

	// A reference copied to another employee names nothing of theirs.
	got, err := lv.run("copy-photo", "Sales", "000003", "000006")
	refused(t, "copy-photo", got, err, "copying Sales/000003's Photo "+second+" into Sales/000006\n",
		`largevalues: EmployeeProfiles Sales/000006: refused, nothing written: InvalidInput: `+second+` names no value of the entity ("Sales", "000006"): upload it first (PUT …/$value; a reference belongs to the entity it was uploaded for)`+"\n")
	matches(t, "photo of 000006 after the refusal", lv.must("photo", "Sales", "000006"), `EmployeeProfiles Sales/000006: Grace Wilson, Photo `+regexp.QuoteMeta(graces)+`
  262144 bytes, sha256 2e036b549df407d2
`)

	got, err = lv.run("photo", "Sales", "000012")
	refused(t, "photo of nobody", got, err, "",
		`largevalues: EmployeeProfiles Sales/000012: ResourceNotFound: The specified resource does not exist: ("Sales", "000012") in EmployeeProfiles.`+"\n")
	got, err = lv.run("hire", "Sales", "000003", "David", "Brown")
	if err == nil || !strings.Contains(err.Error(), "EntityAlreadyExists") {
		t.Fatalf("hire twice: %v\n%s", err, got)
	}
	got, err = lv.run("hire", "Sales", "000015", "Hugo", "Jones", "-photo", filepath.Join(dir, "missing.jpg"))
	if err == nil || !strings.Contains(err.Error(), "no such file") || got != "" {
		t.Fatalf("hire with a missing file: %v\n%s", err, got)
	}
}

// TestExamplesLargeValuesSwept: with the sweep's flags set to seconds,
// the photo new-photo replaced leaves the store, and the one the
// employee holds stays and still reads back.
func TestExamplesLargeValuesSwept(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	parsed := hostFlags(fs)
	if err := cli.Parse(fs, []string{"-value-claim-window", "1s", "-value-sweep-margin", "1s", "-value-sweep-every", "1s"}); err != nil {
		t.Fatal(err)
	}
	h, _ := nodetest.Start(t, node.Config{Commit: parsed.Commit, Functions: parsed.Functions})
	lv := buildExample(t, "largevalues", httpFlags(h)...)
	old := matches(t, "hire", lv.must("hire", "Sales", "000003", "David", "Brown"), `(?s).*reference `+ref+`\n.*`)[1]
	photo := matches(t, "new-photo", lv.must("new-photo", "Sales", "000003"), `(?s).*new photo.*?reference `+ref+`\n.*`)[1]

	js, err := jetstream.New(nodetest.Connect(t, h))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := values.Open(ctx, js, "cairn", 1)
	if err != nil {
		t.Fatal(err)
	}
	k := values.Key{Account: httpapi.DevAccountName, Table: "EmployeeProfiles", PartitionKey: "Sales", RowKey: "000003"}
	stored := func(ref string) bool {
		_, err := store.Info(ctx, k, strings.TrimPrefix(ref, engine.ValueRefPrefix))
		if err != nil && !errors.Is(err, values.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	// A poll: the sweep runs on its own timer.
	deadline := time.Now().Add(30 * time.Second)
	for stored(old) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the replaced photo %s is still stored", old)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !stored(photo) {
		t.Fatalf("the sweep removed %s, which the employee holds", photo)
	}
	matches(t, "photo after the sweep", lv.must("photo", "Sales", "000003"), `EmployeeProfiles Sales/000003: David Brown, Photo `+regexp.QuoteMeta(photo)+`
  262144 bytes, sha256 3979baa92da713ac
`)
}
