// Package wire holds the encodings of Cairn's command protocol
// (docs/PROTOCOL.md): requests and replies in msgpack and in JSON, the
// entity JSON of the Azure Tables REST protocol (also used by the HTTP
// API), and the conversion of a request into an engine.Command.
//
// Every decoding failure is an *engine.Error whose message says where the
// input is wrong: InvalidInput (or InvalidValueType), PropertiesNeedValue
// for an entity without its keys, DuplicatePropertiesSpecified for a name
// given twice. Nothing is read lossily: JSON that is not valid UTF-8, or has
// a lone surrogate escape, is refused rather than read with U+FFFD.
//
// Requests are strict (fields.go): a member whose name is not a field of
// the protocol spelled exactly (case and all), a field given twice, or a
// field its operation does not take is InvalidInput naming the field and
// the operation, in JSON and msgpack alike; one table says which
// operation takes which field. The journal's records are not decoded
// here (journal/record_decode.go), and keep what a newer writer added.
//
// What it costs: decoding and encoding are single passes without
// reflection (the entity JSON has its own validating scanner, checked
// against encoding/json by a differential fuzz target); the figures per
// entity are in docs/PERFORMANCE.md (go test ./engine/wire/ -run x -bench .).
package wire

import (
	"strings"

	"github.com/cairn-dev/cairn/engine"
)

// Encoding is a body encoding.
type Encoding int

// The two encodings of the protocol.
const (
	Msgpack Encoding = iota
	JSON
)

// Detect tells a body's encoding from its Content-Type, or else from its
// first non-blank byte: '{' is JSON, anything else msgpack.
func Detect(data []byte, contentType string) Encoding {
	ct := strings.ToLower(contentType)
	switch {
	case strings.HasPrefix(ct, "application/json"):
		return JSON
	case strings.HasPrefix(ct, "application/msgpack"), strings.HasPrefix(ct, "application/x-msgpack"):
		return Msgpack
	}
	for _, c := range data {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return JSON
		}
		break
	}
	return Msgpack
}

// DecodeRequest decodes a request body.
func DecodeRequest(data []byte, enc Encoding) (*engine.Request, error) {
	if enc == JSON {
		return DecodeRequestJSON(data)
	}
	return DecodeRequestMsgpack(data)
}

// EncodeReply encodes a reply.
func EncodeReply(r *engine.Reply, enc Encoding) []byte {
	if enc == JSON {
		return EncodeReplyJSON(r)
	}
	return EncodeReplyMsgpack(r)
}

// maxBody bounds what a decoder accepts (a batch is at most 4 MiB of
// entities; its encoding a little more).
const maxBody = 8 << 20

func invalid(format string, args ...any) *engine.Error {
	return engine.Errorf(engine.CodeInvalidInput, format, args...)
}

// at prefixes a decoding error's message with where it happened.
func at(where string, err error) error {
	e := engine.AsError(err)
	if e.Code == engine.CodeInternalError {
		return invalid("%s: %s", where, e.Message)
	}
	c := *e
	c.Message = where + ": " + e.Message
	return &c
}

// errAsOfZero refuses a request's "asOf" of 0: journal positions start at
// 1 (leave the field out to read the present).
func errAsOfZero() error {
	return engine.Errorf(engine.CodeInvalidAsOfPosition, "\"asOf\" is 0: journal positions start at 1 (leave it out to read the present)")
}

// errOpMessages refuses messages on an operation of a batch, which would
// otherwise be dropped: a batch's messages go on the batch, into its one
// record.
func errOpMessages() error {
	return invalid("operations of a batch cannot have \"messages\": give the batch's messages on the Batch")
}
