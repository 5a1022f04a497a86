package demo

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/engine"
)

// TestParse checks where flags may stand, "--", and the refusals of a
// missing or unknown command and of a wrong argument count.
func TestParse(t *testing.T) {
	arity := map[string]int{"seed": 0, "kind": 2, "write": Any}
	for _, tc := range []struct {
		args []string
		cmd  string
		rest []string
		n    int
		by   string
		err  string
	}{
		{args: []string{"seed"}, cmd: "seed", n: 12, by: "property"},
		{args: []string{"-n", "3", "seed"}, cmd: "seed", n: 3, by: "property"},
		{args: []string{"seed", "-n", "3"}, cmd: "seed", n: 3, by: "property"},
		{args: []string{"kind", "Sales", "-by", "key", "Employee"}, cmd: "kind", rest: []string{"Sales", "Employee"}, n: 12, by: "key"},
		{args: []string{"kind", "Sales", "Employee", "-by", "key", "-n", "1"}, cmd: "kind", rest: []string{"Sales", "Employee"}, n: 1, by: "key"},
		{args: []string{"write", "-n", "2", "--", "-5 degrees", "-n"}, cmd: "write", rest: []string{"-5 degrees", "-n"}, n: 2, by: "property"},
		{args: []string{"write"}, cmd: "write", n: 12, by: "property"},
		{args: nil, err: "name a command"},
		{args: []string{"-n", "3"}, err: "name a command"},
		{args: []string{"sow"}, err: `unknown command "sow"`},
		{args: []string{"seed", "now"}, err: "seed takes 0 arguments, not 1"},
		{args: []string{"kind", "Sales"}, err: "kind takes 2 arguments, not 1"},
		{args: []string{"seed", "-x"}, err: "flag provided but not defined: -x"},
	} {
		fs := NewFlags("test", "seed | kind <dept> <kind> | write [message]")
		fs.SetOutput(io.Discard)
		n := fs.Int("n", 12, "")
		by := fs.String("by", "property", "")
		cmd, rest, err := Parse(fs, tc.args, arity)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: err %v, want %s", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || cmd != tc.cmd || !slices.Equal(rest, tc.rest) || *n != tc.n || *by != tc.by {
			t.Errorf("%q: %q %q -n %d -by %s (%v), want %q %q -n %d -by %s", tc.args, cmd, rest, *n, *by, err, tc.cmd, tc.rest, tc.n, tc.by)
		}
	}
}

// TestPlural checks the argument count's wording.
func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 arguments", 1: "1 argument", 4: "4 arguments"} {
		if got := plural(n, "argument"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestDevConnectionString checks that the default -connection-string
// names the development account, its key and the default -http address,
// as the host serves them.
func TestDevConnectionString(t *testing.T) {
	a, err := ParseConnectionString(DevConnectionString)
	if err != nil {
		t.Fatal(err)
	}
	want := Account{Name: engine.DevAccount, Key: engine.DevAccountKey, Endpoint: "http://127.0.0.1:10002/" + engine.DevAccount}
	if a != want {
		t.Fatalf("got %+v, want %+v", a, want)
	}
	if u, err := a.HostURL(); err != nil || u != "http://127.0.0.1:10002" {
		t.Fatalf("HostURL: %q, %v", u, err)
	}
	if _, err := ParseConnectionString("AccountName=a;TableEndpoint=http://x"); err == nil {
		t.Fatal("a connection string without AccountKey was taken")
	}
	var h Host
	h.HTTPFlag(flag.NewFlagSet("test", flag.ContinueOnError), "")
	if h.conn != DevConnectionString {
		t.Fatalf("-connection-string defaults to %q", h.conn)
	}
}
