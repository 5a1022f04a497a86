package natsauth

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestLoadOrCreate(t *testing.T) {
	dir := t.TempDir()
	c, path, created, loose, err := LoadOrCreate(dir)
	if err != nil || !created || loose {
		t.Fatalf("first start: %v created=%v loose=%v", err, created, loose)
	}
	if path != filepath.Join(dir, "nats", "node.user") || c.User != NodeUser || len(c.Password) != 64 {
		t.Fatalf("credentials %s %+v", path, c)
	}
	again, _, created, _, err := LoadOrCreate(dir)
	if err != nil || created || again != c {
		t.Fatalf("restart: %v created=%v %+v, want %+v", err, created, again, c)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, loose, _ := LoadOrCreate(dir); !loose {
		t.Fatal("a file others may read is not reported")
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	for content, ok := range map[string]bool{
		"u:p\n":       true,
		"u:p:q":       true, // the password may hold colons
		"no-colon":    false,
		":p":          false,
		"u:":          false,
		"":            false,
		"  u:p  \n\n": true,
	} {
		path := filepath.Join(dir, "creds")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Read(path)
		if (err == nil) != ok {
			t.Errorf("%q: %+v %v", content, c, err)
		}
	}
}

func TestNewServer(t *testing.T) {
	node := Creds{User: NodeUser, Password: "secret"}
	s, err := NewServer("cairn", node, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Users) != 2 || s.NoAuthUser != "" || s.Users[0].Permissions != nil || len(s.Accounts) != 1 {
		t.Fatalf("without the development account: %+v %q", s.Users, s.NoAuthUser)
	}
	nodeAcc := s.Accounts[0]
	if nodeAcc.Name != "$G" || s.Users[0].Account != nodeAcc || s.Users[1].Account != nodeAcc {
		t.Fatalf("the node and serving users are not in the global account: %q", nodeAcc.Name)
	}
	serve := s.Users[1]
	if serve.Username != ServeUser || serve.Password != ServeCreds(node).Password || serve.Password == node.Password {
		t.Fatalf("serving user %+v", serve)
	}
	if p := serve.Permissions; !slices.Equal(p.Publish.Allow, []string{"_R_.>", "_INBOX.>", "_CAIRN_INBOX.>"}) ||
		!slices.Equal(p.Subscribe.Allow, []string{"cairn.cmd.>", "cairn.tables", "cairn.tables.>", "cairn.changes.>", "cairn.fn.*", "cairn.events.functions-status"}) {
		t.Fatalf("serving permissions %+v %+v", p.Publish, p.Subscribe)
	}
	s, err = NewServer("cairn", node, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Users) != 3 || s.NoAuthUser != DevUser || s.Users[2].Username != DevUser || s.Users[2].Password == "" {
		t.Fatalf("with the development account: %+v %q", s.Users, s.NoAuthUser)
	}
	if len(s.Accounts) != 2 || s.Users[2].Account != s.Accounts[1] || s.Accounts[1].Name != "cairn-dev" {
		t.Fatalf("the development user has no account of its own: %+v", s.Accounts)
	}
	p := s.Users[2].Permissions
	wantPub := []string{"cairn.cmd.*", "cairn.cmd.devstoreaccount1.*", "cairn.cmd.devstoreaccount1.*.*", "cairn.changes.*", "cairn.changes.devstoreaccount1.*", "cairn.tables", "cairn.tables.devstoreaccount1", "cairn.queue.*", "cairn.fn.*"}
	if !slices.Equal(p.Publish.Allow, wantPub) || p.Publish.Deny != nil || !slices.Equal(p.Subscribe.Allow, []string{"_INBOX.>"}) || p.Subscribe.Deny != nil {
		t.Fatalf("development permissions %+v %+v", p.Publish, p.Subscribe)
	}
}

func TestServeCreds(t *testing.T) {
	a, b := ServeCreds(Creds{User: NodeUser, Password: "one"}), ServeCreds(Creds{User: NodeUser, Password: "two"})
	if a.User != ServeUser || len(a.Password) != 64 || a.Password == b.Password || a != ServeCreds(Creds{User: NodeUser, Password: "one"}) {
		t.Fatalf("serving credentials %+v %+v", a, b)
	}
}

func TestSubjects(t *testing.T) {
	for _, c := range []struct {
		account, table string
		cmd, tables    []string
		session        string // the value sessions' (never under the short form)
	}{
		{"devstoreaccount1", "Orders", []string{"x.cmd.Orders", "x.cmd.devstoreaccount1.Orders"}, []string{"x.tables", "x.tables.devstoreaccount1"}, "x.cmd.devstoreaccount1.Orders.*"},
		{"devstoreaccount1", "*", []string{"x.cmd.*", "x.cmd.devstoreaccount1.*"}, []string{"x.tables", "x.tables.devstoreaccount1"}, "x.cmd.devstoreaccount1.*.*"},
		{"acme", "Orders", []string{"x.cmd.acme.Orders"}, []string{"x.tables.acme"}, "x.cmd.acme.Orders.*"},
		{"acme", "*", []string{"x.cmd.acme.*"}, []string{"x.tables.acme"}, "x.cmd.acme.*.*"},
	} {
		if got, want := TableSubjects("x", c.account, c.table), append(c.cmd[:len(c.cmd):len(c.cmd)], c.session); !slices.Equal(got, want) {
			t.Errorf("TableSubjects(%s, %s) = %v, want %v", c.account, c.table, got, want)
		}
		changes := make([]string, len(c.cmd))
		for i, s := range c.cmd {
			changes[i] = strings.Replace(s, ".cmd.", ".changes.", 1)
		}
		if got := ChangesSubjects("x", c.account, c.table); !slices.Equal(got, changes) {
			t.Errorf("ChangesSubjects(%s, %s) = %v, want %v", c.account, c.table, got, changes)
		}
		if got := TablesSubjects("x", c.account); !slices.Equal(got, c.tables) {
			t.Errorf("TablesSubjects(%s) = %v, want %v", c.account, got, c.tables)
		}
	}
}
