package natsauth

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestParseUsers(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users, err := ParseUsers([]byte(`{"users":[
		{"user":"billing","password":"` + string(hash) + `","account":"acme","tables":["Invoices","Customers"],"manageTables":true,"queues":["invoices"],"functions":["hello"]},
		{"user":"Reports_2","password":"plain","account":"devstoreaccount1","tables":["*"]},
		{"user":"mailer","password":"plain","queues":["mail-out"]}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 3 || users[0].User != "billing" || !users[0].Hashed() || users[1].Hashed() ||
		!slices.Equal(users[0].Tables, []string{"Invoices", "Customers"}) || !users[0].ManageTables || users[2].Account != "" {
		t.Fatalf("%+v", users)
	}
	// htpasswd writes $2y$ hashes; the server and the check take them.
	y := "$2y$" + strings.TrimPrefix(string(hash), "$2a$")
	if _, err := ParseUsers([]byte(`{"users":[{"user":"u","password":"` + y + `","queues":["mail"]}]}`)); err != nil {
		t.Fatalf("a $2y$ hash: %v", err)
	}
	if err := bcrypt.CompareHashAndPassword([]byte(y), []byte("pw")); err != nil {
		t.Fatalf("a $2y$ hash: %v", err)
	}
	if users, err := ParseUsers([]byte(`{"users":[]}`)); err != nil || len(users) != 0 {
		t.Fatalf("no users: %v %v", users, err)
	}
}

func TestParseUsersRefuses(t *testing.T) {
	const ok = `"password":"pw","account":"acme","tables":["Invoices"]`
	for _, c := range []struct{ file, want string }{
		{`[]`, "not a users file"},
		{`{"users":[{"user":"a",` + ok + `}]} {}`, "data after the object"},
		{`{"users":[{"user":"a",` + ok + `}]}}`, "data after the object"},
		{`{"user":[]}`, `unknown field "user"`},
		{`{"users":[{"user":"a",` + ok + `,"table":["X"]}]}`, `unknown field "table"`},
		{`{"users":[{"user":"a",` + ok + `,"manageTables":"yes"}]}`, "not a users file"},
		{`{"users":[{"user":"cairn-node",` + ok + `}]}`, `user 1 ("cairn-node"): user name "cairn-node" is the node's own`},
		{`{"users":[{"user":"Cairn-Dev",` + ok + `}]}`, "is the node's own"},
		{`{"users":[{"user":"a",` + ok + `},{"user":"b",` + ok + `},{"user":"A",` + ok + `}]}`, `user 3 ("A"): another user has that name`},
		{`{"users":[{` + ok + `}]}`, "user name"},
		{`{"users":[{"user":"a.b",` + ok + `}]}`, "user name"},
		{`{"users":[{"user":"a>",` + ok + `}]}`, "user name"},
		{`{"users":[{"user":"` + strings.Repeat("a", 65) + `",` + ok + `}]}`, "user name"},
		{`{"users":[{"user":"a","account":"acme","tables":["Invoices"]}]}`, "password is empty"},
		{`{"users":[{"user":"a","password":"$2a$10$tooshort","account":"acme","tables":["Invoices"]}]}`, "not one"},
		{`{"users":[{"user":"a","password":"$2z$10$0123456789012345678901234567890123456789012345678901","account":"acme","tables":["Invoices"]}]}`, "not one"},
		{`{"users":[{"user":"a","password":"pw","tables":["Invoices"]}]}`, "account is required"},
		{`{"users":[{"user":"a","password":"pw","manageTables":true}]}`, "account is required"},
		{`{"users":[{"user":"a","password":"pw","account":"Acme","tables":["Invoices"]}]}`, "account name"},
		{`{"users":[{"user":"a","password":"pw","account":"ac","queues":["mail"]}]}`, "account name"},
		{`{"users":[{"user":"a","password":"pw","account":"acme"}]}`, "grants nothing"},
		{`{"users":[{"user":"a","password":"pw","account":"acme","tables":["*","Invoices"]}]}`, "stands alone"},
		{`{"users":[{"user":"a","password":"pw","account":"acme","tables":["In.voices"]}]}`, "tables: table name"},
		{`{"users":[{"user":"a","password":"pw","account":"acme","tables":["Inv>"]}]}`, "tables: table name"},
		{`{"users":[{"user":"a","password":"pw","account":"acme","tables":["tables"]}]}`, "reserved"},
		{`{"users":[{"user":"a","password":"pw","account":"acme","tables":["Invoices","Invoices"]}]}`, `tables: "Invoices" is listed twice`},
		{`{"users":[{"user":"a","password":"pw","queues":["Mail"]}]}`, "queues: queue name"},
		{`{"users":[{"user":"a","password":"pw","queues":["mail.>"]}]}`, "queues: queue name"},
		{`{"users":[{"user":"a","password":"pw","functions":["*"]}]}`, "functions: function name"},
		{`{"users":[{"user":"a","password":"pw","functions":["hello","hello"]}]}`, "listed twice"},
		{`{"users":[{"user":"a","password":"pw","subjects":["orders..x"]}]}`, "subjects: subject pattern"},
		{`{"users":[{"user":"a","password":"pw","subjects":["orders.>.x"]}]}`, "subjects: subject pattern"},
		{`{"users":[{"user":"a","password":"pw","subjects":["$JS.API.>"]}]}`, "subjects: \"$JS.API.>\" is the server's"},
		{`{"users":[{"user":"a","password":"pw","subjects":["_INBOX.>"]}]}`, "is the server's ($) or an inbox"},
		{`{"users":[{"user":"a","password":"pw","subjects":["orders.>","orders.>"]}]}`, `subjects: "orders.>" is listed twice`},
		{`{"users":[{"user":"a","password":"pw","streams":["OR.DERS"]}]}`, "streams: stream name"},
		{`{"users":[{"user":"a","password":"pw","streams":["ORDERS*"]}]}`, "streams: stream name"},
		{`{"users":[{"user":"a","password":"pw","streams":[""]}]}`, "streams: stream name"},
		{`{"users":[{"user":"a","password":"pw","streams":["KV_CAIRN_OUTBOX"]}]}`, "key-value or object store"},
		{`{"users":[{"user":"a","password":"pw","streams":["OBJ_x"]}]}`, "key-value or object store"},
		{`{"users":[{"user":"a","password":"pw","streams":["ORDERS","ORDERS"]}]}`, "listed twice"},
	} {
		_, err := ParseUsers([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.file, err, c.want)
		}
	}
}

func TestServiceUserPermissions(t *testing.T) {
	for _, c := range []struct {
		u   ServiceUser
		pub []string
	}{
		{ServiceUser{User: "billing", Account: "acme", Tables: []string{"Invoices", "Customers"}, Queues: []string{"invoices"}, Functions: []string{"hello"}},
			[]string{"cairn.cmd.acme.Invoices", "cairn.cmd.acme.Invoices.*", "cairn.changes.acme.Invoices", "cairn.cmd.acme.Customers", "cairn.cmd.acme.Customers.*", "cairn.changes.acme.Customers", "cairn.queue.invoices", "cairn.fn.hello"}},
		{ServiceUser{User: "billing", Account: "acme", Tables: []string{"*"}, ManageTables: true},
			[]string{"cairn.cmd.acme.*", "cairn.cmd.acme.*.*", "cairn.changes.acme.*", "cairn.tables.acme"}},
		{ServiceUser{User: "billing", Account: "devstoreaccount1", Tables: []string{"Invoices"}, ManageTables: true},
			[]string{"cairn.cmd.Invoices", "cairn.cmd.devstoreaccount1.Invoices", "cairn.cmd.devstoreaccount1.Invoices.*", "cairn.changes.Invoices", "cairn.changes.devstoreaccount1.Invoices", "cairn.tables", "cairn.tables.devstoreaccount1"}},
		{ServiceUser{User: "billing", Account: "devstoreaccount1", Tables: []string{"*"}},
			[]string{"cairn.cmd.*", "cairn.cmd.devstoreaccount1.*", "cairn.cmd.devstoreaccount1.*.*", "cairn.changes.*", "cairn.changes.devstoreaccount1.*"}},
		{ServiceUser{User: "billing", Functions: []string{"hello"}},
			[]string{"cairn.fn.hello"}},
	} {
		p := c.u.Permissions("cairn")
		if !slices.Equal(p.Publish.Allow, c.pub) || p.Publish.Deny != nil {
			t.Errorf("%+v: publish %v, want %v", c.u, p.Publish, c.pub)
		}
		if !slices.Equal(p.Subscribe.Allow, []string{"_INBOX_billing.>"}) || p.Subscribe.Deny != nil || p.Response != nil {
			t.Errorf("%+v: subscribe %+v, response %+v", c.u, p.Subscribe, p.Response)
		}
	}
}

// TestConsumerUser: a user given outbox subjects and streams subscribes
// to the subjects and publishes only the consumer API of its streams; the
// node's own subjects and streams are refused when the server is made.
func TestConsumerUser(t *testing.T) {
	u := ServiceUser{User: "shipping", Password: "pw", Subjects: []string{"orders.>", "billing.*.created"}, Streams: []string{"ORDERS"}}
	if err := u.Validate(); err != nil {
		t.Fatal(err)
	}
	p := u.Permissions("cairn")
	if !slices.Equal(p.Subscribe.Allow, []string{"_INBOX_shipping.>", "orders.>", "billing.*.created"}) {
		t.Fatalf("subscribe %v", p.Subscribe.Allow)
	}
	want := []string{"$JS.API.STREAM.INFO.ORDERS", "$JS.API.CONSUMER.CREATE.ORDERS.>", "$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.*",
		"$JS.API.CONSUMER.INFO.ORDERS.*", "$JS.API.CONSUMER.NAMES.ORDERS", "$JS.API.CONSUMER.LIST.ORDERS", "$JS.ACK.ORDERS.>", "$JS.API.CONSUMER.MSG.NEXT.ORDERS.*"}
	if !slices.Equal(p.Publish.Allow, want) {
		t.Fatalf("publish %v", p.Publish.Allow)
	}
	s, err := NewServer("cairn", Creds{User: NodeUser, Password: "secret"}, []ServiceUser{u}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Users) != 3 || s.Users[2].Account.Name != "cairn-svc-shipping" {
		t.Fatalf("%+v", s.Users)
	}
	for _, bad := range []ServiceUser{
		{User: "a", Password: "pw", Subjects: []string{"cairn.j.>"}},
		{User: "a", Password: "pw", Subjects: []string{"*.created"}},
		{User: "a", Password: "pw", Subjects: []string{">"}},
		{User: "a", Password: "pw", Streams: []string{"CAIRN_QUEUES"}},
		{User: "a", Password: "pw", Streams: []string{"cairn_t_orders_1"}},
	} {
		if err := bad.Validate(); err != nil {
			t.Fatalf("%+v: %v", bad, err)
		}
		if _, err := NewServer("cairn", Creds{User: NodeUser, Password: "secret"}, []ServiceUser{bad}, false); err == nil || !strings.Contains(err.Error(), `user "a"`) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func TestServerWithServiceUsers(t *testing.T) {
	service := []ServiceUser{{User: "billing", Password: "pw", Account: "acme", Tables: []string{"Invoices"}}}
	for _, dev := range []bool{false, true} {
		s, err := NewServer("cairn", Creds{User: NodeUser, Password: "secret"}, service, dev)
		if err != nil {
			t.Fatal(err)
		}
		u := s.Users[2]
		if u.Username != "billing" || u.Password != "pw" ||
			!slices.Equal(u.Permissions.Publish.Allow, []string{"cairn.cmd.acme.Invoices", "cairn.cmd.acme.Invoices.*", "cairn.changes.acme.Invoices"}) {
			t.Fatalf("dev=%v: %+v", dev, s.Users)
		}
		if u.Account == nil || u.Account.Name != "cairn-svc-billing" || u.Account == s.Accounts[0] {
			t.Fatalf("dev=%v: the service user has no account of its own: %+v", dev, u.Account)
		}
	}
}

func TestReadUsers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.json")
	if err := os.WriteFile(path, []byte(`{"users":[{"user":"billing","password":"pw","queues":["invoices"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if users, err := ReadUsers(path); err != nil || len(users) != 1 {
		t.Fatalf("%v %v", users, err)
	}
	if _, err := ReadUsers(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("a missing file was read")
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"users":[{"user":"billing","queues":["invoices"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadUsers(bad); err == nil || !strings.Contains(err.Error(), bad+`: user 1 ("billing"): password is empty`) {
		t.Fatalf("bad file: %v", err)
	}
	if runtime.GOOS == "windows" {
		return
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadUsers(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v", mode, err)
		}
	}
}
