package engine

import "unicode/utf8"

// The limits of the Azure Table data model (SPEC §1, §2).
const (
	MaxKeyUnits        = 512 // UTF-16 code units of a PartitionKey or RowKey (1 KiB)
	MaxUserProperties  = 252 // besides PartitionKey, RowKey, Timestamp
	MaxPropertyNameLen = 255
	MaxEntitySize      = 1 << 20 // Azure's size formula, see EntitySize
	MaxStringUnits     = 32768   // UTF-16 code units of a String value (64 KiB)
	MaxBinaryBytes     = 65536
	MaxBatchOps        = 100
	MaxBatchBytes      = 4 << 20
	MinTableNameLen    = 3
	MaxTableNameLen    = 63
	MaxQueueNameLen    = 255
	MaxMessageBytes    = 1 << 20
)

// The bounds of one command's outbox messages (Cairn's: Azure has no
// messages). A command's messages are stored in its journal record and
// published by the outbox relay one after another, one in flight per
// partition, so what a command carries is work it asks of the node after
// the commit, for a request of a few bytes per message.
const (
	// MaxCommandMessages bounds the outbox messages of one command: as
	// many as a function's invocation may send (they go into one of its
	// commands), and few enough that a partition's later messages wait a
	// fraction of a second behind one command's (1,000 were relayed in
	// 65-245 ms on two cores: TestOutboxMessageBound logs it).
	MaxCommandMessages = 1000
	// MaxCommandMessageBytes bounds the MessageSize of a command's
	// messages together: a record holds them beside up to MaxBatchBytes of
	// entities, and must fit into one NATS message (8 MiB on the embedded
	// server) with its encoding.
	MaxCommandMessageBytes = 2 << 20
)

// MessageSize is what an outbox message adds to its journal record, as
// MaxCommandMessageBytes counts it: its destination, id and body.
func MessageSize(m *Message) int {
	return len(m.Queue) + len(m.Subject) + len(m.ID) + len(m.Body)
}

// UTF16Len returns the length of s in UTF-16 code units, as Azure counts:
// characters outside the Basic Multilingual Plane count two. A byte that
// is not part of valid UTF-8 counts one. Runs of ASCII are counted eight
// bytes at a time: most keys and values are ASCII, and every write counts
// each of its strings twice (its limit, and the entity's size).
func UTF16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if w&0x8080808080808080 == 0 {
				n += 8
				i += 8
				continue
			}
		}
		c := s[i]
		if c < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
		i += size
	}
	return n
}

// EntitySize is an entity's size by Azure's formula: 4 bytes, plus two
// bytes per UTF-16 unit of each key, plus per property 8 bytes, two per
// unit of its name and its value's size (String 4 + 2 per unit, Int32 4,
// Int64 8, Double 8, Boolean 1, DateTime 8, Guid 16, Binary 4 + length).
func EntitySize(e *Entity) int {
	if e == nil {
		return 0
	}
	n := 4 + 2*UTF16Len(e.PartitionKey) + 2*UTF16Len(e.RowKey)
	for _, p := range e.Properties {
		n += 8 + 2*UTF16Len(p.Name) + valueSize(p.Value)
	}
	return n
}

func valueSize(v Value) int {
	switch v.t {
	case TypeString:
		return 4 + 2*UTF16Len(v.s)
	case TypeInt32:
		return 4
	case TypeInt64, TypeDouble, TypeDateTime:
		return 8
	case TypeBoolean:
		return 1
	case TypeGuid:
		return 16
	case TypeBinary:
		return 4 + len(v.s)
	}
	return 0
}
