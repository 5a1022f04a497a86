package projections

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Chains. A view's snapshots are a chain: a full base and the deltas that
// follow it, each naming the position it follows. Continuity is by
// position only: a view at a journal position is the same whoever built
// it (the journal decides it whole), so a delta applies after any base or
// delta at the position it names, written by this node or another.
//
// Loading takes, among the bases that are within the stream (no record
// after them purged, none beyond its last) and not past the position
// asked for, the one whose deltas reach furthest (the newest base on a
// tie), then its deltas in order, each checked like a base (format, name,
// epoch, position, the position it follows, checksum) and applied to a
// copy, so that one that fails leaves the view at the previous point;
// another delta following the same point is tried next, then the replay
// goes on from there. A base that fails is passed over for the next
// best. Each element is a local file or, with a store, a shared object,
// the local file first.

// chainLink is a base or a delta a chain may be made of, found as a
// local file, a shared object, or both.
type chainLink struct {
	seq    uint64
	prev   uint64 // a delta's: the position it follows
	base   bool
	file   string // the local file ("" if none)
	object string // the shared object ("" if none)
	bad    bool   // failed to load: not tried again
}

// chainCandidates is what a table incarnation's chain can be made of.
type chainCandidates struct {
	links  map[[2]uint64]*chainLink // by position and kind (1: base)
	reach  map[uint64]uint64        // memo of furthest
	byPrev map[uint64][]*chainLink
}

func newChainCandidates() *chainCandidates {
	return &chainCandidates{links: map[[2]uint64]*chainLink{}}
}

// add returns the link of that position and kind, made if new.
func (cc *chainCandidates) add(seq, prev uint64, base bool) *chainLink {
	k := [2]uint64{seq, 0}
	if base {
		k[1] = 1
	}
	l := cc.links[k]
	if l == nil {
		l = &chainLink{seq: seq, prev: prev, base: base}
		cc.links[k] = l
		cc.reach = nil
	}
	return l
}

func (cc *chainCandidates) index() {
	if cc.reach != nil {
		return
	}
	cc.reach, cc.byPrev = map[uint64]uint64{}, map[uint64][]*chainLink{}
	for _, l := range cc.links {
		if !l.base && !l.bad {
			cc.byPrev[l.prev] = append(cc.byPrev[l.prev], l)
		}
	}
}

// furthest is the furthest position the deltas reach from pos (pos
// itself when none follows it).
func (cc *chainCandidates) furthest(pos uint64) uint64 {
	cc.index()
	if r, ok := cc.reach[pos]; ok {
		return r
	}
	r := pos
	for _, d := range cc.byPrev[pos] {
		r = max(r, cc.furthest(d.seq))
	}
	cc.reach[pos] = r
	return r
}

// markBad takes l out of every chain.
func (cc *chainCandidates) markBad(l *chainLink) {
	l.bad = true
	cc.reach = nil
}

// bestBase is the usable base whose chain reaches furthest, the newest
// on a tie (nil: none).
func (cc *chainCandidates) bestBase() *chainLink {
	var best *chainLink
	var bestEnd uint64
	for _, l := range cc.links {
		if !l.base || l.bad {
			continue
		}
		end := cc.furthest(l.seq)
		if best == nil || end > bestEnd || end == bestEnd && l.seq > best.seq {
			best, bestEnd = l, end
		}
	}
	return best
}

// nextDeltas are the usable deltas following pos, the one reaching
// furthest first.
func (cc *chainCandidates) nextDeltas(pos uint64) []*chainLink {
	cc.index()
	ds := append([]*chainLink(nil), cc.byPrev[pos]...)
	sort.Slice(ds, func(i, j int) bool {
		a, b := cc.furthest(ds[i].seq), cc.furthest(ds[j].seq)
		if a != b {
			return a > b
		}
		return ds[i].seq > ds[j].seq
	})
	return ds
}

// loadedChain is a chain loaded into a view's content.
type loadedChain struct {
	content   *snapshotContent
	seq       uint64    // the position it reached
	at        time.Time // when its last element was written
	baseSeq   uint64
	baseAt    time.Time
	baseEnts  int
	chainEnts int // entities of its deltas
	deltas    int
	// floor, when not nil, is each shard's position in content, which
	// merges sources of several positions (snapshards.go): seq is the
	// lowest, floorTop the highest.
	floor    []uint64
	floorTop uint64
}

// chainScope says which chain to load and where shared objects go.
type chainScope struct {
	first, last uint64 // the stream's first and last sequence
	upTo        uint64 // the latest position wanted (last for a start)
	// scratch: downloaded objects go to temporary files removed after
	// use (an as-of read), not into the chain's directory.
	scratch bool
}

// findChain gathers t's candidates: its directory's files and, with a
// store, the store's objects of the incarnation, within the scope. Files
// and objects that cannot be used are logged with the reason.
func (v *Views) findChain(ctx context.Context, t *Table, sc chainScope) *chainCandidates {
	cc := newChainCandidates()
	dir := v.snapDir(t)
	for _, name := range snapshotFiles(dir) {
		path := filepath.Join(dir, name)
		seq, base := fileSeqKind(name)
		if seq == 0 || seq > sc.upTo && sc.upTo < sc.last {
			continue // not one of ours, or past an as-of read's position
		}
		var prev uint64
		if !base {
			h, err := v.deltaFileHeader(path)
			if err != nil {
				v.log.Warn("snapshot ignored", "table", t.Name(), "file", path, "why", err)
				continue
			}
			prev = h.Prev
		}
		cc.add(seq, prev, base).file = path
	}
	if v.cfg.SnapshotStore != nil {
		for _, o := range v.listShared(ctx, t) {
			if o.held != nil {
				continue // a shard base: not part of a chain (snapshards.go)
			}
			var err error
			switch {
			case o.seq > sc.last:
				err = fmt.Errorf("at position %d, beyond the journal's last record %d", o.seq, sc.last)
			case o.base && sc.first > o.seq+1:
				err = fmt.Errorf("at position %d, but the journal starts at %d (records purged)", o.seq, sc.first)
			}
			if err != nil {
				v.log.Warn("shared snapshot ignored", "table", t.Name(), "object", o.name, "why", err)
				continue
			}
			if o.seq > sc.upTo {
				continue
			}
			l := cc.add(o.seq, o.prev, o.base)
			if l.object == "" || o.legacy {
				l.object = o.name
			}
		}
	}
	return cc
}

// loadChain loads into a new content the best chain of t within the
// scope (nil: none usable).
func (v *Views) loadChain(ctx context.Context, t *Table, sc chainScope) *loadedChain {
	start := time.Now()
	cc := v.findChain(ctx, t, sc)
	for {
		b := cc.bestBase()
		if b == nil {
			return nil
		}
		c, h, ok := v.loadBase(ctx, t, b, sc)
		if !ok {
			cc.markBad(b)
			continue
		}
		lc := &loadedChain{content: c, seq: h.Seq, at: time.Unix(0, h.At), baseSeq: h.Seq, baseAt: time.Unix(0, h.At), baseEnts: int(h.Entities)}
		for {
			moved := false
			for _, d := range cc.nextDeltas(lc.seq) {
				nc, dh, ok := v.loadDelta(ctx, t, d, lc.content, sc)
				if !ok {
					cc.markBad(d)
					continue
				}
				lc.content, lc.seq, lc.at = nc, dh.Seq, time.Unix(0, dh.At)
				lc.chainEnts += int(dh.Entries())
				lc.deltas++
				moved = true
				break
			}
			if !moved {
				break
			}
		}
		if lc.deltas > 0 {
			v.log.Info("snapshot chain loaded", "table", t.Name(), "base", lc.baseSeq, "deltas", lc.deltas, "seq", lc.seq,
				"entities", lc.content.rows.Len(), "elapsed", time.Since(start).Round(time.Millisecond))
		}
		return lc
	}
}

// loadBase reads base l: its file, else its object (downloaded first).
func (v *Views) loadBase(ctx context.Context, t *Table, l *chainLink, sc chainScope) (*snapshotContent, snapshotHeader, bool) {
	if l.file != "" {
		c, h, err := v.readSnapshotFile(l.file, t, sc.first, sc.last, l.seq)
		if err == nil {
			return c, h, true
		}
		v.log.Warn("snapshot ignored", "table", t.Name(), "file", l.file, "why", err)
	}
	if l.object == "" {
		return nil, snapshotHeader{}, false
	}
	start := time.Now()
	path, size, err := v.downloadShared(ctx, t, l, sc.scratch)
	if err == nil {
		var c *snapshotContent
		var h snapshotHeader
		c, h, err = v.readSnapshotFile(path, t, sc.first, sc.last, l.seq)
		if sc.scratch || err != nil {
			os.Remove(path)
		}
		if err == nil {
			v.log.Info("shared snapshot loaded", "table", t.Name(), "kind", "base", "object", l.object, "seq", l.seq, "bytes", size,
				"elapsed", time.Since(start).Round(time.Millisecond))
			return c, h, true
		}
	}
	v.log.Warn("shared snapshot ignored", "table", t.Name(), "object", l.object, "seq", l.seq, "why", err)
	return nil, snapshotHeader{}, false
}

// loadDelta reads delta l (its file, else its object) and applies it to c.
func (v *Views) loadDelta(ctx context.Context, t *Table, l *chainLink, c *snapshotContent, sc chainScope) (*snapshotContent, deltaHeader, bool) {
	if l.file != "" {
		nc, h, err := v.readDeltaFile(l.file, t, sc, l, c)
		if err == nil {
			return nc, h, true
		}
		v.log.Warn("snapshot ignored", "table", t.Name(), "file", l.file, "why", err)
	}
	if l.object == "" {
		return nil, deltaHeader{}, false
	}
	start := time.Now()
	path, size, err := v.downloadShared(ctx, t, l, sc.scratch)
	if err == nil {
		var nc *snapshotContent
		var h deltaHeader
		nc, h, err = v.readDeltaFile(path, t, sc, l, c)
		if sc.scratch || err != nil {
			os.Remove(path)
		}
		if err == nil {
			v.log.Info("shared snapshot loaded", "table", t.Name(), "kind", "delta", "object", l.object, "seq", l.seq, "prev", l.prev,
				"bytes", size, "elapsed", time.Since(start).Round(time.Millisecond))
			return nc, h, true
		}
	}
	v.log.Warn("shared snapshot ignored", "table", t.Name(), "object", l.object, "seq", l.seq, "why", err)
	return nil, deltaHeader{}, false
}

// deltaFileHeader reads the header of the delta file at path.
func (v *Views) deltaFileHeader(path string) (deltaHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return deltaHeader{}, err
	}
	defer f.Close()
	h, _, err := readDeltaHeader(bufio.NewReaderSize(f, 512))
	return h, err
}

// readDeltaFile reads the delta file at path, expected to be l, for t
// after checking its header and checksum, and applies it to c.
func (v *Views) readDeltaFile(path string, t *Table, sc chainScope, l *chainLink, c *snapshotContent) (*snapshotContent, deltaHeader, error) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return nil, deltaHeader{}, err
	}
	defer f.Close()
	h, dec, err := readDeltaHeader(bufio.NewReaderSize(f, 1<<16))
	if err == nil {
		err = checkFileOf(t, h.Name, h.Epoch, h.Seq, sc.last)
	}
	switch {
	case err != nil:
		return nil, h, err
	case h.Seq != l.seq:
		return nil, h, fmt.Errorf("at position %d, its name says %d", h.Seq, l.seq)
	case h.Prev != l.prev:
		return nil, h, fmt.Errorf("follows position %d, its name or metadata says %d", h.Prev, l.prev)
	}
	if err := checkFileSum(f); err != nil {
		return nil, h, err
	}
	d, err := decodeDeltaBody(dec, h)
	if err != nil {
		return nil, h, err
	}
	nc, err := c.applyDelta(h, d)
	if err != nil {
		return nil, h, err
	}
	v.log.Debug("snapshot delta loaded", "table", t.Name(), "file", path, "seq", h.Seq, "prev", h.Prev,
		"entities", h.Entries(), "elapsed", time.Since(start).Round(time.Millisecond))
	return nc, h, nil
}
