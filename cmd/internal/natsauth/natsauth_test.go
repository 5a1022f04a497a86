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

func TestUsers(t *testing.T) {
	node := Creds{User: NodeUser, Password: "secret"}
	users, noAuth := Users("cairn", node, nil, false)
	if len(users) != 1 || noAuth != "" || users[0].Permissions != nil {
		t.Fatalf("without the development account: %+v %q", users, noAuth)
	}
	users, noAuth = Users("cairn", node, nil, true)
	if len(users) != 2 || noAuth != DevUser || users[1].Username != DevUser || users[1].Password == "" {
		t.Fatalf("with the development account: %+v %q", users, noAuth)
	}
	p := users[1].Permissions
	wantPub := []string{"cairn.cmd.*", "cairn.cmd.devstoreaccount1.*", "cairn.changes.*", "cairn.changes.devstoreaccount1.*", "cairn.tables", "cairn.tables.devstoreaccount1", "cairn.queue.>", "cairn.fn.>"}
	if !slices.Equal(p.Publish.Allow, wantPub) || p.Publish.Deny != nil || !slices.Equal(p.Subscribe.Allow, []string{"_INBOX.>"}) || p.Subscribe.Deny != nil {
		t.Fatalf("development permissions %+v %+v", p.Publish, p.Subscribe)
	}
}

func TestSubjects(t *testing.T) {
	for _, c := range []struct {
		account, table string
		cmd, tables    []string
	}{
		{"devstoreaccount1", "Orders", []string{"x.cmd.Orders", "x.cmd.devstoreaccount1.Orders"}, []string{"x.tables", "x.tables.devstoreaccount1"}},
		{"devstoreaccount1", "*", []string{"x.cmd.*", "x.cmd.devstoreaccount1.*"}, []string{"x.tables", "x.tables.devstoreaccount1"}},
		{"acme", "Orders", []string{"x.cmd.acme.Orders"}, []string{"x.tables.acme"}},
		{"acme", "*", []string{"x.cmd.acme.*"}, []string{"x.tables.acme"}},
	} {
		if got := TableSubjects("x", c.account, c.table); !slices.Equal(got, c.cmd) {
			t.Errorf("TableSubjects(%s, %s) = %v, want %v", c.account, c.table, got, c.cmd)
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
