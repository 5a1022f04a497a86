package wire

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairn-dev/cairn/engine"
)

// requestScan validates a JSON request as jsonScanner.valid does, and in
// the same pass checks the names of its members (fields.go): the
// request's, its Batch operations', its outbox messages'. It costs a
// comparison or a few per member on top of the validation, which every
// JSON request had before it is decoded; encoding/json then decodes the
// values of names known to be exact.
type requestScan struct {
	jsonScanner
	// probe only looks for the request's op: no names are checked.
	probe bool
	// op is the request's "op", when it is a string.
	op []byte
	// refused is why the request's members are refused.
	refused error
}

// checkRequestJSON reads a JSON request's text whole, and returns why its
// members are refused, or why the text is not JSON.
func checkRequestJSON(data []byte, what string) error {
	c := requestScan{jsonScanner: jsonScanner{data: data}}
	if c.request() {
		return nil
	}
	if c.refused != nil {
		return at(what, c.refused)
	}
	return invalid("%s: not a valid JSON request: %s at offset %d", what, c.err, c.errAt)
}

// jsonOp returns the op of a JSON request that is valid JSON, or nil.
func jsonOp(data []byte) []byte {
	c := requestScan{jsonScanner: jsonScanner{data: data}, probe: true}
	if !c.request() {
		return nil
	}
	return c.op
}

// request reads the request at s.pos. A body that is no object is only
// validated: the decoder says what it is instead.
func (c *requestScan) request() bool {
	c.space()
	if !c.at('{') {
		return c.valid()
	}
	sh := shape{}
	ok := c.members(func(name jsonValue) bool {
		n := name.str()
		if !c.probe {
			if err := sh.add(n); err != nil {
				return c.refuse(err)
			}
		}
		switch {
		case string(n) == "op":
			return c.str(&c.op)
		case c.probe || !c.at('['):
			return c.valid()
		case string(n) == "ops":
			return c.batchOps()
		case string(n) == "messages":
			return c.messages()
		}
		return c.valid()
	})
	if ok && !c.probe {
		if err := sh.check(c.op); err != nil {
			return c.refuse(err)
		}
	}
	return ok
}

// batchOps reads a Batch's array of operations, checking each that is
// an object.
func (c *requestScan) batchOps() bool {
	return c.objects(func(i int) bool {
		refuse := func(err error) bool {
			return c.refuse(engine.AsError(at(fmt.Sprintf("ops[%d]", i), err)).AtIndex(i))
		}
		sh := shape{inBatch: true}
		var op []byte
		ok := c.members(func(name jsonValue) bool {
			n := name.str()
			if err := sh.add(n); err != nil {
				return refuse(err)
			}
			if string(n) != "op" {
				return c.valid()
			}
			return c.str(&op)
		})
		if ok {
			if err := sh.check(op); err != nil {
				return refuse(err)
			}
		}
		return ok
	})
}

// messages reads an array of outbox messages, checking each that is an
// object.
func (c *requestScan) messages() bool {
	return c.objects(func(i int) bool {
		sh := objectShape{names: messageFields, what: "outbox message"}
		return c.members(func(name jsonValue) bool {
			if err := sh.add(name.str()); err != nil {
				return c.refuse(at(fmt.Sprintf("messages[%d]", i), err))
			}
			return c.valid()
		})
	})
}

// objects reads an array, calling object with the index of each element
// that is an object (at its '{'); other elements are only validated.
func (c *requestScan) objects(object func(i int) bool) bool {
	i := -1
	return c.elements(func() bool {
		i++
		if !c.at('{') {
			return c.valid()
		}
		return object(i)
	})
}

// str reads a value, into *dst when it is a string.
func (c *requestScan) str(dst *[]byte) bool {
	v, ok := c.value()
	if ok && v.kind == kindString {
		*dst = v.str()
	}
	return ok
}

// refuse records why the request is refused, and stops the scan.
func (c *requestScan) refuse(err error) bool {
	c.refused = err
	return false
}

// checkObjectJSON reads a JSON object's text whole (anything else is
// only validated), refusing members that are not names, or come twice;
// what names the object in the refusal.
func checkObjectJSON(data []byte, names fieldNames, what string) error {
	s := jsonScanner{data: data}
	s.space()
	var refused error
	ok := true
	if s.at('{') {
		sh := objectShape{names: names, what: what}
		ok = s.members(func(name jsonValue) bool {
			if refused = sh.add(name.str()); refused != nil {
				return false
			}
			return s.valid()
		})
	} else {
		ok = s.valid()
	}
	switch {
	case refused != nil:
		return at(what, refused)
	case !ok:
		return invalid("%s: not valid JSON: %s at offset %d", what, s.err, s.errAt)
	}
	return nil
}

// checkMessagesJSON reads a JSON array of outbox messages whole,
// refusing a message's member that is not a field, or comes twice.
func checkMessagesJSON(data []byte) error {
	c := requestScan{jsonScanner: jsonScanner{data: data}}
	c.space()
	ok := true
	if c.at('[') {
		ok = c.messages()
	} else {
		ok = c.valid()
	}
	switch {
	case c.refused != nil:
		return c.refused
	case !ok:
		return invalid("messages: not valid JSON: %s at offset %d", c.err, c.errAt)
	}
	return nil
}

// checkRequestMsgpack walks the top-level keys of a msgpack request
// (skipping their values) and refuses them as the JSON check does; the
// decoders that decode into a struct (a Query) call it first.
func checkRequestMsgpack(d *msgpack.Decoder) error {
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil // not a map: the decoder says so
	}
	sh := shape{}
	var op []byte
	for i := 0; i < n; i++ {
		k, err := d.DecodeString()
		if err != nil {
			return nil
		}
		if err := sh.add([]byte(k)); err != nil {
			return err
		}
		if k == "op" {
			s, err := d.DecodeString()
			if err != nil {
				return nil
			}
			op = []byte(s)
			continue
		}
		if skip(d) != nil {
			return nil
		}
	}
	return sh.check(op)
}

// checkObjectMsgpack does for a msgpack object of other fields what
// checkObjectJSON does.
func checkObjectMsgpack(d *msgpack.Decoder, names fieldNames, what string) error {
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil
	}
	sh := objectShape{names: names, what: what}
	for i := 0; i < n; i++ {
		k, err := d.DecodeString()
		if err != nil {
			return nil
		}
		if err := sh.add([]byte(k)); err != nil {
			return at(what, err)
		}
		if skip(d) != nil {
			return nil
		}
	}
	return nil
}
