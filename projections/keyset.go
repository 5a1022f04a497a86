package projections

import (
	"bytes"
	"cmp"
	"hash/maphash"
	"iter"
	"math"

	"github.com/cairn-dev/cairn/engine"
)

// keySet is a set of entity keys, for the note of the keys a snapshot's
// tail touched (touchedSet). The note lives as long as the tail, which
// may hold every entity of a table just loaded, so the set is built for
// memory: each key is its packed bytes (engine.AppendPackedKey: the two
// keys and their lengths) in one array, found through an open-addressed
// table of key numbers. A key costs those bytes plus 10 to 20: its end
// (4 bytes), a slot of 4 in a table 38-75 % full, and the arrays' room
// to grow. A Go map of the two strings cost about 80 plus the strings it
// kept alive (BenchmarkTouchedMemory: 33 bytes a key against 103, for
// 8-byte keys); and the set holds no pointer for the collector to trace.
type keySet struct {
	seed  maphash.Seed
	keys  []byte   // the keys, packed, one after another
	ends  []uint32 // where key i ends in keys; it starts where i-1 ends
	slots []uint32 // 1 + a key's number, 0 for an empty slot; a power of two long
	// limit is the most bytes keys may hold (0: math.MaxUint32, what ends
	// can address).
	limit uint64
}

// add adds the key (pk, rk). It returns false, adding nothing, when the
// key is new and the set cannot hold it: its keys would pass its limit.
func (s *keySet) add(pk, rk string) bool {
	if 4*(len(s.ends)+1) > 3*len(s.slots) {
		s.grow()
	}
	start := len(s.keys)
	s.keys = engine.AppendPackedKey(s.keys, pk, rk)
	k := s.keys[start:]
	mask := len(s.slots) - 1
	for i := int(maphash.Bytes(s.seed, k)) & mask; ; i = (i + 1) & mask {
		n := s.slots[i]
		if n == 0 {
			if uint64(len(s.keys)) > cmp.Or(s.limit, math.MaxUint32) {
				s.keys = s.keys[:start]
				return false
			}
			s.ends = append(s.ends, uint32(len(s.keys)))
			s.slots[i] = uint32(len(s.ends))
			return true
		}
		if bytes.Equal(s.keys[s.start(int(n)-1):s.ends[n-1]], k) {
			s.keys = s.keys[:start] // there already
			return true
		}
	}
}

// start is where key i starts in s.keys.
func (s *keySet) start(i int) int {
	if i == 0 {
		return 0
	}
	return int(s.ends[i-1])
}

// grow doubles the table (16 slots at first) and puts every key back.
func (s *keySet) grow() {
	if s.slots == nil {
		s.seed = maphash.MakeSeed()
	}
	s.slots = make([]uint32, max(16, 2*len(s.slots)))
	mask := len(s.slots) - 1
	for n := range s.ends {
		i := int(maphash.Bytes(s.seed, s.keys[s.start(n):s.ends[n]])) & mask
		for s.slots[i] != 0 {
			i = (i + 1) & mask
		}
		s.slots[i] = uint32(n + 1)
	}
}

// len is how many keys the set holds.
func (s *keySet) len() int { return len(s.ends) }

// all yields the keys in the order they were first added, each as
// PackedKey makes it: substrings of one copy of the set's bytes, so the
// set may change meanwhile.
func (s *keySet) all() iter.Seq[engine.Packed] {
	keys, ends := string(s.keys), s.ends[:len(s.ends):len(s.ends)]
	return func(yield func(engine.Packed) bool) {
		start := 0
		for _, end := range ends {
			if !yield(engine.Packed(keys[start:end])) {
				return
			}
			start = int(end)
		}
	}
}
