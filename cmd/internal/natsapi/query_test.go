package natsapi

import (
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections/query"
)

// TestQueryToken: a continuation reads back as written, keys with any
// characters included; anything else is InvalidContinuationToken.
func TestQueryToken(t *testing.T) {
	for _, tok := range []token{
		{hold: 1, from: query.Continuation{PartitionKey: "p", RowKey: "r"}},
		{hold: 1 << 40, desc: true, asOf: 77, from: query.Continuation{PartitionKey: "a!b/c", RowKey: ""}},
		{from: query.Continuation{PartitionKey: "", RowKey: "ü ~ !"}},
	} {
		s := tok.format()
		got, err := parseToken(s)
		if err != nil || got != tok {
			t.Errorf("%q read back as %+v (%v), want %+v", s, got, err, tok)
		}
	}
	for _, s := range []string{"", "q1!", "q2!a!1!0!cA!cg", "q1!x!1!0!cA!cg", "q1!a!1!0!cA", "q1!a!zz~!0!cA!cg", "q1!a!1!0!cA!c@", "q1!a!1!-1!cA!cg"} {
		if _, err := parseToken(s); err == nil {
			t.Errorf("%q was read", s)
		} else if code := engine.ErrorCode(err); code != CodeInvalidContinuation {
			t.Errorf("%q: code %s", s, code)
		}
	}
}
