package wire

import (
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/engine"
)

// A request's members are named exactly as docs/PROTOCOL.md spells them,
// case and all: "op", never "OP" or "Op". Each operation takes the fields
// the operations table below gives it and no other; a member that is not
// a field of the protocol, one given twice, or one the operation does not
// take is refused with InvalidInput. encoding/json would match "OP" to
// "op", so the JSON decoder checks the names as it validates the text
// (fieldscan.go), before anything is decoded; the msgpack decoder meets
// the names one by one, refusing an unknown or repeated one as it meets
// it and a field the operation does not take once the whole request is
// read, so a bad value met first is reported instead.

// fields is a set of the members of an object, a bit per name of its
// fieldNames.
type fields uint32

// fieldNames lists the members an object of the protocol may have, in
// the order of their bits.
type fieldNames []string

// bit is name's bit, or 0 when name is none of them (spelled otherwise).
func (fs fieldNames) bit(name []byte) fields {
	for i, f := range fs {
		if string(name) == f {
			return 1 << i
		}
	}
	return 0
}

// name is the field spelled name, "" when none is: the field's name
// without making one of name's bytes.
func (fs fieldNames) name(name []byte) string {
	for _, f := range fs {
		if string(name) == f {
			return f
		}
	}
	return ""
}

// list names the fields of set, quoted and in order: `"op", "entity"`.
func (fs fieldNames) list(set fields) string {
	var b strings.Builder
	for i, f := range fs {
		if set&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", f)
		}
	}
	return b.String()
}

// first is the name of the lowest field of set.
func (fs fieldNames) first(set fields) string {
	for i, f := range fs {
		if set&(1<<i) != 0 {
			return f
		}
	}
	return ""
}

// unknown refuses a member that is none of fs, saying which field it
// was taken for when it differs from one in case only.
func (fs fieldNames) unknown(name, what string) error {
	for _, f := range fs {
		if strings.EqualFold(name, f) {
			return invalid("unknown field %q: the %s field is %q (field names are case-sensitive)", name, what, f)
		}
	}
	return invalid("unknown field %q: %s fields are %s", name, what, fs.list(1<<len(fs)-1))
}

// The fields of a request (docs/PROTOCOL.md, Requests and Queries), and
// of the objects in it.
var (
	requestFields = fieldNames{"op", "id", "ifMatch", "entity", "partitionKey", "rowKey", "ops", "table", "messages",
		"asOf", "position", "filter", "select", "top", "continuation", "descending", "property"}
	messageFields = fieldNames{"queue", "subject", "id", "body", "bodyBase64"}
	changesFields = fieldNames{"from", "max", "partitions", "wait"}
)

// The bits of requestFields.
const (
	fOp fields = 1 << iota
	fID
	fIfMatch
	fEntity
	fPartitionKey
	fRowKey
	fOps
	fTable
	fMessages
	fAsOf
	fPosition
	fFilter
	fSelect
	fTop
	fContinuation
	fDescending
	fProperty
)

// operation is what one operation of the protocol takes.
type operation struct {
	name string
	// takes are the fields the operation takes, "op" aside.
	takes fields
	// inBatch, for an operation a Batch may hold, are the fields it takes
	// there: the command's own (id, messages) go on the Batch.
	inBatch fields
	// tables: a table command (<prefix>.tables), not an entity command
	// (<prefix>.cmd.<Table>).
	tables bool
	// aliasOf is the operation this one is another name of.
	aliasOf string
	// merges: its entity's properties join those of the stored entity;
	// its strings are decoded as strings of their own (decoder.entity).
	merges bool
}

// write are the fields every entity write takes.
const write = fID | fMessages

// operations is the protocol's operations, in the order error texts list
// them: the one place that says which fields each takes.
var operations = []operation{
	{name: "Insert", takes: write | fEntity, inBatch: fEntity},
	{name: "Replace", takes: write | fEntity | fIfMatch, inBatch: fEntity | fIfMatch},
	{name: "Update", takes: write | fEntity | fIfMatch, inBatch: fEntity | fIfMatch, aliasOf: "Replace"},
	{name: "Merge", takes: write | fEntity | fIfMatch, inBatch: fEntity | fIfMatch, merges: true},
	{name: "InsertOrReplace", takes: write | fEntity, inBatch: fEntity},
	{name: "InsertOrMerge", takes: write | fEntity, inBatch: fEntity, merges: true},
	{name: "Delete", takes: write | fPartitionKey | fRowKey | fEntity | fIfMatch, inBatch: fPartitionKey | fRowKey | fEntity | fIfMatch},
	{name: "Batch", takes: write | fOps},
	{name: "Retrieve", takes: fPartitionKey | fRowKey | fEntity | fAsOf | fPosition},
	{name: "Query", takes: fFilter | fSelect | fTop | fContinuation | fDescending | fAsOf | fPosition},
	{name: "PutValue", takes: fPartitionKey | fRowKey},
	{name: "GetValue", takes: fPartitionKey | fRowKey | fProperty | fPosition},
	{name: "CreateTable", takes: fTable, tables: true},
	{name: "DeleteTable", takes: fTable, tables: true},
	{name: "ListTables", tables: true},
}

// inAnyBatchOp are the fields some operation of a Batch takes.
var inAnyBatchOp = func() fields {
	set := fOp
	for _, o := range operations {
		set |= o.inBatch
	}
	return set
}()

// operationNamed returns the operation called name, or nil.
func operationNamed(name []byte) *operation {
	for i := range operations {
		if string(name) == operations[i].name {
			return &operations[i]
		}
	}
	return nil
}

// opNames lists, for error texts, the operations that match: "Insert,
// Replace (or Update), …, Retrieve or Query".
func opNames(match func(*operation) bool) string {
	var names []string
	for i := range operations {
		o := &operations[i]
		if !match(o) || o.aliasOf != "" {
			continue
		}
		name := o.name
		for _, a := range operations {
			if a.aliasOf == o.name {
				name += " (or " + a.name + ")"
			}
		}
		names = append(names, name)
	}
	return join(names, " or ")
}

// join joins names with commas, and the last two with last.
func join(names []string, last string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + last + names[len(names)-1]
}

// EntityOps lists, for error texts, the operations of a table's command
// subject: "Insert, Replace (or Update), …, Retrieve or Query".
func EntityOps() string { return opNames(func(o *operation) bool { return !o.tables }) }

// TableOps lists the operations of the table subject, as EntityOps does.
func TableOps() string { return opNames(func(o *operation) bool { return o.tables }) }

// batchOps lists the operations a Batch holds, as EntityOps does.
func batchOps() string { return opNames(func(o *operation) bool { return o.inBatch != 0 }) }

// errUnknownOp refuses an entity command's op that is none of the
// protocol's, naming every operation the subject takes.
func errUnknownOp(op string) error {
	if op == "" {
		return invalid("no \"op\": a request names its operation (%s)", EntityOps())
	}
	return invalid("unknown operation %q: use %s (table commands, %s, go to the table subject)", op, EntityOps(), TableOps())
}

// errUnknownBatchOp refuses an operation of a Batch that is none of
// those a Batch holds.
func errUnknownBatchOp(op string) error {
	return invalid("%q is not an operation of a batch: use %s", op, batchOps())
}

// shape collects the fields of one request (or operation of a Batch) as
// a decoder meets them, refusing a name that is not a field and a field
// given twice at once, and an operation of a Batch's field that no
// operation of a Batch takes (so that nothing nests).
type shape struct {
	set     fields
	inBatch bool
}

// add notes the member name.
func (sh *shape) add(name []byte) error {
	f := requestFields.bit(name)
	switch {
	case f == 0:
		return requestFields.unknown(string(name), "request")
	case sh.set&f != 0:
		return invalid("field %q is given twice", string(name))
	case sh.inBatch && f&inAnyBatchOp == 0:
		return errNotInBatchOp(f)
	}
	sh.set |= f
	return nil
}

// errNotInBatchOp refuses a field f of an operation of a Batch that only
// the Batch takes, or only requests of their own.
func errNotInBatchOp(f fields) error {
	switch f {
	case fOps:
		return invalid("operations of a batch cannot have \"ops\"")
	case fMessages:
		return errOpMessages()
	case fID:
		return invalid("operations of a batch cannot have \"id\": give the batch's id on the Batch")
	}
	return invalid("operations of a batch cannot have %q: each takes \"op\" and %s", requestFields.first(f), requestFields.list(inAnyBatchOp&^fOp))
}

// check refuses the fields op does not take, naming the first of them
// and the operation. An op that is not an operation of the protocol is
// left to the caller, which knows what the subject takes.
func (sh *shape) check(op []byte) error {
	o := operationNamed(op)
	if o == nil {
		return nil
	}
	takes := o.takes
	if sh.inBatch {
		if o.inBatch == 0 {
			return nil // not an operation of a batch: ToCommand says so
		}
		takes = o.inBatch
	}
	extra := sh.set &^ (takes | fOp)
	if extra == 0 {
		return nil
	}
	f := requestFields.first(extra)
	where := o.name
	if sh.inBatch {
		where += " in a batch"
	}
	return engine.Errorf(engine.CodeInvalidInput, "%s does not take %q: it takes %s%s", where, f, requestFields.list(takes|fOp), takenBy(extra&-extra))
}

// given is the set of fields a request built in Go gives: those that are
// not zero.
func given(r *engine.Request) fields {
	set := fOp
	for _, g := range [...]struct {
		f  fields
		ok bool
	}{
		{fID, r.ID != ""}, {fIfMatch, r.IfMatch != ""}, {fEntity, r.Entity != nil},
		{fPartitionKey, r.PartitionKey != ""}, {fRowKey, r.RowKey != ""}, {fOps, len(r.Ops) > 0},
		{fTable, r.Table != ""}, {fMessages, len(r.Messages) > 0}, {fAsOf, r.AsOf != 0}, {fPosition, r.Position != 0},
	} {
		if g.ok {
			set |= g.f
		}
	}
	return set
}

// checkGiven refuses, in a request built in Go (or an operation of its
// Batch), the fields its operation does not take, as the decoders refuse
// them in what a client sends.
func checkGiven(r *engine.Request, inBatch bool) error {
	sh := shape{set: given(r), inBatch: inBatch}
	if extra := sh.set &^ inAnyBatchOp; inBatch && extra != 0 {
		return errNotInBatchOp(extra & -extra)
	}
	return sh.check([]byte(r.Op))
}

// takenBy says which operations take field f, for a refusal: "; "asOf"
// is Retrieve's and Query's".
func takenBy(f fields) string {
	var names []string
	for _, o := range operations {
		if o.takes&f != 0 && o.aliasOf == "" {
			names = append(names, o.name+"'s")
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("; %q is %s", requestFields.first(f), join(names, " and "))
}

// objectShape collects the members of an object of other fields (an
// outbox message, a change feed request), refusing unknown ones and any
// given twice.
type objectShape struct {
	names fieldNames
	what  string
	set   fields
}

func (sh *objectShape) add(name []byte) error {
	f := sh.names.bit(name)
	switch {
	case f == 0:
		return sh.names.unknown(string(name), sh.what)
	case sh.set&f != 0:
		return invalid("field %q is given twice", string(name))
	}
	sh.set |= f
	return nil
}
