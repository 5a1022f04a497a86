package journal

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// EncodeRecord encodes a commit record in the current format. It refuses
// (with an error, before anything is appended) a record that DecodeRecord
// would refuse: an unknown event kind, a command referring past the
// events, an Extra key that is a field of the format or an Extra value that
// is not exactly one msgpack value, a property of an invalid type, a
// message without exactly one destination (queue or subject). A
// journal must never hold a record its readers stop at.
func EncodeRecord(r *engine.Record) ([]byte, error) {
	if err := checkRecord(r); err != nil {
		return nil, fmt.Errorf("journal: encode record: %w", err)
	}
	s := getEncoder(estimateSize(r))
	enc := s.enc
	n := 7 + len(r.Extra)
	if len(r.Messages) > 0 {
		n++
	}
	if r.HasPrev {
		n++
	}
	// A record is version 1 unless it needs version 2: a version 1 host
	// then reads it as before.
	version := uint64(version1)
	if hasSubjects(r.Messages) {
		version = versionSubjects
	}
	// The version comes first and the nonce early: PeekNonce relies on it.
	err := first(
		enc.EncodeMapLen(n),
		enc.EncodeString("v"), enc.EncodeUint(version),
		enc.EncodeString("t"), enc.EncodeString(typeCommit),
		enc.EncodeString("ts"), enc.EncodeInt(r.Time),
		enc.EncodeString("pk"), enc.EncodeString(r.PartitionKey),
		enc.EncodeString("n"), enc.EncodeString(r.Nonce),
		enc.EncodeString("cmds"), enc.EncodeArrayLen(len(r.Commands)),
	)
	for _, c := range r.Commands {
		err = first(err, enc.EncodeArrayLen(3), enc.EncodeString(c.ID), enc.EncodeUint(uint64(c.First)), enc.EncodeUint(uint64(c.Count)))
	}
	err = first(err, enc.EncodeString("ev"), enc.EncodeArrayLen(len(r.Events)))
	for i := range r.Events {
		ev := &r.Events[i]
		err = first(err, enc.EncodeArrayLen(3), enc.EncodeUint(uint64(ev.Kind)), enc.EncodeString(ev.RowKey))
		if err != nil {
			break
		}
		if ev.Kind == engine.EventDelete {
			err = enc.EncodeArrayLen(0)
		} else if err = engine.EncodeProperties(enc, ev.Properties); err != nil {
			err = fmt.Errorf("event %d (row %q): %w", i, ev.RowKey, err)
		}
	}
	if len(r.Messages) > 0 {
		err = first(err, enc.EncodeString("out"), enc.EncodeArrayLen(len(r.Messages)))
		for _, m := range r.Messages {
			if m.Subject == "" {
				err = first(err, enc.EncodeArrayLen(3), enc.EncodeString(m.Queue), enc.EncodeString(m.ID), enc.EncodeBytes(m.Body))
			} else {
				err = first(err, enc.EncodeArrayLen(4), enc.EncodeString(""), enc.EncodeString(m.ID), enc.EncodeBytes(m.Body), enc.EncodeString(m.Subject))
			}
		}
	}
	if r.HasPrev {
		err = first(err, enc.EncodeString("prev"), enc.EncodeArrayLen(len(r.Events)))
		for i := range r.Events {
			if p := r.Events[i].Prev; p == nil {
				err = first(err, enc.EncodeNil())
			} else {
				err = first(err, enc.EncodeArrayLen(2), enc.EncodeUint(p.Seq), enc.EncodeUint(uint64(p.Index)))
			}
		}
	}
	err = first(err, s.writeExtra(r.Extra))
	data := s.finish()
	if err != nil {
		return nil, fmt.Errorf("journal: encode record: %w", err)
	}
	return data, nil
}

// EncodeCatalogRecord encodes a catalog record in the current format. An
// unknown kind or a bad Extra (see EncodeRecord) is an error.
func EncodeCatalogRecord(r *engine.CatalogRecord) ([]byte, error) {
	t := typeTableCreated
	switch r.Kind {
	case engine.CatalogTableCreated:
	case engine.CatalogTableDeleted:
		t = typeTableDeleted
	default:
		return nil, fmt.Errorf("journal: encode catalog record: unknown kind %d", r.Kind)
	}
	if err := checkExtra(r.Extra, catalogFields); err != nil {
		return nil, fmt.Errorf("journal: encode catalog record: %w", err)
	}
	if r.Shards != 0 && (r.Kind != engine.CatalogTableCreated || r.Shards > engine.MaxShards) {
		return nil, fmt.Errorf("journal: encode catalog record: %d shards in a record of kind %d", r.Shards, r.Kind)
	}
	if r.MarksMessages && r.Kind != engine.CatalogTableCreated {
		return nil, fmt.Errorf("journal: encode catalog record: marks in a record of kind %d", r.Kind)
	}
	account, name := engine.SplitTableName(r.Name)
	// The oldest version that holds the record: a host of that version
	// reads it as before.
	version, fields := uint64(version1), 4+len(r.Extra)
	if account != engine.DevAccount {
		version, fields = versionAccounts, fields+1
	}
	if r.Shards != 0 {
		version, fields = versionShards, fields+1
	}
	if r.MarksMessages {
		version, fields = versionMarks, fields+1
	}
	s := getEncoder(64 + len(r.Name) + extraSize(r.Extra))
	enc := s.enc
	err := first(enc.EncodeMapLen(fields), enc.EncodeString("v"), enc.EncodeUint(version))
	if account != engine.DevAccount {
		err = first(err, enc.EncodeString("acct"), enc.EncodeString(account))
	}
	err = first(err,
		enc.EncodeString("t"), enc.EncodeString(t),
		enc.EncodeString("name"), enc.EncodeString(name),
		enc.EncodeString("ts"), enc.EncodeInt(r.Time),
	)
	if r.Shards != 0 {
		err = first(err, enc.EncodeString("shards"), enc.EncodeUint(uint64(r.Shards)))
	}
	if r.MarksMessages {
		err = first(err, enc.EncodeString("marks"), enc.EncodeBool(true))
	}
	err = first(err, s.writeExtra(r.Extra))
	data := s.finish()
	if err != nil {
		return nil, fmt.Errorf("journal: encode catalog record: %w", err)
	}
	return data, nil
}

// checkRecord refuses what the decoder would refuse.
func checkRecord(r *engine.Record) error {
	for i := range r.Events {
		if k := r.Events[i].Kind; k != engine.EventPut && k != engine.EventDelete {
			return fmt.Errorf("event %d: unknown kind %d", i, k)
		}
	}
	for i, c := range r.Commands {
		if uint64(c.First)+uint64(c.Count) > uint64(len(r.Events)) {
			return fmt.Errorf("command %d refers to events %d..%d of %d", i, c.First, uint64(c.First)+uint64(c.Count), len(r.Events))
		}
	}
	for i := range r.Messages {
		if err := checkDestination(&r.Messages[i]); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	if err := r.CheckPrev(); err != nil {
		return fmt.Errorf("field \"prev\": %w", err)
	}
	return checkExtra(r.Extra, commitFields)
}

// checkDestination refuses a message without exactly one destination.
func checkDestination(m *engine.Message) error {
	switch {
	case m.Queue != "" && m.Subject != "":
		return errors.New("both a queue and a subject")
	case m.Queue == "" && m.Subject == "":
		return errors.New("neither a queue nor a subject")
	}
	return nil
}

// hasSubjects reports whether any message goes to a NATS subject, which
// makes its record a version 2 record.
func hasSubjects(msgs []engine.Message) bool {
	for i := range msgs {
		if msgs[i].Subject != "" {
			return true
		}
	}
	return false
}

// checkExtra refuses Extra keys that are fields of the format and values
// that are not exactly one msgpack value.
func checkExtra(extra map[string]msgpack.RawMessage, known map[string]bool) error {
	for k, v := range extra {
		if known[k] {
			return fmt.Errorf("extra field %q is a field of the format", k)
		}
		if err := checkRaw(v); err != nil {
			return fmt.Errorf("extra field %q: %w", k, err)
		}
	}
	return nil
}

func checkRaw(v []byte) error {
	if len(v) == 0 {
		return errors.New("empty value")
	}
	r := bytes.NewReader(v)
	if err := msgpack.NewDecoder(r).Skip(); err != nil {
		return err
	}
	if r.Len() != 0 {
		return fmt.Errorf("%d bytes after the value", r.Len())
	}
	return nil
}

// estimateSize guesses a record's encoded size from above, so that the
// buffer is allocated once (the record of a batch can be megabytes).
func estimateSize(r *engine.Record) int {
	n := 64 + len(r.PartitionKey) + len(r.Nonce) + extraSize(r.Extra)
	for _, c := range r.Commands {
		n += 16 + len(c.ID)
	}
	for i := range r.Events {
		ev := &r.Events[i]
		n += 32 + len(ev.RowKey)
		for _, p := range ev.Properties {
			n += 16 + len(p.Name) + p.Value.Len()
		}
	}
	for _, m := range r.Messages {
		n += 16 + len(m.Queue) + len(m.Subject) + len(m.ID) + len(m.Body)
	}
	return n
}

func extraSize(extra map[string]msgpack.RawMessage) int {
	n := 0
	for k, v := range extra {
		n += 8 + len(k) + len(v)
	}
	return n
}

// encoderState is a pooled msgpack encoder with the buffer it writes to.
// Each encode starts a new buffer, which it hands to its caller.
type encoderState struct {
	w   sliceWriter
	enc *msgpack.Encoder
}

var encoders = sync.Pool{New: func() any {
	s := &encoderState{}
	s.enc = msgpack.NewEncoder(&s.w)
	return s
}}

func getEncoder(size int) *encoderState {
	s := encoders.Get().(*encoderState)
	s.w.b = make([]byte, 0, size)
	return s
}

// finish returns the encoded bytes and the encoder to its pool.
func (s *encoderState) finish() []byte {
	b := s.w.b
	s.w.b = nil
	encoders.Put(s)
	return b
}

// writeExtra writes the unknown fields, sorted by key so that an encoding
// is deterministic. The values were checked by checkExtra.
func (s *encoderState) writeExtra(extra map[string]msgpack.RawMessage) error {
	if len(extra) == 0 {
		return nil
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := s.enc.EncodeString(k); err != nil {
			return err
		}
		s.w.b = append(s.w.b, extra[k]...)
	}
	return nil
}

// sliceWriter is the encoder's writer: an append to a byte slice, which
// cannot fail.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *sliceWriter) WriteString(s string) (int, error) {
	w.b = append(w.b, s...)
	return len(s), nil
}

func (w *sliceWriter) WriteByte(c byte) error {
	w.b = append(w.b, c)
	return nil
}

func first(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
