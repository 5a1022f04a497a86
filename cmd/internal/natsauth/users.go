package natsauth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/functions"
)

// ServiceUser is a user of the embedded server given in the users file
// (cmd/host -nats-users): a service with rights on some tables of one
// storage account, some queues and some functions.
type ServiceUser struct {
	// User is the name it connects with: 1 to 64 letters, digits, '-'
	// and '_' (it is a token of its inbox prefix).
	User string `json:"user"`
	// Password is the password, or its bcrypt hash ("$2a$…", which the
	// server compares against; recommended, so that the file holds no
	// password).
	Password string `json:"password"`
	// Account is the storage account whose tables it may use: 3 to 24
	// lowercase letters and digits. Required with Tables or ManageTables.
	Account string `json:"account,omitempty"`
	// Tables are the account's tables it may send entity commands to
	// (writes and point reads alike), spelled exactly as its clients
	// spell them in subjects; ["*"] is every table of the account.
	Tables []string `json:"tables,omitempty"`
	// ManageTables lets it create, delete and list the account's tables.
	ManageTables bool `json:"manageTables,omitempty"`
	// Queues are the queues it may enqueue to.
	Queues []string `json:"queues,omitempty"`
	// Functions are the functions it may call directly.
	Functions []string `json:"functions,omitempty"`
	// Subjects are the outbox subjects it may subscribe to (NATS subject
	// patterns: `*` one token, a final `>` the rest), on core NATS: what
	// the relay publishes there reaches it. Never under $ or _ or the
	// node's prefix.
	Subjects []string `json:"subjects,omitempty"`
	// Streams are the JetStream streams it may consume from, whole: make
	// and look up consumers on them (ordered, ephemeral or durable, with
	// a filter or not), pull their messages and acknowledge them. It may
	// not delete, purge or change a stream or delete a consumer. Never
	// one of the node's own (the journal, the catalog, the queues, any
	// key-value or object store).
	Streams []string `json:"streams,omitempty"`
}

// usersFile is the users file's shape.
type usersFile struct {
	Users []ServiceUser `json:"users"`
}

// userNameRE is the rule for a service user's name.
var userNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// InboxPrefix returns where the user's connections must take replies,
// "_INBOX_<user>": the only subjects it may subscribe to (under it), and
// subjects no other user but the node user may subscribe to.
func (u ServiceUser) InboxPrefix() string { return "_INBOX_" + u.User }

// Hashed reports whether the password is a bcrypt hash.
func (u ServiceUser) Hashed() bool { return strings.HasPrefix(u.Password, "$2") }

// Validate checks one user on its own (ParseUsers checks the names
// against each other and the server's own users).
func (u ServiceUser) Validate() error {
	if !userNameRE.MatchString(u.User) {
		return fmt.Errorf("user name %q: use 1 to 64 letters, digits, '-' and '_'", u.User)
	}
	if strings.EqualFold(u.User, NodeUser) || strings.EqualFold(u.User, DevUser) || strings.EqualFold(u.User, ServeUser) {
		return fmt.Errorf("user name %q is the node's own", u.User)
	}
	if u.Password == "" {
		return errors.New("password is empty")
	}
	if u.Hashed() {
		if _, err := bcrypt.Cost([]byte(u.Password)); err != nil || !validBcrypt.MatchString(u.Password) {
			return errors.New(`password starts like a bcrypt hash ("$2") but is not one (make one with: host nats-password)`)
		}
	}
	if (len(u.Tables) > 0 || u.ManageTables) && u.Account == "" {
		return fmt.Errorf("account is required with tables or manageTables (%s for the development account)", engine.DevAccount)
	}
	if u.Account != "" {
		if err := engine.ValidateAccountName(u.Account); err != nil {
			return err
		}
	}
	if len(u.Tables) == 0 && !u.ManageTables && len(u.Queues) == 0 && len(u.Functions) == 0 && len(u.Subjects) == 0 && len(u.Streams) == 0 {
		return errors.New("grants nothing: give it tables, manageTables, queues, functions, subjects or streams")
	}
	if slices.Contains(u.Tables, "*") && len(u.Tables) > 1 {
		return errors.New(`tables: "*" (every table of the account) stands alone`)
	}
	for _, t := range u.Tables {
		if t == "*" {
			continue
		}
		if err := engine.ValidateTableName(t); err != nil {
			var e *engine.Error
			if errors.As(err, &e) {
				err = errors.New(e.Message) // without the protocol's error code
			}
			return fmt.Errorf("tables: %v", err)
		}
	}
	for _, q := range u.Queues {
		if err := functions.ValidateName("queue", q); err != nil {
			return fmt.Errorf("queues: %v", err)
		}
	}
	for _, f := range u.Functions {
		if err := functions.ValidateName("function", f); err != nil {
			return fmt.Errorf("functions: %v", err)
		}
	}
	for _, p := range u.Subjects {
		if err := engine.ValidateSubjectPattern(p); err != nil {
			return fmt.Errorf("subjects: %s", engine.AsError(err).Message)
		}
		if p[0] == '$' || p[0] == '_' {
			return fmt.Errorf("subjects: %q is the server's ($) or an inbox (_): outbox messages never go there", p)
		}
	}
	for _, s := range u.Streams {
		if !streamNameRE.MatchString(s) {
			return fmt.Errorf("streams: stream name %q: use 1 to 255 letters, digits, '-' and '_'", s)
		}
		if strings.HasPrefix(s, "KV_") || strings.HasPrefix(s, "OBJ_") {
			return fmt.Errorf("streams: %q is a key-value or object store's stream, not an outbox stream", s)
		}
	}
	for what, list := range map[string][]string{"tables": u.Tables, "queues": u.Queues, "functions": u.Functions, "subjects": u.Subjects, "streams": u.Streams} {
		if d := duplicate(list); d != "" {
			return fmt.Errorf("%s: %q is listed twice", what, d)
		}
	}
	return nil
}

// streamNameRE is the rule for a stream a user may consume from: what a
// token of the JetStream API's subjects may be, and no wildcard.
var streamNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)

// CheckPrefix refuses what the user would be given of the node's own
// subjects and streams under prefix: a subject under it (the journal,
// the catalog, commands, queues) or a stream whose name starts like the
// node's (<PREFIX>_…: the journals, the catalog, the queues).
func (u ServiceUser) CheckPrefix(prefix string) error {
	for _, p := range u.Subjects {
		if first, _, _ := strings.Cut(p, "."); first == prefix || first == "*" || first == ">" {
			return fmt.Errorf("subjects: %q reaches under the node's prefix %q (the journal, the catalog, commands, queues)", p, prefix)
		}
	}
	own := strings.ToUpper(prefix) + "_"
	for _, s := range u.Streams {
		if strings.HasPrefix(strings.ToUpper(s), own) {
			return fmt.Errorf("streams: %q is named like the node's own streams (%s…: journals, catalog, queues)", s, own)
		}
	}
	return nil
}

// consumeSubjects are the JetStream API subjects a user who may consume
// from stream publishes to: the stream's info; a consumer's creation
// (with a filter subject or without; durable by the older API too), info
// and the names and list of the stream's consumers; acknowledgements.
// next, apart, is the pull of messages, whose answer is many messages.
// The stream's deletion, purge, update and messages by sequence, and a
// consumer's deletion, are not among them. A creation names the consumer's
// configuration in its body, which no subject permission sees: it goes
// to the node (ConsumerCreateSubjects), never straight to the API.
func consumeSubjects(stream string) (api []string, next string) {
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".*",
		"$JS.API.CONSUMER.INFO." + stream + ".*",
		"$JS.API.CONSUMER.NAMES." + stream,
		"$JS.API.CONSUMER.LIST." + stream,
		"$JS.ACK." + stream + ".>",
	}, "$JS.API.CONSUMER.MSG.NEXT." + stream + ".*"
}

// ConsumerCreateSubjects maps the API subjects that create a consumer on
// stream to the node's subjects the user's creations are imported as: the
// node checks the configuration and creates the consumer (a push
// consumer would deliver the stream's messages to any subject of the
// node account: queues, buckets, commands). ConsumerAPIPrefix, the
// user's name and the rest of the API subject make the node's subject:
// the server's import puts the name there, so the node knows whose
// creation it is (a user's name is one subject token: Validate).
func ConsumerCreateSubjects(prefix, user, stream string) map[string]string {
	m := map[string]string{}
	for _, api := range []string{"$JS.API.CONSUMER.CREATE." + stream + ".>", "$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".*"} {
		m[api] = ConsumerAPIPrefix(prefix) + user + "." + strings.TrimPrefix(api, "$JS.API.")
	}
	return m
}

// AnyConsumes reports whether one of users may consume from streams: the
// node then takes their consumer creations (ConsumerAPIPrefix).
func AnyConsumes(users []ServiceUser) bool {
	return slices.ContainsFunc(users, func(u ServiceUser) bool { return len(u.Streams) > 0 })
}

// ConsumerAPIPrefix is the start of the node's subjects that take
// consumer creations for users (ConsumerCreateSubjects); what follows it
// is the user's name and the API subject after "$JS.API.".
func ConsumerAPIPrefix(prefix string) string { return prefix + ".jsapi." }

// validBcrypt is what nats-server takes for a bcrypt hash; anything else
// it would compare as a plain password.
var validBcrypt = regexp.MustCompile(`^\$2[abxy]\$\d{2}\$`)

// Permissions returns the user's permissions: publish the subjects of its
// tables (TableSubjects) and of their change feeds (ChangesSubjects), of its account's table commands with
// ManageTables (TablesSubjects), of its queues and its functions, and
// the JetStream API subjects that consume from its Streams
// (consumeSubjects); subscribe under its InboxPrefix and to its Subjects. The allow lists are never empty
// (Validate refuses a user that grants nothing; an empty list would allow
// everything).
func (u ServiceUser) Permissions(prefix string) *server.Permissions {
	var pub []string
	for _, t := range u.Tables {
		pub = append(pub, TableSubjects(prefix, u.Account, t)...)
		pub = append(pub, ChangesSubjects(prefix, u.Account, t)...)
	}
	if u.ManageTables {
		pub = append(pub, TablesSubjects(prefix, u.Account)...)
	}
	for _, q := range u.Queues {
		pub = append(pub, functions.QueueSubject(prefix, q))
	}
	for _, f := range u.Functions {
		pub = append(pub, functions.DirectSubject(prefix, f))
	}
	for _, s := range u.Streams {
		api, next := consumeSubjects(s)
		pub = append(append(pub, api...), next)
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: append([]string{u.InboxPrefix() + ".>"}, u.Subjects...)},
	}
}

// ReadUsers reads and checks a users file (ParseUsers). A file that other
// users may read or write is refused (except on Windows, where the mode
// bits say nothing of it): it holds passwords or their hashes.
func ReadUsers(path string) ([]ServiceUser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("natsauth: %s may be read or written by other users (mode %04o): chmod 600 it", path, st.Mode().Perm())
	}
	raw, err := io.ReadAll(io.LimitReader(f, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("natsauth: %w", err)
	}
	users, err := ParseUsers(raw)
	if err != nil {
		return nil, fmt.Errorf("natsauth: %s: %w", path, err)
	}
	return users, nil
}

// ParseUsers decodes a users file, {"users": [ServiceUser, …]}, refusing
// unknown fields and trailing data, and checks every user (Validate) and
// that no two share a name (ignoring case, as the reserved names are).
func ParseUsers(raw []byte) ([]ServiceUser, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f usersFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a users file: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not a users file: data after the object")
	}
	seen := map[string]bool{}
	for i, u := range f.Users {
		if err := u.Validate(); err != nil {
			return nil, fmt.Errorf("user %d (%q): %w", i+1, u.User, err)
		}
		k := strings.ToLower(u.User)
		if seen[k] {
			return nil, fmt.Errorf("user %d (%q): another user has that name", i+1, u.User)
		}
		seen[k] = true
	}
	return f.Users, nil
}

// duplicate returns an element that list holds twice, or "".
func duplicate(list []string) string {
	seen := make(map[string]bool, len(list))
	for _, s := range list {
		if seen[s] {
			return s
		}
		seen[s] = true
	}
	return ""
}
