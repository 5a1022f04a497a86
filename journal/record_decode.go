package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"

	"github.com/cairn-dev/cairn/engine"
)

// Field bits of a record, to report missing and repeated fields without a
// map.
const (
	fVersion = 1 << iota
	fType
	fTime
	fPartition
	fNonce
	fCommands
	fEvents
	fOut
	fName
	fAccount
	fPrev
	fShards
	fMarks
)

// Smallest encodings of the array elements, which bound an array's length
// by the bytes left: a corrupt length prefix cannot allocate more than the
// record's own size warrants.
const (
	minCommandBytes = 4 // [id, first, count]
	minEventBytes   = 4 // [kind, rowKey, props]
	minMessageBytes = 4 // [queue, id, body] (a subject's has one more)
	minPrevBytes    = 1 // nil, or [seq, index]
	maxFields       = 1 << 10
)

// DecodeRecord decodes a commit record of any known version. It fails,
// saying why, on a record of a newer version than FormatVersion, on a
// missing or repeated field, on a field of the wrong shape, and on trailing
// bytes; it never panics, whatever data holds.
func DecodeRecord(data []byte) (*engine.Record, error) {
	d := getDecoder(data)
	r, err := d.record()
	if err != nil {
		return nil, fmt.Errorf("journal: decode record: %w", err)
	}
	putDecoder(d)
	return r, nil
}

// DecodeCatalogRecord decodes a catalog record of any known version; it
// fails as DecodeRecord does.
func DecodeCatalogRecord(data []byte) (*engine.CatalogRecord, error) {
	d := getDecoder(data)
	r, err := d.catalog()
	if err != nil {
		return nil, fmt.Errorf("journal: decode catalog record: %w", err)
	}
	putDecoder(d)
	return r, nil
}

// PeekNonce reads a commit record's nonce without decoding the rest (the
// writer puts it among the first fields). ok is false when there is none
// or the data is not a commit record of a known version.
func PeekNonce(data []byte) (nonce string, ok bool) {
	d := getDecoder(data)
	nonce, ok = d.peekNonce()
	if ok {
		putDecoder(d)
	}
	return nonce, ok
}

// decoder is a pooled msgpack decoder reading from a bytes.Reader, which
// makes the bytes left known and spares the decoder its own buffering.
// data is what r reads: an event's text is cut from it (eventText).
type decoder struct {
	r    bytes.Reader
	data []byte
	dec  *msgpack.Decoder
	key  [32]byte
}

var decoders = sync.Pool{New: func() any {
	d := &decoder{}
	d.dec = msgpack.NewDecoder(&d.r)
	return d
}}

func getDecoder(data []byte) *decoder {
	d := decoders.Get().(*decoder)
	d.r.Reset(data)
	d.data = data
	return d
}

// putDecoder returns a decoder to the pool. Only decoders that finished
// cleanly go back: one that failed may be in the middle of a raw value.
func putDecoder(d *decoder) {
	d.r.Reset(nil)
	d.data = nil
	decoders.Put(d)
}

// readKey reads a field name or a type. The bytes are valid until the next
// readKey.
func (d *decoder) readKey() ([]byte, error) {
	n, err := d.dec.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, errors.New("nil where a name was expected")
	}
	if n > d.r.Len() {
		return nil, io.ErrUnexpectedEOF
	}
	b := d.key[:0]
	if n > len(d.key) {
		b = make([]byte, n)
	}
	b = b[:n]
	if err := d.dec.ReadFull(b); err != nil {
		return nil, err
	}
	return b, nil
}

// header reads the map length of a record.
func (d *decoder) header() (int, error) {
	n, err := d.dec.DecodeMapLen()
	if err != nil {
		return 0, err
	}
	if n < 0 || n > maxFields {
		return 0, fmt.Errorf("record map of %d fields", n)
	}
	return n, nil
}

// version reads and checks the "v" field's value.
func (d *decoder) version() (uint64, error) {
	v, err := d.dec.DecodeUint64()
	if err != nil {
		return 0, fmt.Errorf("version: %w", err)
	}
	if v == 0 {
		return 0, errors.New("record version 0 does not exist")
	}
	if v > FormatVersion {
		return 0, fmt.Errorf("record version %d is newer than this host understands (max %d)", v, FormatVersion)
	}
	return v, nil
}

// extra keeps an unknown field's value raw.
func (d *decoder) extra(extra *map[string]msgpack.RawMessage, key []byte) error {
	k := string(key)
	if _, dup := (*extra)[k]; dup {
		return fmt.Errorf("field %q twice", k)
	}
	raw, err := d.dec.DecodeRaw()
	if err != nil {
		return fmt.Errorf("field %q: %w", k, err)
	}
	if *extra == nil {
		*extra = map[string]msgpack.RawMessage{}
	}
	(*extra)[k] = raw
	return nil
}

func (d *decoder) end() error {
	if d.r.Len() != 0 {
		return fmt.Errorf("%d bytes after the record", d.r.Len())
	}
	return nil
}

func (d *decoder) record() (*engine.Record, error) {
	n, err := d.header()
	if err != nil {
		return nil, err
	}
	r := &engine.Record{}
	var seen uint
	var version uint64
	var prev []prevEntry // "prev", applied once the events are known
	for i := 0; i < n; i++ {
		key, err := d.readKey()
		if err != nil {
			return nil, fmt.Errorf("field name: %w", err)
		}
		var bit uint
		switch string(key) {
		case "v":
			bit = fVersion
			version, err = d.version()
		case "t":
			bit = fType
			var t []byte
			if t, err = d.readKey(); err == nil && string(t) != typeCommit {
				err = fmt.Errorf("record type %q, want %q", t, typeCommit)
			}
		case "ts":
			bit = fTime
			r.Time, err = d.dec.DecodeInt64()
		case "pk":
			bit = fPartition
			r.PartitionKey, err = d.dec.DecodeString()
		case "n":
			bit = fNonce
			r.Nonce, err = d.dec.DecodeString()
		case "cmds":
			bit = fCommands
			r.Commands, err = d.commands()
		case "ev":
			bit = fEvents
			r.Events, err = d.events()
		case "out":
			bit = fOut
			r.Messages, err = d.messages()
		case "prev":
			bit = fPrev
			prev, err = d.prev()
		default:
			if err := d.extra(&r.Extra, key); err != nil {
				return nil, err
			}
			continue
		}
		if seen&bit != 0 {
			return nil, fmt.Errorf("field %q twice", key)
		}
		seen |= bit
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", key, err)
		}
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	const required = fVersion | fType | fTime | fPartition | fCommands | fEvents
	if seen&required != required {
		return nil, fmt.Errorf("field %s missing", missing(seen&required^required))
	}
	if seen&fPrev != 0 {
		if err := setPrev(r, prev); err != nil {
			return nil, fmt.Errorf("field \"prev\": %w", err)
		}
	}
	for i, c := range r.Commands {
		if uint64(c.First)+uint64(c.Count) > uint64(len(r.Events)) {
			return nil, fmt.Errorf("command %d refers to events %d..%d of %d", i, c.First, uint64(c.First)+uint64(c.Count), len(r.Events))
		}
	}
	// No version 1 writer ever wrote a message to a subject: such a record
	// is refused rather than read.
	if version < versionSubjects && hasSubjects(r.Messages) {
		return nil, fmt.Errorf("field \"out\": a message to a subject in a version %d record (subjects came with version %d)", version, versionSubjects)
	}
	return r, nil
}

func (d *decoder) catalog() (*engine.CatalogRecord, error) {
	n, err := d.header()
	if err != nil {
		return nil, err
	}
	r := &engine.CatalogRecord{}
	var seen uint
	var version uint64
	var account msgpack.RawMessage // "acct", a field from version 2 on
	for i := 0; i < n; i++ {
		key, err := d.readKey()
		if err != nil {
			return nil, fmt.Errorf("field name: %w", err)
		}
		var bit uint
		switch string(key) {
		case "v":
			bit = fVersion
			version, err = d.version()
		case "t":
			bit = fType
			var t []byte
			if t, err = d.readKey(); err == nil {
				switch string(t) {
				case typeTableCreated:
					r.Kind = engine.CatalogTableCreated
				case typeTableDeleted:
					r.Kind = engine.CatalogTableDeleted
				default:
					err = fmt.Errorf("record type %q is not a catalog record", t)
				}
			}
		case "name":
			bit = fName
			r.Name, err = d.dec.DecodeString()
		case "ts":
			bit = fTime
			r.Time, err = d.dec.DecodeInt64()
		case "acct":
			bit = fAccount
			account, err = d.dec.DecodeRaw()
		case "shards":
			bit = fShards
			var n uint64
			if n, err = d.dec.DecodeUint64(); err == nil {
				if n == 0 || n > engine.MaxShards {
					err = fmt.Errorf("%d shards (1 to %d)", n, engine.MaxShards)
				}
				r.Shards = uint32(n)
			}
		case "marks":
			bit = fMarks
			if r.MarksMessages, err = d.dec.DecodeBool(); err == nil && !r.MarksMessages {
				err = errors.New("false (a writer leaves the field out instead)")
			}
		default:
			if err := d.extra(&r.Extra, key); err != nil {
				return nil, err
			}
			continue
		}
		if seen&bit != 0 {
			return nil, fmt.Errorf("field %q twice", key)
		}
		seen |= bit
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", key, err)
		}
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	const required = fVersion | fType | fName | fTime
	if seen&required != required {
		return nil, fmt.Errorf("field %s missing", missing(seen&required^required))
	}
	if account != nil {
		if err := catalogAccount(r, version, account); err != nil {
			return nil, err
		}
	}
	// No writer before version 3 wrote shards, and none writes them on a
	// deletion: such a record is refused rather than read.
	if seen&fShards != 0 && version < versionShards {
		return nil, fmt.Errorf("field \"shards\" in a version %d record (shards came with version %d)", version, versionShards)
	}
	if seen&fShards != 0 && r.Kind != engine.CatalogTableCreated {
		return nil, errors.New("field \"shards\" in a record that creates no table")
	}
	// Likewise marks, which came with version 4.
	if seen&fMarks != 0 && version < versionMarks {
		return nil, fmt.Errorf("field \"marks\" in a version %d record (marks came with version %d)", version, versionMarks)
	}
	if seen&fMarks != 0 && r.Kind != engine.CatalogTableCreated {
		return nil, errors.New("field \"marks\" in a record that creates no table")
	}
	return r, nil
}

// catalogAccount applies a catalog record's "acct" field, the account whose
// table r.Name is (r.Name becomes the full name). No version 1 writer ever
// wrote the key: a version 1 record with it is refused rather than read
// as the development account's.
func catalogAccount(r *engine.CatalogRecord, version uint64, raw msgpack.RawMessage) error {
	if version < versionAccounts {
		return fmt.Errorf("field \"acct\" in a version %d record (accounts came with version %d)", version, versionAccounts)
	}
	var account string
	if err := msgpack.Unmarshal(raw, &account); err != nil {
		return fmt.Errorf("field \"acct\": %w", err)
	}
	if account == "" || account == engine.DevAccount || strings.Contains(account, ".") || strings.Contains(r.Name, ".") {
		return fmt.Errorf("field \"acct\": account %q and table %q do not make a full table name", account, r.Name)
	}
	r.Name = engine.FullTableName(account, r.Name)
	return nil
}

// missing names the first field of a set of field bits.
func missing(bits uint) string {
	names := []string{"v", "t", "ts", "pk", "n", "cmds", "ev", "out", "name", "acct", "prev", "shards", "marks"}
	for i, name := range names {
		if bits&(1<<i) != 0 {
			return fmt.Sprintf("%q", name)
		}
	}
	return "?"
}

func (d *decoder) peekNonce() (string, bool) {
	n, err := d.header()
	if err != nil {
		return "", false
	}
	known := false // the version comes first in every record this code writes
	for i := 0; i < n; i++ {
		key, err := d.readKey()
		if err != nil {
			return "", false
		}
		switch string(key) {
		case "v":
			if _, err := d.version(); err != nil {
				return "", false
			}
			known = true
		case "n":
			if !known {
				return "", false
			}
			s, err := d.dec.DecodeString()
			return s, err == nil && s != ""
		default:
			if d.dec.Skip() != nil {
				return "", false
			}
		}
	}
	return "", false
}

// arrayLen reads an array length and bounds it by the bytes left.
func (d *decoder) arrayLen(minElem int) (int, error) {
	n, err := d.dec.DecodeArrayLen()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, nil
	}
	if n > d.r.Len()/minElem {
		return 0, fmt.Errorf("array of %d elements in %d bytes", n, d.r.Len())
	}
	return n, nil
}

func (d *decoder) tuple(want int) error {
	n, err := d.dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != want {
		return fmt.Errorf("tuple of %d elements, want %d", n, want)
	}
	return nil
}

func (d *decoder) commands() ([]engine.CommandRef, error) {
	n, err := d.arrayLen(minCommandBytes)
	if err != nil {
		return nil, err
	}
	out := make([]engine.CommandRef, n)
	for i := range out {
		c := &out[i]
		err := d.tuple(3)
		if err == nil {
			c.ID, err = d.dec.DecodeString()
		}
		if err == nil {
			c.First, err = d.dec.DecodeUint32()
		}
		if err == nil {
			c.Count, err = d.dec.DecodeUint32()
		}
		if err != nil {
			return nil, fmt.Errorf("command %d: %w", i, err)
		}
	}
	return out, nil
}

func (d *decoder) events() ([]engine.Event, error) {
	n, err := d.arrayLen(minEventBytes)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Event, n)
	for i := range out {
		ev := &out[i]
		if err := d.tuple(3); err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		k, err := d.dec.DecodeUint8()
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		ev.Kind = engine.EventKind(k)
		if ev.Kind != engine.EventPut && ev.Kind != engine.EventDelete {
			return nil, fmt.Errorf("event %d: unknown kind %d", i, k)
		}
		if ev.RowKey, ev.Properties, err = d.eventText(); err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		if ev.Kind == engine.EventDelete {
			ev.Properties = nil
		}
	}
	return out, nil
}

// eventText reads an event's row key and properties. Their strings are
// cut from one string of the event's bytes (engine.DecodePropertiesString):
// one allocation for the event instead of one per name and value. They
// live and die together: the event is a whole entity (a merge is decided
// before it is recorded), which a view copies into its packed form.
func (d *decoder) eventText() (string, []engine.Property, error) {
	n, err := d.dec.DecodeBytesLen() // as DecodeString reads it: nil is ""
	if err != nil {
		return "", nil, fmt.Errorf("row key: %w", err)
	}
	n = max(n, 0)
	rest := d.data[len(d.data)-d.r.Len():]
	if n > len(rest) {
		return "", nil, fmt.Errorf("row key: %w", io.ErrUnexpectedEOF)
	}
	size, err := engine.PropertiesLen(rest[n:])
	if err != nil {
		return "", nil, fmt.Errorf("row %q: %w", rest[:n], err)
	}
	s := string(rest[:n+size])
	props, _, err := engine.DecodePropertiesString(s[n:])
	if err != nil { // PropertiesLen read the same bytes: cannot happen
		return "", nil, fmt.Errorf("row %q: %w", s[:n], err)
	}
	if _, err := d.r.Seek(int64(n+size), io.SeekCurrent); err != nil {
		return "", nil, err
	}
	return s[:n], props, nil
}

func (d *decoder) messages() ([]engine.Message, error) {
	n, err := d.arrayLen(minMessageBytes)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Message, n)
	for i := range out {
		m := &out[i]
		// [queue, id, body], or from version 2 on ["", id, body, subject]
		// (the record's version is checked once it is known).
		size, err := d.dec.DecodeArrayLen()
		if err == nil && size != 3 && size != 4 {
			err = fmt.Errorf("tuple of %d elements, want 3 (a queue's) or 4 (a subject's)", size)
		}
		if err == nil {
			m.Queue, err = d.dec.DecodeString()
		}
		if err == nil {
			m.ID, err = d.dec.DecodeString()
		}
		if err == nil {
			m.Body, err = d.dec.DecodeBytes()
		}
		if err == nil && size == 4 {
			if m.Subject, err = d.dec.DecodeString(); err == nil && m.Subject == "" {
				err = errors.New("the subject of a four-element entry is empty")
			}
		}
		if err == nil {
			err = checkDestination(m)
		}
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
	}
	return out, nil
}

// prevEntry is one entry of "prev": the previous version of one event.
type prevEntry struct {
	exists bool
	v      engine.Version
}

// prev reads "prev": nil or [seq, index] per event.
func (d *decoder) prev() ([]prevEntry, error) {
	n, err := d.arrayLen(minPrevBytes)
	if err != nil {
		return nil, err
	}
	out := make([]prevEntry, n)
	for i := range out {
		p := &out[i]
		c, err := d.dec.PeekCode()
		if err == nil && c == msgpcode.Nil {
			if err = d.dec.DecodeNil(); err == nil {
				continue // the entity did not exist
			}
		}
		if err == nil {
			err = d.tuple(2)
		}
		if err == nil {
			p.v.Seq, err = d.dec.DecodeUint64()
		}
		if err == nil {
			p.v.Index, err = d.dec.DecodeUint32()
		}
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		p.exists = true
	}
	return out, nil
}

// setPrev gives each event of r its entry of "prev": one entry per event,
// references into the record checked by engine.Record.CheckPrev.
func setPrev(r *engine.Record, prev []prevEntry) error {
	if len(prev) != len(r.Events) {
		return fmt.Errorf("%d entries for %d events", len(prev), len(r.Events))
	}
	vs := make([]engine.Version, len(prev))
	for i, p := range prev {
		if p.exists {
			vs[i] = p.v
			r.Events[i].Prev = &vs[i]
		}
	}
	r.HasPrev = true
	return r.CheckPrev()
}
