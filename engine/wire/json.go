package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/cairn-dev/cairn/engine"
)

type jsonRequest struct {
	Op           string          `json:"op"`
	ID           string          `json:"id,omitempty"`
	IfMatch      string          `json:"ifMatch,omitempty"`
	Entity       json.RawMessage `json:"entity,omitempty"`
	PartitionKey json.RawMessage `json:"partitionKey,omitempty"`
	RowKey       json.RawMessage `json:"rowKey,omitempty"`
	Ops          jsonOps         `json:"ops,omitempty"`
	Table        string          `json:"table,omitempty"`
	Messages     jsonMessages    `json:"messages,omitempty"`
	AsOf         *uint64         `json:"asOf,omitempty"`
	Position     uint64          `json:"position,omitempty"`
}

// jsonOps are a Batch's operations, decoded one at a time: more than
// engine.MaxBatchOps are refused at the first past the bound, before the
// rest is decoded (an operation "{}" is 3 bytes of a request and about
// 200 of the decoder's: 8 MiB of them cost gigabytes). Their members
// were checked before (checkRequestJSON): none has "ops" of its own.
type jsonOps []jsonRequest

// UnmarshalJSON decodes the array (null: none).
func (ops *jsonOps) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*ops = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return invalid("ops: not a JSON array of operations")
	}
	var out jsonOps
	for dec.More() {
		if len(out) == engine.MaxBatchOps {
			return invalid("The batch request operation exceeds the maximum %d changes per change set (it has more).", engine.MaxBatchOps)
		}
		var op jsonRequest
		if err := dec.Decode(&op); err != nil {
			return at(fmt.Sprintf("ops[%d]", len(out)), codedOr(err, "not a JSON operation"))
		}
		out = append(out, op)
	}
	if _, err := dec.Token(); err != nil {
		return invalid("ops: not a JSON array of operations: %v", err)
	}
	*ops = out
	return nil
}

// jsonMessage is an outbox message: a destination (queue or subject), an
// optional id, and a body as text or as base64.
type jsonMessage struct {
	Queue      string  `json:"queue,omitempty"`
	Subject    string  `json:"subject,omitempty"`
	ID         string  `json:"id,omitempty"`
	Body       *string `json:"body,omitempty"`
	BodyBase64 []byte  `json:"bodyBase64,omitempty"`
}

// jsonMessages is a JSON array of messages, decoded one message at a
// time: an array of more than engine.MaxCommandMessages is refused at the
// first message past the bound, before the rest is decoded, so that a
// request of a few bytes per message cannot make the decoder allocate
// hundreds of thousands of them.
type jsonMessages []jsonMessage

// UnmarshalJSON decodes the array (null: none). Its messages' members
// were checked before (checkMessagesJSON).
func (ms *jsonMessages) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		*ms = nil
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return invalid("messages: not a JSON array of messages")
	}
	var out jsonMessages
	for dec.More() {
		if len(out) == engine.MaxCommandMessages {
			return invalid("messages: a command carries at most %d outbox messages, this one more", engine.MaxCommandMessages)
		}
		var m jsonMessage
		if err := dec.Decode(&m); err != nil {
			return invalid("messages[%d]: %v", len(out), err)
		}
		out = append(out, m)
	}
	if _, err := dec.Token(); err != nil {
		return invalid("messages: not a JSON array of messages: %v", err)
	}
	*ms = out
	return nil
}

// message converts the i-th message; a body given both ways is refused.
// The destination is checked by engine.ValidateCommand.
func (m *jsonMessage) message(i int) (engine.Message, error) {
	out := engine.Message{Queue: m.Queue, Subject: m.Subject, ID: m.ID, Body: m.BodyBase64}
	if m.Body != nil {
		if m.BodyBase64 != nil {
			return engine.Message{}, invalid("messages[%d]: \"body\" and \"bodyBase64\" both given: give one", i)
		}
		out.Body = []byte(*m.Body)
	}
	if len(out.Body) == 0 {
		out.Body = nil // one empty body, however it was written
	}
	return out, nil
}

// DecodeMessagesJSON decodes a JSON array of outbox messages, each as in
// a request's "messages" field: {"queue": …} or {"subject": …}, with
// "id", and "body" (text) or "bodyBase64", names spelled exactly so.
// Unknown fields, a field given twice, bad UTF-8 and anything but one
// array are refused with InvalidInput; the messages' destinations and
// sizes are engine.ValidateCommand's to check.
func DecodeMessagesJSON(data []byte) ([]engine.Message, error) {
	if err := checkMessagesJSON(data); err != nil {
		return nil, err
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return nil, invalid("messages: not a JSON array of messages")
	}
	var jm jsonMessages
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&jm); err != nil {
		return nil, codedOr(err, "messages: not a JSON array of messages")
	}
	if dec.More() {
		return nil, invalid("messages: data after the JSON array")
	}
	if len(jm) == 0 {
		return nil, nil
	}
	out := make([]engine.Message, len(jm))
	for i := range jm {
		m, err := jm[i].message(i)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// DecodeRequestJSON decodes a JSON request. Members are named exactly as
// the protocol names them, each once, and each a field its operation
// takes (fields.go): anything else is refused with InvalidInput.
func DecodeRequestJSON(data []byte) (*engine.Request, error) {
	if len(data) > maxBody {
		return nil, engine.Errorf(engine.CodeRequestBodyTooLarge, "request of %d bytes; the limit is %d", len(data), maxBody)
	}
	// encoding/json would read bad UTF-8 and lone surrogate escapes in the
	// request's strings (a Delete's keys, ids) as U+FFFD, and match "OP"
	// to "op": the scan refuses them first.
	if err := checkRequestJSON(data, "request"); err != nil {
		return nil, err
	}
	var jr jsonRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&jr); err != nil {
		return nil, at("request", codedOr(err, "not a valid JSON request"))
	}
	if dec.More() {
		return nil, invalid("request: data after the JSON object")
	}
	r, err := fromJSONRequest(&jr)
	if err != nil {
		return nil, at("request", err)
	}
	return r, nil
}

// codedOr returns the *engine.Error a decoding failed with (a field's own
// UnmarshalJSON returns one), or else InvalidInput saying what, with err.
func codedOr(err error, what string) error {
	var e *engine.Error
	if errors.As(err, &e) {
		return e
	}
	return invalid("%s: %v", what, err)
}

// byKeys reports whether a request names its entity by the partitionKey
// and rowKey fields: a Delete or Retrieve without an entity.
func byKeys(r *engine.Request) bool {
	if r.Entity != nil {
		return false
	}
	o, _ := engine.ParseOp(r.Op)
	return o == engine.OpDelete || r.Op == "Retrieve"
}

// keyField reads a request's partitionKey or rowKey: absent, or a string
// ("" is a key); null is no value.
func keyField(name string, raw json.RawMessage) (key string, given bool, err error) {
	switch raw = bytes.TrimSpace(raw); {
	case len(raw) == 0:
		return "", false, nil
	case bytes.Equal(raw, []byte("null")):
		return "", false, engine.Errorf(engine.CodePropertiesNeedValue, "%s is null: a key needs a value (the empty string is one)", name)
	}
	if err := json.Unmarshal(raw, &key); err != nil {
		return "", false, engine.Errorf(engine.CodeInvalidValueType, "%s must be a string", name)
	}
	return key, true, nil
}

func fromJSONRequest(jr *jsonRequest) (*engine.Request, error) {
	r := &engine.Request{Op: jr.Op, ID: jr.ID, IfMatch: jr.IfMatch, Table: jr.Table, Position: jr.Position}
	if jr.AsOf != nil {
		if *jr.AsOf == 0 {
			return nil, errAsOfZero()
		}
		r.AsOf = *jr.AsOf
	}
	pk, hasPK, err := keyField("partitionKey", jr.PartitionKey)
	if err != nil {
		return nil, err
	}
	rk, hasRK, err := keyField("rowKey", jr.RowKey)
	if err != nil {
		return nil, err
	}
	r.PartitionKey, r.RowKey = pk, rk
	if len(jr.Entity) > 0 && !bytes.Equal(bytes.TrimSpace(jr.Entity), []byte("null")) {
		e, err := ParseEntityJSON(jr.Entity)
		if err != nil {
			return nil, at("entity", err)
		}
		r.Entity = e
	}
	if byKeys(r) && !(hasPK && hasRK) {
		return nil, engine.Errorf(engine.CodePropertiesNeedValue, "%s needs \"partitionKey\" and \"rowKey\" (or an \"entity\" with the keys); the empty string is a key, a missing one is not", r.Op)
	}
	if len(jr.Ops) > 0 {
		r.Ops = make([]engine.Request, len(jr.Ops))
		for i := range jr.Ops {
			op, err := fromJSONRequest(&jr.Ops[i])
			if err != nil {
				return nil, at(fmt.Sprintf("ops[%d]", i), err)
			}
			r.Ops[i] = *op
		}
	}
	for i := range jr.Messages {
		m, err := jr.Messages[i].message(i)
		if err != nil {
			return nil, err
		}
		r.Messages = append(r.Messages, m)
	}
	return r, nil
}

// EncodeRequestJSON encodes a request as JSON (for clients and tests).
func EncodeRequestJSON(r *engine.Request) ([]byte, error) {
	return json.Marshal(toJSONRequest(r))
}

func toJSONRequest(r *engine.Request) *jsonRequest {
	jr := &jsonRequest{Op: r.Op, ID: r.ID, IfMatch: r.IfMatch, Table: r.Table, Position: r.Position}
	if r.AsOf != 0 {
		jr.AsOf = &r.AsOf
	}
	// Keys are written when set, and always where they name the entity:
	// "" is a key there, and a missing one is refused.
	if r.PartitionKey != "" || byKeys(r) {
		jr.PartitionKey = AppendJSONString(nil, r.PartitionKey)
	}
	if r.RowKey != "" || byKeys(r) {
		jr.RowKey = AppendJSONString(nil, r.RowKey)
	}
	if r.Entity != nil {
		jr.Entity = AppendEntityJSON(nil, r.Entity, "", MinimalMetadata)
	}
	for i := range r.Ops {
		jr.Ops = append(jr.Ops, *toJSONRequest(&r.Ops[i]))
	}
	for _, m := range r.Messages {
		jr.Messages = append(jr.Messages, jsonMessage{Queue: m.Queue, Subject: m.Subject, ID: m.ID, BodyBase64: m.Body})
	}
	return jr
}

type jsonResult struct {
	ETag      string `json:"etag,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
}

type jsonTable struct {
	Name    string `json:"name"`
	Epoch   uint64 `json:"epoch"`
	Created string `json:"created,omitempty"`
}

type jsonError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Index   *int   `json:"index,omitempty"`
}

type jsonReply struct {
	ETag      string          `json:"etag,omitempty"`
	Timestamp string          `json:"timestamp,omitempty"`
	Seq       uint64          `json:"seq,omitempty"`
	Results   []jsonResult    `json:"results,omitempty"`
	Entity    json.RawMessage `json:"entity,omitempty"`
	Tables    []jsonTable     `json:"tables,omitempty"`
	Duplicate bool            `json:"duplicate,omitempty"`
	Error     *jsonError      `json:"error,omitempty"`
}

func formatTicks(t int64) string {
	if t == 0 {
		return ""
	}
	return FormatTime(t)
}

// EncodeReplyJSON encodes a reply as JSON.
func EncodeReplyJSON(r *engine.Reply) []byte {
	jr := jsonReply{ETag: r.ETag, Timestamp: formatTicks(r.Timestamp), Seq: r.Seq, Duplicate: r.Duplicate}
	for _, res := range r.Results {
		jr.Results = append(jr.Results, jsonResult{ETag: res.ETag, Timestamp: formatTicks(res.Timestamp)})
	}
	if r.Entity != nil {
		jr.Entity = AppendEntityJSON(nil, r.Entity, r.ETag, MinimalMetadata)
	}
	for _, t := range r.Tables {
		jr.Tables = append(jr.Tables, jsonTable{Name: t.Name, Epoch: t.Epoch, Created: formatTicks(t.Created)})
	}
	if r.Error != nil {
		je := &jsonError{Code: string(r.Error.Code), Message: r.Error.Message}
		if r.Error.Index >= 0 {
			i := r.Error.Index
			je.Index = &i
		}
		jr.Error = je
	}
	b, err := json.Marshal(jr)
	if err != nil {
		// Only an entity JSON this package wrote could fail; report it.
		return []byte(`{"error":{"code":"InternalError","message":` + strconv.Quote(err.Error()) + `}}`)
	}
	return b
}

// DecodeReplyJSON decodes a JSON reply.
func DecodeReplyJSON(data []byte) (*engine.Reply, error) {
	var jr jsonReply
	if err := json.Unmarshal(data, &jr); err != nil {
		return nil, invalid("reply: %v", err)
	}
	r := &engine.Reply{ETag: jr.ETag, Seq: jr.Seq, Duplicate: jr.Duplicate}
	var err error
	parse := func(s string) int64 {
		if s == "" || err != nil {
			return 0
		}
		var t int64
		t, err = ParseTime(s)
		return t
	}
	r.Timestamp = parse(jr.Timestamp)
	for _, res := range jr.Results {
		r.Results = append(r.Results, engine.Result{ETag: res.ETag, Timestamp: parse(res.Timestamp)})
	}
	for _, t := range jr.Tables {
		r.Tables = append(r.Tables, engine.TableInfo{Name: t.Name, Epoch: t.Epoch, Created: parse(t.Created)})
	}
	if len(jr.Entity) > 0 {
		e, perr := ParseEntityJSON(jr.Entity)
		if perr != nil {
			return nil, at("reply: entity", perr)
		}
		var meta struct {
			ETag      string `json:"odata.etag"`
			Timestamp string `json:"Timestamp"`
		}
		_ = json.Unmarshal(jr.Entity, &meta)
		if r.ETag == "" {
			r.ETag = meta.ETag
		}
		e.Timestamp = parse(meta.Timestamp)
		r.Entity = e
	}
	if err != nil {
		return nil, invalid("reply: %v", err)
	}
	if jr.Error != nil {
		e := &engine.Error{Code: engine.Code(jr.Error.Code), Message: jr.Error.Message, Index: engine.NoIndex}
		if jr.Error.Index != nil {
			e.Index = *jr.Error.Index
		}
		r.Error = e
	}
	return r, nil
}
