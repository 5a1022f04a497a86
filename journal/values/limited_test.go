package values

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestLimitedFillsAndPaces: a body read a byte at a time still gives the
// store whole chunks (one message each), the wait is asked every
// inFlightCheck chunks with the count given, the last chunk may be short,
// a body past the limit fails, and a body cut short fails rather than
// end.
func TestLimitedFillsAndPaces(t *testing.T) {
	const chunk = 1024
	body := bytes.Repeat([]byte("v"), chunk*(2*inFlightCheck)+100)
	var asked []uint64
	l := &limited{r: iotest.OneByteReader(bytes.NewReader(body)), n: int64(len(body)), full: int64(len(body)),
		pace: func(sent uint64) error { asked = append(asked, sent); return nil }}
	buf := make([]byte, chunk)
	var sizes []int
	for {
		n, err := l.Read(buf)
		if n > 0 {
			sizes = append(sizes, n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(sizes) != 2*inFlightCheck+1 || sizes[0] != chunk || sizes[len(sizes)-1] != 100 {
		t.Fatalf("%d chunks, first %d, last %d", len(sizes), sizes[0], sizes[len(sizes)-1])
	}
	if len(asked) != 2 || asked[0] != inFlightCheck || asked[1] != 2*inFlightCheck {
		t.Fatalf("the wait asked at %v", asked)
	}

	over := &limited{r: bytes.NewReader(body), n: chunk, full: chunk}
	if _, err := io.ReadAll(over); !errors.As(err, new(errTooLarge)) {
		t.Fatalf("past the limit: %v", err)
	}
	cut := &limited{r: io.MultiReader(bytes.NewReader(body[:10]), iotest.ErrReader(io.ErrUnexpectedEOF)), n: int64(len(body)), full: int64(len(body))}
	if n, err := cut.Read(buf); n != 0 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a body cut short: %d, %v", n, err)
	}
}
