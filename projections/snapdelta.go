package projections

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/tidwall/btree"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// DeltaFormat is the newest delta file format this code writes and reads.
// A delta is a file kind of its own beside the full snapshot (the base,
// SnapshotFormat, unchanged): it holds what changed in a view between two
// journal positions, so that writing a snapshot of a big table costs what
// changed since the last one, not the table. A base and the deltas that
// follow it are a chain (snapchain.go). Like every format of Cairn's,
// each version stays readable (golden file in testdata/), and a file of a
// newer version is ignored, never trusted.
//
// Format version 1. A file is
//
//	magic     8 bytes  "CAIRNDLT"
//	version   msgpack uint (1)
//	header    msgpack map with string keys:
//	            "name"  string  the table's full name as its creator spelled it
//	            "epoch" uint    the table's incarnation (its catalog sequence)
//	            "seq"   uint    the journal position the view is at after it
//	            "prev"  uint    the position of the snapshot (base or delta)
//	                            it follows: it applies to the view at prev,
//	                            however that view was made
//	            "ents"  uint    entities written (upserts) that follow
//	            "dels"  uint    entities deleted that follow
//	            "parts" uint    partitions that follow
//	            "keep"  uint    command ids of the view at prev that the
//	                            view at seq still remembers: the last keep
//	                            of that view's list (the view forgets ids
//	                            from the front of its list, in order)
//	            "ids"   uint    command ids added after them that follow
//	            "total" uint    entities the view holds at seq (a check)
//	            "at"    int     when it was written, Unix nanoseconds
//	          (keys this code does not know are skipped)
//	upserts   each as an entity of a base: [pk string, rk string,
//	          timestamp int, version seq uint, version index uint,
//	          properties], in key order; each version's seq after prev
//	deletes   each an array [pk string, rk string], in key order
//	parts     each as a partition of a base, whole: [key string, lastSeq
//	          uint, records uint, writes uint, entities int], in key order
//	ids       each as a command id of a base: [pk string, id string, seq
//	          uint, first uint, count uint, time int], in the order they
//	          were applied; each seq after prev
//	checksum  4 bytes, big-endian CRC-32C (Castagnoli) of every byte before
//
// Format version 2 is version 1 with the upserts in blocks, as a base's
// entities are in SnapshotFormat 2 (a count, then the entities' bytes),
// so that a start decodes them on every core.
//
// A reader checks the magic, the version and the header, then the
// checksum, and only then decodes the rest, as for a base.
const DeltaFormat = 2

const deltaMagic = "CAIRNDLT"

// deltaHeaderFields is how many fields a delta's header has in DeltaFormat 1.
const deltaHeaderFields = 11

// deltaHeader is what a delta file says of itself.
type deltaHeader struct {
	Version uint64
	Name    string
	Epoch   uint64
	Seq     uint64
	Prev    uint64
	Upserts uint64
	Deletes uint64
	Parts   uint64
	Keep    uint64
	IDs     uint64
	Total   uint64
	At      int64
}

// Entries is the entities the delta writes or deletes: what loading it
// costs, and what the compaction policy counts.
func (h deltaHeader) Entries() uint64 { return h.Upserts + h.Deletes }

// entityKey is an entity's key: what the applier notes as touched.
type entityKey struct{ pk, rk string }

// deltaContent is what a delta file holds, decoded.
type deltaContent struct {
	upserts []engine.Packed
	deletes []entityKey
	parts   []*Partition
	adds    []*CommandRecord
}

// touchedSet is what the applier notes between two snapshots: the
// entities (by key) and the partitions its records wrote. The snapshot at
// the end tells each one's state: an entity present is written, an entity
// absent deleted.
type touchedSet struct {
	keys  keySet
	parts map[string]struct{}
}

func newTouchedSet() *touchedSet {
	return &touchedSet{parts: map[string]struct{}{}}
}

// note adds what rec writes. It returns false when the set cannot hold
// its keys (keySet.add): the set is then incomplete, and the next
// snapshot must be a base.
func (ts *touchedSet) note(rec *engine.Record) bool {
	if _, ok := ts.parts[rec.PartitionKey]; !ok {
		// A copy: the record's key may be a substring of the text of
		// the request it was decided from, which the set would keep
		// alive until the next snapshot.
		ts.parts[strings.Clone(rec.PartitionKey)] = struct{}{}
	}
	for i := range rec.Events {
		if !ts.keys.add(rec.PartitionKey, rec.Events[i].RowKey) {
			return false
		}
	}
	return true
}

// makeDelta reads, from s, the state of every entity and partition ts
// names, and the command ids added after position prev: the delta from
// the view at prev to s.
func makeDelta(s *Snapshot, prev uint64, ts *touchedSet) *deltaContent {
	d := &deltaContent{}
	keys := slices.SortedFunc(ts.keys.all(), engine.ComparePacked)
	for _, k := range keys {
		if e, ok := s.rows.Get(k); ok {
			d.upserts = append(d.upserts, e)
		} else {
			pk, rk := k.Keys()
			d.deletes = append(d.deletes, entityKey{pk, rk})
		}
	}
	parts := make([]string, 0, len(ts.parts))
	for p := range ts.parts {
		parts = append(parts, p)
	}
	sort.Strings(parts)
	for _, pk := range parts {
		if p, ok := s.parts.Get(&Partition{Key: pk}); ok {
			d.parts = append(d.parts, p)
		}
	}
	// The list is in the order ids were applied, so in journal order:
	// those after prev are its end.
	i := sort.Search(len(s.expiry), func(i int) bool { return s.expiry[i].Seq > prev })
	d.adds = s.expiry[i:]
	return d
}

// keepOf is how many command ids of s's list were applied at or before
// prev: those the view at prev remembered and s still does.
func keepOf(s *Snapshot, prev uint64) uint64 {
	return uint64(sort.Search(len(s.expiry), func(i int) bool { return s.expiry[i].Seq > prev }))
}

// encodeDelta writes the delta d from the view at prev to s in the
// current format.
func encodeDelta(w io.Writer, s *Snapshot, prev uint64, d *deltaContent, at int64) error {
	sw := newSummedWriter(w)
	if _, err := sw.WriteString(deltaMagic); err != nil {
		return err
	}
	enc := msgpack.NewEncoder(sw)
	err := firstErr(
		enc.EncodeUint(DeltaFormat),
		enc.EncodeMapLen(deltaHeaderFields),
		enc.EncodeString("name"), enc.EncodeString(s.Table),
		enc.EncodeString("epoch"), enc.EncodeUint(s.Epoch),
		enc.EncodeString("seq"), enc.EncodeUint(s.Seq),
		enc.EncodeString("prev"), enc.EncodeUint(prev),
		enc.EncodeString("ents"), enc.EncodeUint(uint64(len(d.upserts))),
		enc.EncodeString("dels"), enc.EncodeUint(uint64(len(d.deletes))),
		enc.EncodeString("parts"), enc.EncodeUint(uint64(len(d.parts))),
		enc.EncodeString("keep"), enc.EncodeUint(keepOf(s, prev)),
		enc.EncodeString("ids"), enc.EncodeUint(uint64(len(d.adds))),
		enc.EncodeString("total"), enc.EncodeUint(uint64(s.rows.Len())),
		enc.EncodeString("at"), enc.EncodeInt(at),
	)
	if err != nil {
		return err
	}
	if err := encodeEntityBlocks(sw, enc, slices.Values(d.upserts), nil); err != nil {
		return err
	}
	for _, k := range d.deletes {
		if err := firstErr(enc.EncodeArrayLen(2), enc.EncodeString(k.pk), enc.EncodeString(k.rk)); err != nil {
			return err
		}
	}
	for _, p := range d.parts {
		if err := encodePartition(enc, p); err != nil {
			return err
		}
	}
	for _, c := range d.adds {
		if err := encodeCommand(enc, c); err != nil {
			return err
		}
	}
	return sw.finish()
}

// readDeltaHeader reads the magic, the version and the header of a delta
// from r and returns the decoder of the rest.
func readDeltaHeader(r *bufio.Reader) (deltaHeader, *msgpack.Decoder, error) {
	h, dec := deltaHeader{}, msgpack.NewDecoder(r)
	err := h.read(dec, r)
	return h, dec, err
}

func (h *deltaHeader) read(dec *msgpack.Decoder, r io.Reader) error {
	v, n, err := readPreamble(dec, r, deltaMagic, "delta", DeltaFormat)
	h.Version = v
	if err != nil {
		return err
	}
	seen := 0
	for i := 0; i < n; i++ {
		k, err := dec.DecodeString()
		if err != nil {
			return fmt.Errorf("header: %w", err)
		}
		var field *uint64
		switch k {
		case "name":
			h.Name, err = dec.DecodeString()
		case "at":
			h.At, err = dec.DecodeInt64()
		case "epoch":
			field = &h.Epoch
		case "seq":
			field = &h.Seq
		case "prev":
			field = &h.Prev
		case "ents":
			field = &h.Upserts
		case "dels":
			field = &h.Deletes
		case "parts":
			field = &h.Parts
		case "keep":
			field = &h.Keep
		case "ids":
			field = &h.IDs
		case "total":
			field = &h.Total
		default:
			err = dec.Skip()
			seen--
		}
		if field != nil {
			*field, err = dec.DecodeUint64()
		}
		if err != nil {
			return fmt.Errorf("header field %q: %w", k, err)
		}
		seen++
	}
	if seen != deltaHeaderFields {
		return fmt.Errorf("header has %d of its %d fields", seen, deltaHeaderFields)
	}
	if h.Prev >= h.Seq {
		return fmt.Errorf("follows position %d, not before its own %d", h.Prev, h.Seq)
	}
	return nil
}

// decodeDeltaBody reads what follows a delta's header. The caller has
// checked the checksum.
func decodeDeltaBody(dec *msgpack.Decoder, h deltaHeader) (*deltaContent, error) {
	d := &deltaContent{upserts: make([]engine.Packed, 0, min(h.Upserts, 1<<20))}
	var prev engine.Packed
	add := func(e engine.Packed) error {
		i := len(d.upserts)
		if i > 0 && !engine.LessPacked(prev, e) {
			return fmt.Errorf("entity %d: entities out of key order", i)
		}
		if v := e.Version(); v.Seq <= h.Prev || v.Seq > h.Seq {
			return fmt.Errorf("entity %d: version %d outside the delta's positions %d to %d", i, v.Seq, h.Prev+1, h.Seq)
		}
		d.upserts = append(d.upserts, e)
		prev = e
		return nil
	}
	if err := decodeEntities(dec, h.Version, h.Upserts, add); err != nil {
		return nil, err
	}
	for i := uint64(0); i < h.Deletes; i++ {
		n, err := dec.DecodeArrayLen()
		if err == nil && n != 2 {
			err = fmt.Errorf("want 2 elements, got %d", n)
		}
		var k entityKey
		if err == nil {
			k.pk, err = dec.DecodeString()
		}
		if err == nil {
			k.rk, err = dec.DecodeString()
		}
		if err == nil && i > 0 {
			if prev := d.deletes[i-1]; k.pk < prev.pk || k.pk == prev.pk && k.rk <= prev.rk {
				err = errors.New("deletes out of key order")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("delete %d: %w", i, err)
		}
		d.deletes = append(d.deletes, k)
	}
	var prevPart *Partition
	for i := uint64(0); i < h.Parts; i++ {
		p, err := decodePartition(dec)
		if err == nil && prevPart != nil && prevPart.Key >= p.Key {
			err = errors.New("partitions out of key order")
		}
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", i, err)
		}
		d.parts = append(d.parts, p)
		prevPart = p
	}
	for i := uint64(0); i < h.IDs; i++ {
		c, err := decodeCommand(dec)
		if err == nil && (c.Seq <= h.Prev || c.Seq > h.Seq) {
			err = fmt.Errorf("position %d outside the delta's positions %d to %d", c.Seq, h.Prev+1, h.Seq)
		}
		if err != nil {
			return nil, fmt.Errorf("command id %d: %w", i, err)
		}
		d.adds = append(d.adds, c)
	}
	return d, nil
}

// applyDelta returns the view at h.Seq: c (the view at h.Prev) with the
// delta d applied. c is left as it was (the B-trees are copied, O(1),
// before they are changed), so that a delta that does not fit leaves the
// view at its previous point.
func (c *snapshotContent) applyDelta(h deltaHeader, d *deltaContent) (*snapshotContent, error) {
	if h.Keep > uint64(len(c.expiry)) {
		return nil, fmt.Errorf("keeps %d command ids of the view before it, which remembers %d", h.Keep, len(c.expiry))
	}
	out := &snapshotContent{rows: c.rows.Copy(), parts: c.parts.Copy(), ids: c.ids.Copy()}
	var hint btree.PathHint
	for _, e := range d.upserts {
		out.rows.SetHint(e, &hint)
	}
	for _, k := range d.deletes {
		out.rows.DeleteHint(engine.PackedKey(k.pk, k.rk), &hint)
	}
	for _, p := range d.parts {
		out.parts.Set(p)
	}
	// The ids the view forgot, as Table.evict forgets them: an id is
	// removed unless a later commit of it is the one remembered.
	dropped := c.expiry[:uint64(len(c.expiry))-h.Keep]
	for _, cr := range dropped {
		if cur, ok := out.ids.Get(cr); ok && cur == cr {
			out.ids.Delete(cr)
		}
	}
	for _, cr := range d.adds {
		out.ids.Set(cr)
	}
	kept := c.expiry[len(dropped):]
	out.expiry = append(kept[:len(kept):len(kept)], d.adds...)
	if got := uint64(out.rows.Len()); got != h.Total {
		return nil, fmt.Errorf("leaves %d entities, its header says %d", got, h.Total)
	}
	return out, nil
}
