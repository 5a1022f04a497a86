// Package abi is the contract between the function runner and a function
// compiled to WebAssembly: the names of the imports and exports, the
// operations a guest may ask of the runner (the runner calls), and the msgpack messages they exchange.
// docs/FUNCTIONS.md describes it for authors of guests in other languages.
//
// The package is used on both sides: by the runner's sandbox
// (functions/wasm) and by the Go guest SDK (functions/sdk), which is
// compiled with GOOS=wasip1 GOARCH=wasm. It does no I/O.
//
// # The calls
//
// A guest exports its linear memory as "memory", the reactor initialiser
// "_initialize" (Go's -buildmode=c-shared adds it) and
//
//	cairn_handle() -> i32
//
// which runs one invocation and returns StatusOK, or StatusFailed after
// calling OpFail with the reason. It imports from the module "cairn":
//
//	call(op, req_ptr, req_len, out_ptr, out_cap i32) -> i32
//	take(out_ptr, out_cap i32) -> i32
//
// call performs operation op with the request msgpack in memory at
// [req_ptr, req_ptr+req_len). Its answer is a Response in msgpack. If the
// answer fits in out_cap bytes it is written at out_ptr; call returns the
// answer's length either way. A guest whose buffer was too small allocates
// one of that length and calls take, which copies the kept answer and
// returns its length (or -1 when nothing is kept; a buffer still too small
// gets the length and nothing copied). The runner keeps only the
// latest answer. A negative return of call is an ABI misuse (bad pointer,
// unknown op); the guest should fail the invocation.
//
// Nothing else is imported but WASI preview 1 ("wasi_snapshot_preview1"),
// which the sandbox gives without a filesystem or network: clocks, random_get
// seeded from the trigger's id for each invocation, and stdout/stderr into
// the node's log.
package abi

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/engine/wire"
)

// Version is this ABI's version, named in manifests and error messages.
// A change that old guests cannot follow gets a new version.
const Version = 1

// Names of the imports and exports.
const (
	Module       = "cairn"        // the module of host functions (wazero's term) the guest imports
	ImportCall   = "call"         // (op, req_ptr, req_len, out_ptr, out_cap i32) -> i32
	ImportTake   = "take"         // (out_ptr, out_cap i32) -> i32
	ExportHandle = "cairn_handle" // () -> i32
	ExportMemory = "memory"
	ExportInit   = "_initialize" // optional; run once when an instance starts
	WASIModule   = "wasi_snapshot_preview1"
)

// Status is what cairn_handle returns.
const (
	StatusOK     = 0
	StatusFailed = 1
)

// Op is an operation a guest calls.
type Op int32

// The operations. Requests and answers are msgpack (see each type).
const (
	// OpTrigger: no request; answers Response.Trigger.
	OpTrigger Op = 1
	// OpGet: a GetRequest; answers Response.Entity (nil when absent).
	OpGet Op = 2
	// OpQuery: a QueryRequest; answers Response.Entities.
	OpQuery Op = 3
	// OpWrite: a WriteRequest; answers an empty Response or an error
	// (a refused write: a bad entity, a second write of one entity).
	OpWrite Op = 4
	// OpEnqueue: an EnqueueRequest; answers an empty Response.
	OpEnqueue Op = 5
	// OpOutput: the request is the raw reply of a direct invocation
	// (not msgpack); answers an empty Response.
	OpOutput Op = 6
	// OpLog: the request is a raw line of text for the node's log.
	OpLog Op = 7
	// OpFail: the request is the raw text of the invocation's error.
	OpFail Op = 8
	// OpSetting: a SettingRequest; answers Response.Value, nil when the
	// function has no setting or secret of that name.
	OpSetting Op = 9
	// OpRespond: a RespondRequest, the status and headers of an HTTP
	// trigger's reply (its body is OpOutput's); answers an empty
	// Response. Without it an HTTP reply is 200 (204 with no body).
	OpRespond Op = 10
)

// Known reports whether o is an operation of this ABI: they are numbered
// from OpTrigger to OpRespond without a gap.
func (o Op) Known() bool { return o >= OpTrigger && o <= OpRespond }

func (o Op) String() string {
	switch o {
	case OpTrigger:
		return "trigger"
	case OpGet:
		return "get"
	case OpQuery:
		return "query"
	case OpWrite:
		return "write"
	case OpEnqueue:
		return "enqueue"
	case OpOutput:
		return "output"
	case OpLog:
		return "log"
	case OpFail:
		return "fail"
	case OpSetting:
		return "setting"
	case OpRespond:
		return "respond"
	}
	return fmt.Sprintf("op(%d)", int32(o))
}

// Trigger kinds.
const (
	KindQueue  = "queue"  // a message on a queue
	KindChange = "change" // a committed change of a table
	KindTimer  = "timer"  // a tick of a timer (delivered through a queue)
	KindInvoke = "invoke" // a direct request over NATS
	KindHTTP   = "http"   // a request on one of the function's HTTP routes
)

// Trigger is what started an invocation.
type Trigger struct {
	// ID identifies the trigger (a queue message's stream sequence, a
	// change's journal position, a request's id). A retried invocation
	// has the same ID; the runner derives its writes' command ids from it.
	ID       string `msgpack:"id"`
	Kind     string `msgpack:"kind"`
	Function string `msgpack:"fn"`
	Version  int    `msgpack:"ver"`
	// Queue is the queue of a queue or timer trigger.
	Queue string `msgpack:"q,omitempty"`
	// Body is the message (queue, timer) or the request (invoke).
	Body []byte `msgpack:"b,omitempty"`
	// DequeueCount counts the deliveries of this trigger, this one
	// included (1 on the first), crashes and timeouts too.
	DequeueCount int `msgpack:"dq"`
	// Time is when the message was enqueued or the change committed, in
	// ticks (100 ns since the Unix epoch).
	Time int64 `msgpack:"ts"`
	// Change is the committed change of a change trigger.
	Change *Change `msgpack:"ch,omitempty"`
	// HTTP is the request of an HTTP trigger (its body is Body).
	HTTP *HTTPRequest `msgpack:"http,omitempty"`
}

// HTTPRequest is the request that an HTTP trigger is about.
type HTTPRequest struct {
	Method string `msgpack:"m"`
	// Path is what follows /fn/<function>, as sent (escaped); Route is
	// the pattern of the route it matched, and Params its parameters,
	// unescaped.
	Path   string            `msgpack:"p"`
	Route  string            `msgpack:"r"`
	Params map[string]string `msgpack:"pa,omitempty"`
	// Query is the raw query string, without "?".
	Query string `msgpack:"qs,omitempty"`
	// Header holds the request's headers, names canonical, without those
	// that carried its authorisation (Authorization, x-functions-key)
	// and cookies.
	Header map[string][]string `msgpack:"h,omitempty"`
	// Caller names who called: "key:<name>" for a function key,
	// "account:<name>" for an account's signature, "sas:<name>" for an
	// account's shared access signature, "anonymous".
	Caller string `msgpack:"c,omitempty"`
}

// HeaderValue is the first value of the header name, matched without
// regard to case, or "" when the request has none.
func (r *HTTPRequest) HeaderValue(name string) string {
	if vs := r.HeaderValues(name); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// HeaderValues are the values of the header name, matched without regard
// to case (nil when the request has none).
func (r *HTTPRequest) HeaderValues(name string) []string {
	if vs, ok := r.Header[name]; ok {
		return vs
	}
	for k, vs := range r.Header {
		if strings.EqualFold(k, name) {
			return vs
		}
	}
	return nil
}

// RespondRequest sets an HTTP trigger's reply status (200..599; 0: 200)
// and headers (OpRespond).
type RespondRequest struct {
	Status int                 `msgpack:"s,omitempty"`
	Header map[string][]string `msgpack:"h,omitempty"`
}

// Change is one committed change of a table.
type Change struct {
	Table string `msgpack:"t"`
	// Seq is the journal position of the change's record; Index its
	// place in the record.
	Seq   uint64 `msgpack:"seq"`
	Index int    `msgpack:"i"`
	// Deleted is set when the entity was deleted; Entity then has only
	// its keys.
	Deleted bool   `msgpack:"del,omitempty"`
	Entity  Entity `msgpack:"e"`
	ETag    string `msgpack:"etag"`
	// PrevETag is the entity's ETag before the change: "" when it did
	// not exist, or when PrevUnknown.
	PrevETag string `msgpack:"petag,omitempty"`
	// PrevUnknown is set when the change's record was written before
	// Cairn recorded previous versions: PrevETag and Prev say nothing.
	PrevUnknown bool `msgpack:"punk,omitempty"`
	// Prev is the entity as it was before the change, with its ETag (nil
	// when it did not exist or PrevUnknown).
	Prev *Entity `msgpack:"prev,omitempty"`
}

// GetRequest reads one entity.
type GetRequest struct {
	Table        string `msgpack:"t"`
	PartitionKey string `msgpack:"pk"`
	RowKey       string `msgpack:"rk"`
}

// QueryRequest reads the entities of one partition, in RowKey order,
// that match Filter (OData, as over HTTP; empty: all), at most Top (0:
// no limit but the runner's).
type QueryRequest struct {
	Table        string `msgpack:"t"`
	PartitionKey string `msgpack:"pk"`
	Filter       string `msgpack:"f,omitempty"`
	Top          int    `msgpack:"top,omitempty"`
}

// WriteRequest is one write: Op is an engine operation name (Insert,
// Replace, Merge, InsertOrReplace, InsertOrMerge, Delete); IfMatch as in
// the command protocol. Entity carries the keys (and for all but Delete,
// the properties).
type WriteRequest struct {
	Table   string `msgpack:"t"`
	Op      string `msgpack:"op"`
	Entity  Entity `msgpack:"e"`
	IfMatch string `msgpack:"if,omitempty"`
}

// EnqueueRequest sends a message to a queue once the invocation succeeds.
type EnqueueRequest struct {
	Queue string `msgpack:"q"`
	Body  []byte `msgpack:"b"`
}

// SettingRequest reads one of the function's settings or secrets (they
// share one namespace) by name.
type SettingRequest struct {
	Name string `msgpack:"k"`
}

// Response answers a call: an error, or the operation's result.
type Response struct {
	Error    *Error   `msgpack:"err,omitempty"`
	Trigger  *Trigger `msgpack:"trig,omitempty"`
	Entity   *Entity  `msgpack:"e,omitempty"`
	Entities []Entity `msgpack:"es,omitempty"`
	// Value answers OpSetting: nil (no "v") when unset.
	Value *string `msgpack:"v,omitempty"`
}

// Error is an engine error as a guest sees it: an Azure code and a message.
type Error struct {
	Code    string `msgpack:"c"`
	Message string `msgpack:"m"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// ErrorOf converts an error for a Response: an engine error keeps its
// code; any other error is an InternalError.
func ErrorOf(err error) *Error {
	e := engine.AsError(err)
	return &Error{Code: string(e.Code), Message: e.Message}
}

// Entity is an entity in the protocol's msgpack form ({"pk", "rk", "ts",
// "p"}), plus its ETag when read.
type Entity struct {
	*engine.Entity
	ETag string
}

var (
	_ msgpack.CustomEncoder = Entity{}
	_ msgpack.CustomDecoder = (*Entity)(nil)
)

// EncodeMsgpack writes [entity, etag]; a nil entity is nil.
func (e Entity) EncodeMsgpack(enc *msgpack.Encoder) error {
	if e.Entity == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := wire.EncodeEntity(enc, e.Entity); err != nil {
		return err
	}
	return enc.EncodeString(e.ETag)
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (e *Entity) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n < 0 {
		*e = Entity{}
		return nil
	}
	if n != 2 {
		return fmt.Errorf("abi: entity: want [entity, etag], got %d items", n)
	}
	if e.Entity, err = wire.DecodeEntity(dec); err != nil {
		return err
	}
	e.ETag, err = dec.DecodeString()
	return err
}

// Marshal encodes a message.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Unmarshal decodes a message; unknown fields are skipped, so that a newer
// runner or guest can add fields.
func Unmarshal(data []byte, v any) error {
	return msgpack.Unmarshal(data, v)
}
