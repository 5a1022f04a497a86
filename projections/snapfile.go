package projections

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"slices"

	"github.com/tidwall/btree"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// SnapshotFormat is the newest snapshot file format this code writes and
// reads. Like the journal's, every version ever written stays readable
// (golden file in testdata/); a file of a newer version is ignored, never
// trusted.
//
// Format version 1. A file is
//
//	magic     8 bytes  "CAIRNSNP"
//	version   msgpack uint (1)
//	header    msgpack map with string keys:
//	            "name"  string  the table's full name as its creator spelled it
//	            "epoch" uint    the table's incarnation (its catalog sequence)
//	            "seq"   uint    the journal position the view is at
//	            "ents"  uint    entities that follow
//	            "parts" uint    partitions that follow
//	            "ids"   uint    command ids that follow
//	            "at"    int     when it was written, Unix nanoseconds
//	          (keys this code does not know are skipped)
//	entities  each an array [pk string, rk string, timestamp int,
//	          version seq uint, version index uint, properties], the
//	          properties in the form of engine.EncodeProperties, in key order
//	parts     each an array [key string, lastSeq uint, records uint,
//	          writes uint, entities int], in key order
//	ids       each an array [pk string, id string, seq uint, first uint,
//	          count uint, time int]: the command ids of the dedup window
//	          in the order they were applied (the view evicts them in that
//	          order), an id committed twice in the window twice
//	checksum  4 bytes, big-endian CRC-32C (Castagnoli) of every byte before
//
// Format version 2 is version 1 with the entities in blocks, so that a
// start decodes them on every core (decoding is most of a base's load: a
// million entities of ~1 KB took 6–7 s in a new process on two cores):
//
//	entities  blocks, each a msgpack uint (the block's entities, at least
//	          one) then a msgpack bin holding that many entities as
//	          version 1 writes them; the blocks together hold "ents"
//	          entities, in key order
//
// A block holds up to blockEntities entities or about blockBytes bytes of
// them, whichever comes first. Everything else is as in version 1.
//
// Format version 3 is a shard base (snapshards.go): version 2 whose header
// has two more fields, and which holds only the shards it names:
//
//	"shards"  uint  the table's shard count
//	"held"    bin   the shards it holds, bit i of byte i/8 for shard i
//
// A whole base is still written in version 2, so that a host of an
// earlier version reads it; one that reads no version 3 ignores a shard
// base rather than taking it for the whole table.
//
// A reader checks the magic, the version and the header before anything
// else, then the checksum over the whole file, and only then decodes the
// rest: a file that fails any check is not used.
const SnapshotFormat = 2

// ShardSnapshotFormat is the format of a shard base, the newest this
// code reads.
const ShardSnapshotFormat = 3

const snapshotMagic = "CAIRNSNP"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// snapshotHeader is what a snapshot file says of itself.
type snapshotHeader struct {
	Version  uint64
	Name     string
	Epoch    uint64
	Seq      uint64
	Entities uint64
	Parts    uint64
	IDs      uint64
	At       int64
	// Shards and Held, in a shard base: the table's shard count and the
	// shards it holds (nil: a whole base).
	Shards uint64
	Held   []bool
}

// snapshotContent is a view's state as a snapshot file holds it.
type snapshotContent struct {
	rows   *rowTree
	parts  *btree.BTreeG[*Partition]
	ids    *btree.BTreeG[*CommandRecord]
	expiry []*CommandRecord
}

// snapshotHeaderFields is how many fields a base's header has in
// SnapshotFormat 1; maxHeaderFields bounds the fields a reader accepts in
// any header (later versions may add some; a damaged count must not make
// it loop for long).
const (
	snapshotHeaderFields = 7
	shardHeaderFields    = 9 // a shard base's (version 3)
	maxHeaderFields      = 64
)

// progressEvery is how many entities a snapshot's writing or loading
// handles between two calls of its progress function: often enough for
// a line every Config.Progress, rarely enough to cost nothing.
const progressEvery = 4096

// summedWriter writes a snapshot file through a buffer, keeping the
// CRC-32C of everything written, which finish appends: the trailer of a
// base and of a delta.
type summedWriter struct {
	*bufio.Writer
	w   io.Writer
	crc hash.Hash32
}

func newSummedWriter(w io.Writer) *summedWriter {
	crc := crc32.New(castagnoli)
	return &summedWriter{Writer: bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<16), w: w, crc: crc}
}

// finish flushes what is buffered and appends the checksum.
func (sw *summedWriter) finish() error {
	if err := sw.Flush(); err != nil {
		return err
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], sw.crc.Sum32())
	_, err := sw.w.Write(sum[:])
	return err
}

// encodeSnapshot writes s to w in the current format. It reads only the
// immutable snapshot, so it runs beside the applier. progress, if not
// nil, is called every progressEvery entities with the entities written.
func encodeSnapshot(w io.Writer, s *Snapshot, at int64, progress func(n uint64)) error {
	return encodeSnapshotOf(w, s, at, progress, 0, nil)
}

// encodeSnapshotOf writes s as encodeSnapshot does; with held, as a shard
// base of a table of shards shards holding those (s holds only them).
func encodeSnapshotOf(w io.Writer, s *Snapshot, at int64, progress func(n uint64), shards uint32, held []bool) error {
	sw := newSummedWriter(w)
	if _, err := sw.WriteString(snapshotMagic); err != nil {
		return err
	}
	enc := msgpack.NewEncoder(sw)
	version, fields := uint64(SnapshotFormat), snapshotHeaderFields
	if held != nil {
		version, fields = ShardSnapshotFormat, shardHeaderFields
	}
	err := firstErr(
		enc.EncodeUint(version),
		enc.EncodeMapLen(fields),
		enc.EncodeString("name"), enc.EncodeString(s.Table),
		enc.EncodeString("epoch"), enc.EncodeUint(s.Epoch),
		enc.EncodeString("seq"), enc.EncodeUint(s.Seq),
		enc.EncodeString("ents"), enc.EncodeUint(uint64(s.rows.Len())),
		enc.EncodeString("parts"), enc.EncodeUint(uint64(s.parts.Len())),
		enc.EncodeString("ids"), enc.EncodeUint(uint64(len(s.expiry))),
		enc.EncodeString("at"), enc.EncodeInt(at),
	)
	if err == nil && held != nil {
		err = firstErr(enc.EncodeString("shards"), enc.EncodeUint(uint64(shards)),
			enc.EncodeString("held"), enc.EncodeBytes(heldBitmap(held)))
	}
	if err != nil {
		return err
	}
	if err := encodeEntityBlocks(sw, enc, s.rows.Scan, progress); err != nil {
		return err
	}
	s.parts.Scan(func(p *Partition) bool {
		err = encodePartition(enc, p)
		return err == nil
	})
	if err != nil {
		return err
	}
	for _, c := range s.expiry {
		if err := encodeCommand(enc, c); err != nil {
			return err
		}
	}
	return sw.finish()
}

// The bounds of a block of entities (SnapshotFormat 2): small enough that
// a few in flight per core cost little memory, large enough that handing
// one to a decoder costs nothing beside decoding it.
const (
	blockEntities = 1024
	blockBytes    = 256 << 10
)

// encodeEntityBlocks writes the entities scan gives, in blocks, through
// enc, which writes to sw: a base's entities, and a delta's upserts.
func encodeEntityBlocks(sw *summedWriter, enc *msgpack.Encoder, scan func(func(engine.Packed) bool), progress func(n uint64)) error {
	var blk bytes.Buffer
	benc := msgpack.NewEncoder(&blk)
	inBlock := 0
	flush := func() error {
		if inBlock == 0 {
			return nil
		}
		err := firstErr(enc.EncodeUint(uint64(inBlock)), enc.EncodeBytesLen(blk.Len()))
		if err == nil {
			_, err = sw.Write(blk.Bytes())
		}
		blk.Reset()
		inBlock = 0
		return err
	}
	var n uint64
	var err error
	var e engine.Entity
	scan(func(p engine.Packed) bool {
		p.DecodeInto(&e)
		if err = encodeEntity(benc, &e); err != nil {
			return false
		}
		if inBlock++; inBlock == blockEntities || blk.Len() >= blockBytes {
			err = flush()
		}
		if n++; progress != nil && n%progressEvery == 0 {
			progress(n)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// The elements of a base and of a delta: an entity, a partition and a
// command id are each a msgpack array of this many elements.
const (
	entityFields    = 6
	partitionFields = 5
	commandFields   = 6
)

func encodeEntity(enc *msgpack.Encoder, e *engine.Entity) error {
	err := firstErr(enc.EncodeArrayLen(entityFields), enc.EncodeString(e.PartitionKey), enc.EncodeString(e.RowKey),
		enc.EncodeInt(e.Timestamp), enc.EncodeUint(e.Version.Seq), enc.EncodeUint(uint64(e.Version.Index)))
	if err != nil {
		return err
	}
	return engine.EncodeProperties(enc, e.Properties)
}

func encodePartition(enc *msgpack.Encoder, p *Partition) error {
	return firstErr(enc.EncodeArrayLen(partitionFields), enc.EncodeString(p.Key), enc.EncodeUint(p.LastSeq),
		enc.EncodeUint(p.Records), enc.EncodeUint(p.Writes), enc.EncodeInt(p.Entities))
}

func encodeCommand(enc *msgpack.Encoder, c *CommandRecord) error {
	return firstErr(enc.EncodeArrayLen(commandFields), enc.EncodeString(c.PartitionKey), enc.EncodeString(c.ID),
		enc.EncodeUint(c.Seq), enc.EncodeUint(uint64(c.First)), enc.EncodeUint(uint64(c.Count)), enc.EncodeInt(c.Time))
}

// firstErr returns the first of errs that is not nil. The encoder's calls
// passed to it all run (in order); after a failed write the bufio.Writer
// under them fails the rest with the same error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// errNewerSnapshot is a snapshot written by a newer version of Cairn.
var errNewerSnapshot = errors.New("written in a newer snapshot format")

// readSnapshotHeader reads the magic, the version and the header from r
// and returns the decoder of the rest.
func readSnapshotHeader(r *bufio.Reader) (snapshotHeader, *msgpack.Decoder, error) {
	h, dec := snapshotHeader{}, msgpack.NewDecoder(r)
	err := h.read(dec, r)
	return h, dec, err
}

// readPreamble reads what every snapshot file starts with, a base's or a
// delta's: the magic (kind names the file in errors), the format version
// (at most newest: a newer one wraps errNewerSnapshot) and the number of
// the header's fields.
func readPreamble(dec *msgpack.Decoder, r io.Reader, magic, kind string, newest uint64) (version uint64, fields int, err error) {
	got := make([]byte, len(magic))
	if _, err := io.ReadFull(r, got); err != nil {
		return 0, 0, fmt.Errorf("no header: %w", err)
	}
	if string(got) != magic {
		return 0, 0, fmt.Errorf("not a %s file (bad magic)", kind)
	}
	v, err := dec.DecodeUint64()
	if err != nil {
		return 0, 0, fmt.Errorf("version: %w", err)
	}
	if v == 0 || v > newest {
		return v, 0, fmt.Errorf("%w: %s version %d, this Cairn reads up to %d", errNewerSnapshot, kind, v, newest)
	}
	n, err := dec.DecodeMapLen()
	if err != nil {
		return v, 0, fmt.Errorf("header: %w", err)
	}
	if n < 0 || n > maxHeaderFields {
		return v, 0, fmt.Errorf("header of %d fields", n)
	}
	return v, n, nil
}

func (h *snapshotHeader) read(dec *msgpack.Decoder, r io.Reader) error {
	v, n, err := readPreamble(dec, r, snapshotMagic, "snapshot", ShardSnapshotFormat)
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
		switch k {
		case "name":
			h.Name, err = dec.DecodeString()
		case "epoch":
			h.Epoch, err = dec.DecodeUint64()
		case "seq":
			h.Seq, err = dec.DecodeUint64()
		case "ents":
			h.Entities, err = dec.DecodeUint64()
		case "parts":
			h.Parts, err = dec.DecodeUint64()
		case "ids":
			h.IDs, err = dec.DecodeUint64()
		case "at":
			h.At, err = dec.DecodeInt64()
		case "shards", "held":
			if v < ShardSnapshotFormat { // not a field of this version
				err = dec.Skip()
				seen--
				break
			}
			if k == "shards" {
				h.Shards, err = dec.DecodeUint64()
				break
			}
			var b []byte
			if b, err = dec.DecodeBytes(); err == nil {
				h.Held = bitmapHeld(b)
			}
		default:
			err = dec.Skip()
			seen--
		}
		if err != nil {
			return fmt.Errorf("header field %q: %w", k, err)
		}
		seen++
	}
	want := snapshotHeaderFields
	if v >= ShardSnapshotFormat {
		want = shardHeaderFields
	}
	if seen != want {
		return fmt.Errorf("header has %d of its %d fields", seen, want)
	}
	if v >= ShardSnapshotFormat && (h.Shards == 0 || h.Shards > engine.MaxShards || uint64(len(h.Held)) < h.Shards || uint64(len(h.Held)) > h.Shards+7 || slices.Contains(h.Held[h.Shards:], true)) {
		return fmt.Errorf("a shard base of %d shards holding %d bits", h.Shards, len(h.Held))
	}
	if v >= ShardSnapshotFormat {
		h.Held = h.Held[:h.Shards]
	}
	return nil
}

// checkSnapshotSum checks that the last 4 bytes of r, size bytes long,
// are the CRC-32C of the bytes before them. It reads r once, at offsets of
// its own: a file's read position is left where it was.
func checkSnapshotSum(r io.ReaderAt, size int64) error {
	if size < 4 {
		return errors.New("truncated: no checksum")
	}
	crc := crc32.New(castagnoli)
	if _, err := io.CopyBuffer(crc, io.NewSectionReader(r, 0, size-4), make([]byte, 1<<16)); err != nil {
		return err
	}
	var tail [4]byte
	if _, err := r.ReadAt(tail[:], size-4); err != nil {
		return err
	}
	if got := binary.BigEndian.Uint32(tail[:]); got != crc.Sum32() {
		return fmt.Errorf("checksum mismatch (damaged or truncated): file says %08x, content gives %08x", got, crc.Sum32())
	}
	return nil
}

// decodeSnapshotBody reads what follows the header; progress is called
// every progressEvery entities with the entities read. The caller has
// checked the checksum.
func decodeSnapshotBody(dec *msgpack.Decoder, h snapshotHeader, progress func(n uint64)) (*snapshotContent, error) {
	opts := btree.Options{NoLocks: true}
	c := &snapshotContent{
		rows:  newRows(),
		parts: btree.NewBTreeGOptions(lessPartition, opts),
		ids:   btree.NewBTreeGOptions(lessCommand, opts),
	}
	var prev engine.Packed
	var i uint64
	load := func(e engine.Packed) error {
		if i > 0 && !engine.LessPacked(prev, e) {
			return fmt.Errorf("entity %d: entities out of key order", i)
		}
		if v := e.Version(); v.Seq > h.Seq {
			return fmt.Errorf("entity %d: version %d beyond the snapshot's position %d", i, v.Seq, h.Seq)
		}
		c.rows.Load(e)
		prev = e
		if i++; progress != nil && i%progressEvery == 0 {
			progress(i)
		}
		return nil
	}
	if err := decodeEntities(dec, h.Version, h.Entities, load); err != nil {
		return nil, err
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
		c.parts.Load(p)
		prevPart = p
	}
	for i := uint64(0); i < h.IDs; i++ {
		cr, err := decodeCommand(dec)
		if err != nil {
			return nil, fmt.Errorf("command id %d: %w", i, err)
		}
		// In the order they were applied: the last of an id is the one
		// the view remembers, as Apply left it.
		c.ids.Set(cr)
		c.expiry = append(c.expiry, cr)
	}
	return c, nil
}

// decodeTuple reads the length of an array that must have want elements.
func decodeTuple(dec *msgpack.Decoder, want int) error {
	n, err := dec.DecodeArrayLen()
	if err == nil && n != want {
		err = fmt.Errorf("want %d elements, got %d", want, n)
	}
	return err
}

func decodeEntity(dec *msgpack.Decoder) (*engine.Entity, error) {
	e := &engine.Entity{}
	var index uint32
	err := decodeTuple(dec, entityFields)
	if err == nil {
		e.PartitionKey, err = dec.DecodeString()
	}
	if err == nil {
		e.RowKey, err = dec.DecodeString()
	}
	if err == nil {
		e.Timestamp, err = dec.DecodeInt64()
	}
	if err == nil {
		e.Version.Seq, err = dec.DecodeUint64()
	}
	if err == nil {
		index, err = dec.DecodeUint32()
		e.Version.Index = index
	}
	if err == nil {
		e.Properties, err = engine.DecodeProperties(dec)
	}
	return e, err
}

func decodePartition(dec *msgpack.Decoder) (*Partition, error) {
	p := &Partition{}
	err := decodeTuple(dec, partitionFields)
	if err == nil {
		p.Key, err = dec.DecodeString()
	}
	if err == nil {
		p.LastSeq, err = dec.DecodeUint64()
	}
	if err == nil {
		p.Records, err = dec.DecodeUint64()
	}
	if err == nil {
		p.Writes, err = dec.DecodeUint64()
	}
	if err == nil {
		p.Entities, err = dec.DecodeInt64()
	}
	return p, err
}

func decodeCommand(dec *msgpack.Decoder) (*CommandRecord, error) {
	cr := &CommandRecord{}
	err := decodeTuple(dec, commandFields)
	if err == nil {
		cr.PartitionKey, err = dec.DecodeString()
	}
	if err == nil {
		cr.ID, err = dec.DecodeString()
	}
	if err == nil {
		cr.Seq, err = dec.DecodeUint64()
	}
	if err == nil {
		cr.First, err = dec.DecodeUint32()
	}
	if err == nil {
		cr.Count, err = dec.DecodeUint32()
	}
	if err == nil {
		cr.Time, err = dec.DecodeInt64()
	}
	return cr, err
}
