package engine

import (
	"strings"
	"testing"
	"unicode/utf16"
)

// utf16Units is UTF16Len's reference: the string converted to UTF-16. An
// invalid byte becomes U+FFFD, one unit, as UTF16Len counts it.
func utf16Units(s string) int { return len(utf16.Encode([]rune(s))) }

func TestUTF16Len(t *testing.T) {
	for _, s := range []string{
		"", "a", "abcdefg", "abcdefgh", "abcdefghi",
		strings.Repeat("x", 1000),
		"é", "aaaaaaaé", "aaaaaaaaé", "éaaaaaaaa",
		"日本語のテキスト", "😀", "aaaaaaa😀aaaaaaaaaaaaaaa", strings.Repeat("ab😀cdéfgh", 37),
		"\xff", "aaaaaaa\xffaaaaaaaa", "\xf0\x9f\x98", "aaaaaaaa\xf0\x9f\x98", // invalid, and cut
		"\x00\x7f\x00\x7f\x00\x7f\x00\x7f\x80",
	} {
		if got, want := UTF16Len(s), utf16Units(s); got != want {
			t.Errorf("UTF16Len(%q) = %d, want %d", s, got, want)
		}
	}
}

func FuzzUTF16Len(f *testing.F) {
	for _, s := range []string{"", "abcdefgh", "aaaaaaaé", "😀😀", "\xffabcdefgh", "abcdefg\xf0\x9f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := UTF16Len(s), utf16Units(s); got != want {
			t.Fatalf("UTF16Len(%q) = %d, want %d", s, got, want)
		}
	})
}

// BenchmarkUTF16Len counts the sample entity's padding: 900 bytes of
// ASCII, as most values are.
func BenchmarkUTF16Len(b *testing.B) {
	s := strings.Repeat("0123456789", 90)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if UTF16Len(s) != len(s) {
			b.Fatal("wrong length")
		}
	}
}
