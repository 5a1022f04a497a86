package wire

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// Large values over NATS (docs/PROTOCOL.md, "Large values"). "PutValue"
// and "GetValue" on a table's command subject open a session on the node
// that takes them: its reply names the session's subject, which that node
// alone answers, and the value then goes up or comes down on it in
// chunks, each a request of its own (ChunkHeader numbers them).

// The ops of a value session's first request.
const (
	PutValueOp = "PutValue"
	GetValueOp = "GetValue"
)

// Headers of a value session's messages.
const (
	// ChunkHeader numbers a session's messages from 0: an upload's
	// chunks, a download's asks for the next chunk, and their replies.
	ChunkHeader = "Cairn-Chunk"
	// ValueHeader marks a message: on an upload's message "end" (the
	// last: the value is complete) or "abort"; on a node's reply "end"
	// (a download's last chunk, or the stored upload's ValueReply) or
	// "error" (a reply whose body is an error reply).
	ValueHeader = "Cairn-Value"
)

// ValueRequest opens a value session: PutValue uploads a value of the
// entity PartitionKey/RowKey (which need not exist yet), GetValue
// downloads the value that the entity's property Property refers to.
type ValueRequest struct {
	Op                   string
	PartitionKey, RowKey string
	// Property is GetValue's property holding the reference.
	Property string
	// Position, on GetValue, is a journal position the view must have
	// reached before the entity is read (as a Retrieve's).
	Position uint64
}

// ValueReply answers a value session's first request (Session, Chunk, and
// for GetValue Reference, Size and Uploaded) or an upload's last message
// (Reference, Size, Uploaded), or is an error.
type ValueReply struct {
	Error *engine.Error
	// Session is the subject of the session's messages.
	Session string
	// Chunk is the most bytes one chunk carries.
	Chunk int
	// Reference is the value's reference, the String an entity holds
	// (engine.ValueRef).
	Reference string
	Size      uint64
	Uploaded  time.Time
}

type valueForm struct {
	Op           string `json:"op" msgpack:"op"`
	PartitionKey string `json:"partitionKey" msgpack:"partitionKey"`
	RowKey       string `json:"rowKey" msgpack:"rowKey"`
	Property     string `json:"property,omitempty" msgpack:"property,omitempty"`
	Position     uint64 `json:"position,omitempty" msgpack:"position,omitempty"`
}

type valueReplyForm struct {
	Session   string `json:"session,omitempty" msgpack:"session,omitempty"`
	Chunk     int    `json:"chunk,omitempty" msgpack:"chunk,omitempty"`
	Reference string `json:"reference,omitempty" msgpack:"reference,omitempty"`
	Size      uint64 `json:"size,omitempty" msgpack:"size,omitempty"`
	Uploaded  string `json:"uploaded,omitempty" msgpack:"uploaded,omitempty"`
}

// ValueOp returns the op of a request body that opens a value session
// (PutValueOp or GetValueOp), or "". Bodies without "Value" in their
// bytes, the common case, cost one byte search.
func ValueOp(data []byte, enc Encoding) string {
	if !bytes.Contains(data, []byte("Value")) && (enc != JSON || !bytes.Contains(data, []byte(`\u`))) {
		return ""
	}
	var op string
	if enc == JSON {
		op = string(jsonOp(data))
	} else {
		op = msgpackOp(data)
	}
	if op == PutValueOp || op == GetValueOp {
		return op
	}
	return ""
}

// msgpackOp returns the "op" of a msgpack request map, or "".
func msgpackOp(data []byte) string {
	d := newDecoder(data)
	n, err := d.mapLen()
	if err != nil {
		return ""
	}
	for i := 0; i < n; i++ {
		k, err := d.dec.DecodeString()
		if err != nil {
			return ""
		}
		if k == "op" {
			op, _ := d.dec.DecodeString()
			return op
		}
		if skip(d.dec) != nil {
			return ""
		}
	}
	return ""
}

// DecodeValueRequest decodes a value session's first request. Its fields
// are named exactly as the protocol names them, each once; any other, a
// field the op does not take, a GetValue without "property" and an op
// other than PutValue and GetValue are InvalidInput. The keys are
// checked by the door (engine.ValidateKey).
func DecodeValueRequest(data []byte, enc Encoding) (*ValueRequest, error) {
	if len(data) > maxBody {
		return nil, engine.Errorf(engine.CodeRequestBodyTooLarge, "request of %d bytes; the limit is %d", len(data), maxBody)
	}
	if enc == JSON {
		if err := checkRequestJSON(data, "value request"); err != nil {
			return nil, err
		}
	} else if err := checkRequestMsgpack(newDecoder(data).dec); err != nil {
		return nil, at("value request", err)
	}
	var f valueForm
	if err := decodeStrict(enc, data, &f); err != nil {
		return nil, at("value request", err)
	}
	// The fields each op takes are checked above (operations).
	switch {
	case f.Op != PutValueOp && f.Op != GetValueOp:
		return nil, invalid("value request: op %q is neither PutValue nor GetValue", f.Op)
	case f.Op == GetValueOp && f.Property == "":
		return nil, invalid(`GetValue needs "property": the property holding the value's reference`)
	}
	return &ValueRequest{Op: f.Op, PartitionKey: f.PartitionKey, RowKey: f.RowKey, Property: f.Property, Position: f.Position}, nil
}

// EncodeValueRequest encodes a value session's first request (for
// clients).
func EncodeValueRequest(r *ValueRequest, enc Encoding) ([]byte, error) {
	f := valueForm{Op: r.Op, PartitionKey: r.PartitionKey, RowKey: r.RowKey, Property: r.Property, Position: r.Position}
	return marshalForm(enc, f)
}

// EncodeValueReply encodes a ValueReply; an error reply is a command
// reply's ({"error": …}).
func EncodeValueReply(r *ValueReply, enc Encoding) []byte {
	if r.Error != nil {
		return EncodeReply(&engine.Reply{Error: r.Error}, enc)
	}
	f := valueReplyForm{Session: r.Session, Chunk: r.Chunk, Reference: r.Reference, Size: r.Size}
	if !r.Uploaded.IsZero() {
		f.Uploaded = r.Uploaded.UTC().Format(time.RFC3339Nano)
	}
	b, err := marshalForm(enc, f)
	if err != nil {
		return EncodeReply(&engine.Reply{Error: engine.Errorf(engine.CodeInternalError, "encode value reply: %v", err)}, enc)
	}
	return b
}

// DecodeValueReply decodes a ValueReply (for clients and tests): the
// session or the stored value, or the error of an error reply.
func DecodeValueReply(data []byte, enc Encoding) (*ValueReply, error) {
	rep, err := decodeReply(data, enc)
	if err != nil {
		return nil, err
	}
	if rep.Error != nil {
		return &ValueReply{Error: rep.Error}, nil
	}
	var f valueReplyForm
	if err := unmarshalForm(enc, data, &f); err != nil {
		return nil, invalid("value reply: %v", err)
	}
	r := &ValueReply{Session: f.Session, Chunk: f.Chunk, Reference: f.Reference, Size: f.Size}
	if f.Uploaded != "" {
		if r.Uploaded, err = time.Parse(time.RFC3339Nano, f.Uploaded); err != nil {
			return nil, invalid("value reply: uploaded %q: %v", f.Uploaded, err)
		}
	}
	return r, nil
}

// marshalForm encodes one of the protocol's plain forms (a struct with
// json and msgpack tags) in enc.
func marshalForm(enc Encoding, f any) ([]byte, error) {
	if enc == JSON {
		return json.Marshal(f)
	}
	return msgpack.Marshal(f)
}

// unmarshalForm decodes one of the protocol's plain forms, leniently (a
// reply: fields a newer node adds are skipped).
func unmarshalForm(enc Encoding, data []byte, f any) error {
	if enc == JSON {
		return json.Unmarshal(data, f)
	}
	return msgpack.Unmarshal(data, f)
}
