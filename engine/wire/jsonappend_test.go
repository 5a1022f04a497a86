package wire

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/engine"
)

// TestAppendTime checks the hand-written time format against time.Format
// over random instants of the years 0 to 9999 and a few edges.
func TestAppendTime(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 1))
	lo, hi := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC)
	ticks := []int64{0, -1, 1, engine.TimeToTicks(lo), engine.TimeToTicks(hi), engine.TimeToTicks(hi) + 1, engine.TimeToTicks(lo) - 1}
	for i := 0; i < 100000; i++ {
		ticks = append(ticks, engine.TimeToTicks(lo)+r.Int64N(engine.TimeToTicks(hi)-engine.TimeToTicks(lo)))
	}
	for _, tk := range ticks {
		if got, want := FormatTime(tk), engine.TicksToTime(tk).Format(timeLayout); got != want {
			t.Fatalf("seed %d: ticks %d: %s, want %s", seed, tk, got, want)
		}
	}
}

// TestAppendString checks that every string, valid UTF-8 or not, comes out
// as a JSON string that decodes to it (invalid bytes as U+FFFD each).
func TestAppendString(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, 2))
	alphabet := []string{"a", "Z", " ", "\"", "\\", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "é", "€", "\u2028", "\u2029", "😀", "\xff", "\xe2\x82", "/"}
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := r.IntN(20); n > 0; n-- {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := b.String()
		out := appendString(nil, s)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("seed %d: %q → %s: %v", seed, s, out, err)
		}
		var want strings.Builder
		for j := 0; j < len(s); {
			c, size := utf8.DecodeRuneInString(s[j:])
			want.WriteRune(c) // RuneError for an invalid byte
			j += size
		}
		if got != want.String() || strings.Contains(string(out), "\u2028") {
			t.Fatalf("seed %d: %q → %s → %q", seed, s, out, got)
		}
	}
}

func BenchmarkAppendEntityJSON(b *testing.B) {
	e := engine.NewEntity("Sales", "000123",
		engine.Property{Name: "Name", Value: engine.String("Jones, Margaret Anne (Sales)")},
		engine.Property{Name: "Notes", Value: engine.String(strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 12))},
		engine.Property{Name: "Hired", Value: engine.DateTimeTicks(engine.TimeToTicks(time.Date(2012, 3, 1, 9, 0, 0, 0, time.UTC)))},
		engine.Property{Name: "Salary", Value: engine.Double(50000.25)},
		engine.Property{Name: "Serial", Value: engine.Int64(123456789)})
	e.Timestamp = engine.TimeToTicks(time.Now())
	b.ReportAllocs()
	var buf []byte
	for i := 0; i < b.N; i++ {
		buf = AppendEntityJSON(buf[:0], e, `W/"1.2.3"`, MinimalMetadata)
	}
	b.SetBytes(int64(len(buf)))
}
