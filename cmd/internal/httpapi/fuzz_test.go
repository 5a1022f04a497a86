package httpapi

import (
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/projections/query"
)

// FuzzToken: any continuation a client sends back is either refused with
// InvalidContinuationToken or parsed; what the host formats parses back to
// the same token.
func FuzzToken(f *testing.F) {
	f.Add("1!a!1f!cA", "1!MDAx", uint64(7), false, "p", "r")
	f.Add("1!d!0!", "1!", uint64(0), true, "", "")
	f.Add("x", "y", uint64(1<<63), true, "ü'!", "\x00")
	f.Fuzz(func(t *testing.T, npk, nrk string, hold uint64, desc bool, pk, rk string) {
		if tok, err := parseToken(npk, nrk); err != nil {
			if engine.ErrorCode(err) != codeInvalidContinuation {
				t.Fatalf("%q %q: %v", npk, nrk, err)
			}
		} else if a, b := tok.format(); a != npk || b != nrk {
			// Parsing is strict enough that a token has one spelling
			// (modulo base36 leading zeros, which format never writes).
			if again, err := parseToken(a, b); err != nil || again != tok {
				t.Fatalf("%q %q → %+v → %q %q", npk, nrk, tok, a, b)
			}
		}
		want := token{hold: hold, desc: desc, from: query.Continuation{PartitionKey: pk, RowKey: rk}}
		a, b := want.format()
		got, err := parseToken(a, b)
		if err != nil || got != want {
			t.Fatalf("%+v → %q %q → %+v, %v", want, a, b, got, err)
		}
	})
}

// FuzzParseBatch: any body is parsed or refused with a coded error; never a
// panic, never more operations than the limit plus one.
func FuzzParseBatch(f *testing.F) {
	f.Add([]byte("--batch_b1\r\nContent-Type: multipart/mixed; boundary=changeset_c1\r\n\r\n--changeset_c1\r\nContent-Type: application/http\r\n\r\nPOST http://h/a/T HTTP/1.1\r\nAccept: application/json\r\n\r\n{\"PartitionKey\":\"p\",\"RowKey\":\"r\"}\r\n--changeset_c1--\r\n--batch_b1--\r\n"))
	f.Add([]byte("--batch_b1\r\ncontent-type: multipart/mixed; boundary=changeset_c1\r\n\r\n\r\n--changeset_c1\r\ncontent-type: application/http\r\n\r\n\r\nDELETE http://h/a/T(PartitionKey='p',RowKey='r') HTTP/1.1\r\nif-match: *\r\n\r\n\r\n--changeset_c1--\r\n--batch_b1--"))
	f.Add([]byte("--batch_b1\r\n\r\n--batch_b1--"))
	f.Fuzz(func(t *testing.T, body []byte) {
		parts, err := parseBatch(body, "multipart/mixed; boundary=batch_b1")
		if err != nil {
			var e *engine.Error
			if e = engine.AsError(err); e.Code == engine.CodeInternalError {
				t.Fatalf("uncoded error: %v", err)
			}
			return
		}
		if len(parts) == 0 || len(parts) > maxBatchParts {
			t.Fatalf("%d parts", len(parts))
		}
		for _, p := range parts {
			if p.method == "" || strings.ContainsAny(p.method, " \r\n") {
				t.Fatalf("method %q", p.method)
			}
			_, _, _ = parseEntityPath(p.resource)
		}
	})
}

// FuzzEntityPath: key paths parse back to what keyPath wrote.
func FuzzEntityPath(f *testing.F) {
	f.Add("T", "p'q", "r")
	f.Add("Orders", "", "''")
	f.Fuzz(func(t *testing.T, table, pk, rk string) {
		if checkTablePath(table) != nil || strings.Contains(table, "(") {
			return
		}
		gotT, k, err := parseEntityPath(keyPath(table, pk, rk))
		if err != nil || gotT != table || k == nil || k.pk != pk || k.rk != rk {
			t.Fatalf("(%q, %q, %q) → %q %+v %v", table, pk, rk, gotT, k, err)
		}
	})
}
