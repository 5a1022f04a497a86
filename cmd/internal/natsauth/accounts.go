package natsauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/cairn-dev/cairn/functions"
)

// The embedded server's accounts. A NATS account is a namespace of
// subjects: a message published in one reaches subscribers of that
// account only, unless an account exports a subject and another imports
// it.
//
//   - The node account is the server's global account ($G), where earlier
//     versions kept everything: its JetStream store stays where it was
//     (<store>/$G). The node user, the serving user and every node of the
//     system connect to it; it alone has JetStream, the journal and the
//     buckets.
//   - The development user (while the development account is on) and each
//     service user of the users file have an account of their own, which
//     imports from the node account exactly the subjects the user may
//     publish to (its permissions stay as they were, so anything else is
//     still refused as a permissions violation).
//
// The node account exports the subjects the node answers as services. A
// request that crosses an import reaches the node with a reply subject the
// server made (_R_.…), and the answer goes back to the requester's own
// reply subject in the requester's account, where there is no JetStream,
// journal or bucket. So a request that names $JS.API.STREAM.DELETE.… (or a
// journal, a bucket, a queue) as its reply cannot make the node act on
// it: the answer lands in the requester's account, as if the requester
// had published it itself.
const (
	// ServeUser is the user the node answers requests as: it may
	// subscribe to the subjects the node serves and publish only to reply
	// subjects (ServePermissions).
	ServeUser = "cairn-serve"
	// devAccountName is the development user's NATS account, and
	// serviceAccountPrefix the start of a service user's
	// ("cairn-svc-<user>").
	devAccountName       = "cairn-dev"
	serviceAccountPrefix = "cairn-svc-"
	// functionResponseThreshold is how long the server keeps the way back
	// for a direct function call's answer: the longest invocation a
	// manifest may ask for (15 minutes) and a minute more. Other requests
	// keep the server's default, two minutes, more than any of them waits
	// (a long-poll 30 s, a table command 30 s).
	functionResponseThreshold = 16 * time.Minute
)

// ServeCreds returns the serving user's credentials, derived from the node
// user's: whoever holds the node credentials (another node joining this
// node's server, the operators' CLI) can compute them, and nothing needs
// storing. The password is HMAC-SHA256 of the user's name keyed with the
// node user's password.
func ServeCreds(node Creds) Creds {
	mac := hmac.New(sha256.New, []byte(node.Password))
	mac.Write([]byte(ServeUser))
	return Creds{User: ServeUser, Password: hex.EncodeToString(mac.Sum(nil))}
}

// ServeOptions returns the connection options that authenticate as c, a
// connection that only answers (it takes no replies of its own).
func (c Creds) ServeOptions() []nats.Option {
	return []nats.Option{nats.UserInfo(c.User, c.Password)}
}

// clientSubjects are the subjects of the requests a client may send a
// node: entity and table commands, change feeds, direct function calls.
func clientSubjects(prefix string) []string {
	return []string{
		prefix + ".cmd.>",
		prefix + ".tables",
		prefix + ".tables.>",
		prefix + ".changes.>",
		functions.DirectSubject(prefix, "*"),
	}
}

// ServedSubjects are the subjects a node answers requests on: the
// clients' (clientSubjects) and the hosts' status, which the deploy
// command asks.
func ServedSubjects(prefix string) []string {
	return append(clientSubjects(prefix), functions.HostStatusSubject(prefix))
}

// ReplySubjects are the subjects the serving user may publish to: replies
// to requests that crossed an import (_R_.>), and the inboxes of the node
// account's own users (_INBOX.>, InboxPrefix.>), who may do everything
// anyway.
func ReplySubjects() []string {
	return []string{"_R_.>", nats.InboxPrefix + ">", InboxPrefix + ".>"}
}

// ServePermissions are the serving user's: subscribe to ServedSubjects,
// publish to ReplySubjects. So even an answer the node were tricked into
// sending elsewhere would be refused by the server: the serving user
// cannot reach the JetStream API, the journal, the catalog, the buckets or
// the queues.
func ServePermissions(prefix string) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: ReplySubjects()},
		Subscribe: &server.SubjectPermission{Allow: ServedSubjects(prefix)},
	}
}

// exports are the node account's service exports: what clients of other
// accounts may import, each a superset of what any user's permissions
// allow: the clients' requests, and messages to queues, whose stream's
// acknowledgement comes back the same way as an answer.
func exports(prefix string) []string {
	return append(clientSubjects(prefix), functions.QueueSubject(prefix, "*"))
}

// Server is what the embedded server is configured with: its accounts, its
// users, and the user connections without credentials act as ("" refuses
// them).
type Server struct {
	Accounts   []*server.Account
	Users      []*server.User
	NoAuthUser string
}

// NewServer returns the embedded server's accounts and users: the node
// user and the serving user (ServeCreds of node) in the node account, the
// service users each in an account of its own, and, when dev is true, the
// development user in its own, which connections without credentials act
// as.
func NewServer(prefix string, node Creds, service []ServiceUser, dev bool) (*Server, error) {
	nodeAcc, err := nodeAccount()
	if err != nil {
		return nil, err
	}
	for _, subject := range exports(prefix) {
		if err := nodeAcc.AddServiceExport(subject, nil); err != nil {
			return nil, fmt.Errorf("natsauth: export %s: %w", subject, err)
		}
	}
	if err := nodeAcc.SetServiceExportResponseThreshold(functions.DirectSubject(prefix, "*"), functionResponseThreshold); err != nil {
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	serve := ServeCreds(node)
	servePerms := ServePermissions(prefix)
	if AnyConsumes(service) {
		// The service users' consumer creations, which the node checks
		// (ConsumerCreateSubjects).
		servePerms.Subscribe.Allow = append(servePerms.Subscribe.Allow, ConsumerAPIPrefix(prefix)+">")
	}
	s := &Server{
		Accounts: []*server.Account{nodeAcc},
		Users: []*server.User{
			{Username: node.User, Password: node.Password, Account: nodeAcc},
			{Username: serve.User, Password: serve.Password, Permissions: servePerms, Account: nodeAcc},
		},
	}
	add := func(account, user, password string, perms *server.Permissions, u *ServiceUser) error {
		acc := server.NewAccount(account)
		var imported map[string]bool
		if u != nil {
			var err error
			if imported, err = exportToConsumer(prefix, nodeAcc, acc, *u); err != nil {
				return fmt.Errorf("natsauth: user %s: %w", user, err)
			}
		}
		for _, subject := range perms.Publish.Allow {
			if imported[subject] {
				continue
			}
			if err := acc.AddServiceImport(nodeAcc, subject, ""); err != nil {
				return fmt.Errorf("natsauth: user %s: import %s: %w", user, subject, err)
			}
		}
		s.Accounts = append(s.Accounts, acc)
		s.Users = append(s.Users, &server.User{Username: user, Password: password, Permissions: perms, Account: acc})
		return nil
	}
	for _, u := range service {
		if err := u.CheckPrefix(prefix); err != nil {
			return nil, fmt.Errorf("natsauth: user %q: %w", u.User, err)
		}
		if err := add(serviceAccountPrefix+u.User, u.User, u.Password, u.Permissions(prefix), &u); err != nil {
			return nil, err
		}
	}
	if dev {
		var b [32]byte
		_, _ = rand.Read(b[:]) // the password nobody uses: its connections come unauthenticated
		if err := add(devAccountName, DevUser, hex.EncodeToString(b[:]), DevPermissions(prefix), nil); err != nil {
			return nil, err
		}
		s.NoAuthUser = DevUser
	}
	return s, nil
}

// exportToConsumer exports from the node account, to acc alone, what a
// service user who consumes outbox messages is given: its Subjects as a
// stream (what is published there in the node account is delivered in
// acc too, to the subscriptions its permissions allow), and the
// JetStream API subjects of its Streams as services (consumeSubjects: a
// request crosses with a reply subject the server made, as every other
// request of the account does, and the pull of messages answers with
// many messages). The account imports them; the service imports of the
// API follow from its publish permissions, as every other's.
func exportToConsumer(prefix string, nodeAcc, acc *server.Account, u ServiceUser) (imported map[string]bool, err error) {
	only := []*server.Account{acc}
	for _, subject := range u.Subjects {
		if err := nodeAcc.AddStreamExport(subject, only); err != nil {
			return nil, fmt.Errorf("export %s: %w", subject, err)
		}
		if err := acc.AddStreamImport(nodeAcc, subject, ""); err != nil {
			return nil, fmt.Errorf("import %s: %w", subject, err)
		}
	}
	if len(u.Streams) > 0 {
		// An account without JetStream of its own gets the server's
		// answer to the whole API, "not enabled for account", which
		// would answer its requests before the node account's, unless
		// it imports the account information from elsewhere: the server
		// then leaves the API to its imports. It imports it and may not
		// ask it (its permissions do not allow the subject): the node
		// account's usage and limits are not its business.
		if err := nodeAcc.AddServiceExport(jsAccountInfo, only); err != nil {
			return nil, fmt.Errorf("export %s: %w", jsAccountInfo, err)
		}
		if err := acc.AddServiceImport(nodeAcc, jsAccountInfo, ""); err != nil {
			return nil, fmt.Errorf("import %s: %w", jsAccountInfo, err)
		}
	}
	imported = map[string]bool{}
	for _, stream := range u.Streams {
		create := ConsumerCreateSubjects(prefix, u.User, stream)
		api, next := consumeSubjects(stream)
		for _, subject := range api {
			if to, ok := create[subject]; ok {
				// Imported as the node's subject, which checks the
				// consumer's configuration (ConsumerCreateSubjects).
				if err := nodeAcc.AddServiceExport(to, only); err != nil {
					return nil, fmt.Errorf("export %s: %w", to, err)
				}
				if err := acc.AddServiceImport(nodeAcc, subject, to); err != nil {
					return nil, fmt.Errorf("import %s as %s: %w", subject, to, err)
				}
				imported[subject] = true
				continue
			}
			if err := nodeAcc.AddServiceExport(subject, only); err != nil {
				return nil, fmt.Errorf("export %s: %w", subject, err)
			}
		}
		if err := nodeAcc.AddServiceExportWithResponse(next, server.Streamed, only); err != nil {
			return nil, fmt.Errorf("export %s: %w", next, err)
		}
	}
	return imported, nil
}

// jsAccountInfo is the JetStream API's account information subject.
const jsAccountInfo = "$JS.API.INFO"

// nodeAccount returns the node account, the server's global account with
// JetStream on. A server with accounts of its own enables JetStream only
// in the accounts configured for it, and only the configuration parser
// can say so: the account is parsed under another name and renamed to the
// global account's, which the server then takes as its global account's
// configuration (TestNodeAccountKeepsTheStore checks that the store an
// earlier version wrote is served).
func nodeAccount() (*server.Account, error) {
	var o server.Options
	if err := o.ProcessConfigString(`accounts { node: { jetstream: enabled } }`); err != nil {
		return nil, fmt.Errorf("natsauth: node account: %w", err)
	}
	if len(o.Accounts) != 1 {
		return nil, fmt.Errorf("natsauth: node account: the configuration made %d accounts", len(o.Accounts))
	}
	acc := o.Accounts[0]
	acc.Name = server.DEFAULT_GLOBAL_ACCOUNT
	return acc, nil
}
