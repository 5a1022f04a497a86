package wire

import (
	"strings"

	"github.com/cairn-dev/cairn/engine"
)

// Where an entity's keys come from: the body (ParseEntityJSON, an insert)
// or the URL (ParseEntityJSONAt, every other write over HTTP). Either way
// a key is a string, and "" is one; missing or null is not.

// ParseEntityJSONAt parses the body of a request whose URL names the
// entity's keys (pk, rk): the body may leave them out, but one it gives
// must be the URL's (or the URL's with each quote doubled, as a client that
// quotes keys for the URL may also write them), else
// DuplicatePropertiesSpecified. The entity has the URL's keys.
func ParseEntityJSONAt(data []byte, pk, rk string) (*engine.Entity, error) {
	e, given, err := parseEntity(data)
	if err != nil {
		return nil, err
	}
	same := func(body, url string) bool {
		return body == url || strings.Contains(url, "'") && body == strings.ReplaceAll(url, "'", "''")
	}
	switch {
	case given&givenPK != 0 && !same(e.PartitionKey, pk):
		return nil, engine.Errorf(engine.CodeDuplicatePropertiesSpecified, "PartitionKey is %q in the body but %q in the URL", e.PartitionKey, pk)
	case given&givenRK != 0 && !same(e.RowKey, rk):
		return nil, engine.Errorf(engine.CodeDuplicatePropertiesSpecified, "RowKey is %q in the body but %q in the URL", e.RowKey, rk)
	}
	e.PartitionKey, e.RowKey = pk, rk
	return e, nil
}

// keysGiven says which keys an entity object gave.
type keysGiven uint8

const (
	givenPK keysGiven = 1 << iota
	givenRK
)

// require refuses an entity without both keys.
func (g keysGiven) require() error {
	switch {
	case g&givenPK == 0:
		return engine.Errorf(engine.CodePropertiesNeedValue, "the entity has no PartitionKey (the empty string is a key; a missing one is not)")
	case g&givenRK == 0:
		return engine.Errorf(engine.CodePropertiesNeedValue, "the entity has no RowKey (the empty string is a key; a missing one is not)")
	}
	return nil
}
