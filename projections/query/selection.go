package query

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/engine"
)

// Selection is a $select: the properties to return besides the keys,
// Timestamp and ETag, which always come back. nil selects everything.
type Selection map[string]bool

// ParseSelect reads a $select: property names separated by commas; "" or
// "*" is everything (a nil Selection). A name that is not a property's is
// an error saying which; the front doors give it their own code.
func ParseSelect(s string) (Selection, error) {
	if strings.TrimSpace(s) == "" || strings.TrimSpace(s) == "*" {
		return nil, nil
	}
	sel := Selection{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("$select has an empty property name: %q", s)
		}
		if !selectable(name) {
			return nil, fmt.Errorf("$select: %q is not a property name (a letter or _, then letters, digits or _; at most %d)", name, engine.MaxPropertyNameLen)
		}
		sel[name] = true
	}
	return sel, nil
}

// selectable reports whether name can name a property: valid UTF-8, an
// identifier as engine.ValidateProperties requires, within the length
// limit. (The keys and Timestamp are identifiers too.)
func selectable(name string) bool {
	if name == "" || !utf8.ValidString(name) || utf8.RuneCountInString(name) > engine.MaxPropertyNameLen {
		return false
	}
	for i, r := range name {
		if r != '_' && !unicode.IsLetter(r) && (i == 0 || !unicode.IsDigit(r)) {
			return false
		}
	}
	return true
}

// Project returns e itself when sel is nil, else a copy of e with only
// the selected properties (the property values are shared, not copied).
func (sel Selection) Project(e *engine.Entity) *engine.Entity {
	if sel == nil {
		return e
	}
	p := *e
	p.Properties = nil
	for _, prop := range e.Properties {
		if sel[prop.Name] {
			p.Properties = append(p.Properties, prop)
		}
	}
	return &p
}

// SelectNames is ParseSelect for a list of names (the NATS protocol's
// "select"): each must be one property name; none is everything.
func SelectNames(names []string) (Selection, error) {
	if len(names) == 0 {
		return nil, nil
	}
	sel := Selection{}
	for _, name := range names {
		if !selectable(name) {
			return nil, fmt.Errorf("select: %q is not a property name (a letter or _, then letters, digits or _; at most %d)", name, engine.MaxPropertyNameLen)
		}
		sel[name] = true
	}
	return sel, nil
}
