package engine

import (
	"encoding/base32"
	"strings"
	"time"
)

// Large values (docs/VALUES.md): a value far larger than an entity may be
// is stored in the object store, and the entity holds a reference to it,
// an ordinary String property "cairn-value:<id>". The id names the value
// among those of one entity only (the store's object name adds the
// account, the table and the entity's keys), so a reference copied into
// another entity names nothing there.
//
// The id begins with the time of its upload. A reference the entity does
// not already hold in the same property may be claimed by a write only
// while it is younger than the claim window: after it, no command can
// claim the value any more, so a value no entity holds at that point can
// be removed without racing a write (the sweep's rule).

// ValueRefPrefix starts every reference to a large value. A String
// property of a written entity that starts with it is a reference and is
// checked: the prefix is reserved.
const ValueRefPrefix = "cairn-value:"

// DefaultClaimWindow is how long after its upload a value may be newly
// claimed by an entity (the window W of docs/VALUES.md).
const DefaultClaimWindow = time.Hour

// valueIDTime is the layout of a value id's time: UTC, to the nanosecond,
// fixed width so that ids sort by time.
const valueIDTime = "20060102T150405.000000000Z"

// ValueIDRandom is the number of random bytes of a value id.
const ValueIDRandom = 10

// valueIDEncoding writes the random part: lower-case base32 without
// padding (10 bytes: 16 characters).
var valueIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// valueIDLen is the length of every value id.
var valueIDLen = len(valueIDTime) + 1 + valueIDEncoding.EncodedLen(ValueIDRandom)

// NewValueID makes the id of a value uploaded at t from ValueIDRandom
// random bytes (crypto/rand's: the caller reads them).
func NewValueID(t time.Time, random [ValueIDRandom]byte) string {
	return t.UTC().Format(valueIDTime) + "-" + valueIDEncoding.EncodeToString(random[:])
}

// ParseValueID checks a value id and returns its upload time. A malformed
// id is InvalidInput.
func ParseValueID(id string) (time.Time, error) {
	bad := func() error {
		return Errorf(CodeInvalidInput, "%.80q is not a large value's id (want %s-<16 base32 characters>)", id, valueIDTime)
	}
	if len(id) != valueIDLen || id[len(valueIDTime)] != '-' {
		return time.Time{}, bad()
	}
	t, err := time.Parse(valueIDTime, id[:len(valueIDTime)])
	if err != nil {
		return time.Time{}, bad()
	}
	rnd := id[len(valueIDTime)+1:]
	if b, err := valueIDEncoding.DecodeString(rnd); err != nil || len(b) != ValueIDRandom || valueIDEncoding.EncodeToString(b) != rnd {
		return time.Time{}, bad()
	}
	return t, nil
}

// ValueRef returns the reference to the value id (a property's value).
func ValueRef(id string) string { return ValueRefPrefix + id }

// IsValueRef reports whether a property value is a reference (it may
// still be malformed: ParseValueRef).
func IsValueRef(v Value) bool {
	return v.Type() == TypeString && strings.HasPrefix(v.Str(), ValueRefPrefix)
}

// ParseValueRef returns the id and upload time of a reference. A value
// that is not one, or a malformed one, is InvalidInput.
func ParseValueRef(v Value) (id string, at time.Time, err error) {
	if !IsValueRef(v) {
		return "", time.Time{}, Errorf(CodeInvalidInput, "the value is not a large value's reference (%s<id>)", ValueRefPrefix)
	}
	id = v.Str()[len(ValueRefPrefix):]
	at, err = ParseValueID(id)
	return id, at, err
}

// CommandHoldsRefs reports whether any entity cmd writes holds a String
// that starts with ValueRefPrefix: a command for which it is false needs
// no check of references at all (a scan of its Strings' prefixes).
func CommandHoldsRefs(cmd *Command) bool {
	for _, op := range cmd.Ops {
		if op.Op == OpDelete || op.Entity == nil {
			continue
		}
		for _, p := range op.Entity.Properties {
			if IsValueRef(p.Value) {
				return true
			}
		}
	}
	return false
}

// ValueRefs returns the ids of the references among props, refusing a
// malformed one (InvalidInput naming its property).
func ValueRefs(props []Property) ([]string, error) {
	var ids []string
	for _, p := range props {
		if !IsValueRef(p.Value) {
			continue
		}
		id, _, err := ParseValueRef(p.Value)
		if err != nil {
			return nil, Errorf(CodeInvalidInput, "property %s: %s", p.Name, AsError(err).Message)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Holds reports whether props hold the reference to the value id in any
// property.
func Holds(props []Property, id string) bool {
	for _, p := range props {
		if IsValueRef(p.Value) && p.Value.Str()[len(ValueRefPrefix):] == id {
			return true
		}
	}
	return false
}

// Claims is what the decider needs to check references: the decision's
// time and the claim window (DefaultClaimWindow when zero).
type Claims struct {
	Now    time.Time
	Window time.Duration
}

// check refuses the references of props that cur (the entity as it is
// before the write, nil when absent) does not hold in the same property
// and that are not younger than the window, or malformed. A reference's
// time more than a window ahead of Now is refused too: no upload makes
// one, and it would stay claimable for as long as it is ahead.
func (c Claims) check(cur *Entity, props []Property) error {
	w := c.Window
	if w <= 0 {
		w = DefaultClaimWindow
	}
	for _, p := range props {
		if !IsValueRef(p.Value) {
			continue
		}
		_, at, err := ParseValueRef(p.Value)
		if err != nil {
			return Errorf(CodeInvalidInput, "property %s: %s", p.Name, AsError(err).Message)
		}
		if cur != nil {
			if v, ok := cur.Get(p.Name); ok && v.Equal(p.Value) {
				continue // held already: no new claim
			}
		}
		if age := c.Now.Sub(at); age >= w || age <= -w {
			return Errorf(CodeInvalidInput, "property %s: the large value %s was uploaded at %s, more than %v from now: a value is claimed by a write within %v of its upload (upload it again)",
				p.Name, p.Value.Str(), at.Format(time.RFC3339), w, w)
		}
	}
	return nil
}
