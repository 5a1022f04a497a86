package wire

import (
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// maxMsgpackDepth bounds the nesting of arrays and maps a skipped msgpack
// value may have, as maxJSONDepth bounds JSON's.
const maxMsgpackDepth = maxJSONDepth

// skip passes over d's next value as d.Skip does, refusing a value nested
// deeper than maxMsgpackDepth. d.Skip calls itself once per level: a
// body of a few MiB of one-element arrays would overflow the goroutine's
// stack, which no recover catches, and end the process. Every skip of a
// value a client sent goes through here.
func skip(d *msgpack.Decoder) error { return skipAt(d, 1) }

func skipAt(d *msgpack.Decoder, depth int) error {
	c, err := d.PeekCode()
	if err != nil {
		return err
	}
	var n int
	switch {
	case msgpcode.IsFixedArray(c), c == msgpcode.Array16, c == msgpcode.Array32:
		n, err = d.DecodeArrayLen()
	case msgpcode.IsFixedMap(c), c == msgpcode.Map16, c == msgpcode.Map32:
		n, err = d.DecodeMapLen()
		n *= 2
	default:
		return d.Skip() // a value with nothing nested in it
	}
	if err != nil {
		return err
	}
	if depth > maxMsgpackDepth {
		return invalid("a value nested deeper than %d levels", maxMsgpackDepth)
	}
	for range n {
		if err := skipAt(d, depth+1); err != nil {
			return err
		}
	}
	return nil
}
