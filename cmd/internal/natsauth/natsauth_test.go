package natsauth

import (
	"os"
	"path/filepath"
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
	users, noAuth := Users("cairn", node, false)
	if len(users) != 1 || noAuth != "" || users[0].Permissions != nil {
		t.Fatalf("without the development account: %+v %q", users, noAuth)
	}
	users, noAuth = Users("cairn", node, true)
	if len(users) != 2 || noAuth != DevUser || users[1].Username != DevUser || users[1].Password == "" {
		t.Fatalf("with the development account: %+v %q", users, noAuth)
	}
	p := users[1].Permissions
	if len(p.Publish.Allow) != 4 || len(p.Subscribe.Allow) != 1 || p.Subscribe.Allow[0] != "_INBOX.>" {
		t.Fatalf("development permissions %+v %+v", p.Publish, p.Subscribe)
	}
}
