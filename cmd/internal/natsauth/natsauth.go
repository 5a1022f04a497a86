// Package natsauth holds the users and accounts of a node's embedded NATS
// server: the node user, whose credentials a node creates under its data
// directory on first start and keeps across restarts; the serving user,
// whose credentials are derived from the node user's (ServeCreds); the
// service users of a users file (ReadUsers); and the development user that
// unauthenticated connections map to while the development account is on.
//
// The node user may do everything: the node itself, other nodes joining
// its server, and the operators' CLI connect as it. The serving user is
// what a node answers requests as: it may take the requests the node
// serves and publish only to reply subjects (ServePermissions), so a node
// never answers with more rights than an answer needs. The development
// user may only send what the documented development commands send (table
// and entity commands and change feed requests of the development
// account's tables, queue messages, direct function calls) and receive
// replies on _INBOX.>. A service user may send commands to the tables of
// one storage account it is given, and read their change feeds (exactly as
// spelled in the file: subjects are case-sensitive), manage that account's
// tables if allowed, enqueue to its queues and call its functions, and
// receive replies only under its own inbox prefix, _INBOX_<user>. A
// service user may also be given outbox subjects to subscribe to and
// streams to consume from (create and look up pull consumers, pull and
// acknowledge, nothing that changes or deletes a stream or a consumer):
// the node account exports those to its account alone
// (exportToConsumer), the creations as subjects the node answers, which
// checks the consumer's configuration (ConsumerCreateSubjects). For all but the node user, the rest of the
// JetStream API, the journal, the catalog, the key-value and object
// stores and the system account are out of reach.
//
// The development user and every service user have a NATS account of
// their own, which imports from the node's account only what the user may
// publish (accounts.go): whatever reply subject a client names, the
// node's answer is delivered in the client's own account. Connections of
// the node user take their replies on InboxPrefix.
//
// Storage accounts are namespaces of tables (TableSubjects,
// TablesSubjects): account acme's tables are <prefix>.cmd.acme.<Table>,
// the development account's also <prefix>.cmd.<Table>.
//
// The credentials file is one line, "user:password", mode 0600 in a 0700
// directory. A users file is JSON, mode 0600 (a file others may read is
// refused), checked whole before the server starts: unknown fields, a
// name taken, an account, table, queue or function name that is not one
// are errors naming the user. Passwords cost nothing per message: the
// server checks one when a connection opens (a bcrypt hash costs a
// bcrypt comparison, some 50 ms at cost 10) and permissions from a cache
// afterwards. An import costs the server a lookup and a reply mapping per
// request (docs/PERFORMANCE.md).
package natsauth

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/cmd/internal/secret"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
)

const (
	// NodeUser is the name of the node user.
	NodeUser = "cairn-node"
	// DevUser is the user unauthenticated connections map to while the
	// development account is on.
	DevUser = "cairn-dev"
	// InboxPrefix is where the node user's connections take replies.
	InboxPrefix = "_CAIRN_INBOX"
	// Dir is the directory under the data directory that holds the
	// credentials, and File the credentials file's name in it.
	Dir  = "nats"
	File = "node.user"
)

// Creds are a user's name and password.
type Creds struct {
	User, Password string
}

// Path returns the node credentials file of a data directory.
func Path(dataDir string) string { return filepath.Join(dataDir, Dir, File) }

// Options returns the connection options that authenticate as c, with
// replies on InboxPrefix.
func (c Creds) Options() []nats.Option {
	return []nats.Option{nats.UserInfo(c.User, c.Password), nats.CustomInboxPrefix(InboxPrefix)}
}

// LoadOrCreate returns the node credentials of a data directory, creating
// them (a random 256-bit password) on first start. loose reports a file
// other users may read.
func LoadOrCreate(dataDir string) (c Creds, path string, created, loose bool, err error) {
	path = Path(dataDir)
	content, created, loose, err := secret.LoadOrCreate(path, func(random string) string { return NodeUser + ":" + random })
	if err != nil {
		return Creds{}, path, false, false, fmt.Errorf("natsauth: %w", err)
	}
	c, err = parse(path, content)
	if err != nil {
		return Creds{}, path, false, false, err
	}
	return c, path, created, loose, nil
}

// Read reads a credentials file ("user:password" on one line).
func Read(path string) (Creds, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Creds{}, fmt.Errorf("natsauth: %w", err)
	}
	return parse(path, string(raw))
}

// parse reads "user:password" (the content of the file at path).
func parse(path, content string) (Creds, error) {
	user, pass, ok := strings.Cut(strings.TrimSpace(content), ":")
	if !ok || user == "" || pass == "" {
		return Creds{}, fmt.Errorf("natsauth: %s does not hold user:password", path)
	}
	return Creds{User: user, Password: pass}, nil
}

// DevPermissions are the development user's: publish the development
// account's table and entity commands and read its tables' change feeds
// (TableSubjects, ChangesSubjects and TablesSubjects of engine.DevAccount,
// so no other account's tables), messages to queues and direct calls of
// functions (one token each: a queue's or a function's name);
// subscribe to replies on _INBOX.>. Everything else is denied, the
// JetStream API ($JS.API.>), the journal (<prefix>.j.>), the catalog
// (<prefix>.catalog.>), $KV.>, $O.> and $SYS.> among it.
func DevPermissions(prefix string) *server.Permissions {
	allow := append(TableSubjects(prefix, engine.DevAccount, "*"), ChangesSubjects(prefix, engine.DevAccount, "*")...)
	allow = append(allow, TablesSubjects(prefix, engine.DevAccount)...)
	allow = append(allow, functions.QueueSubject(prefix, "*"), functions.DirectSubject(prefix, "*"))
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: allow},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
	}
}
