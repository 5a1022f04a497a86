package wire

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// unescaped maps the letter of a one-letter escape to its byte.
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unquote returns the value of a string from the text between its quotes
// (validated by jsonScanner.str), as encoding/json reads it: escapes
// resolved, and each byte of invalid UTF-8 and each unpaired surrogate
// escape read as U+FFFD (the scanner refuses both, so that does not happen
// on its path). Text with nothing to resolve is returned as it is.
func unquote(text []byte) []byte {
	if bytes.IndexByte(text, '\\') < 0 && utf8.Valid(text) {
		return text
	}
	out := make([]byte, 0, len(text)+utf8.UTFMax)
	for i := 0; i < len(text); {
		switch c := text[i]; {
		case c == '\\' && text[i+1] == 'u':
			r := hex4(text[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				// A pair is read as one rune; anything else as U+FFFD.
				next := rune(-1)
				if i+6 <= len(text) && text[i] == '\\' && text[i+1] == 'u' {
					next = hex4(text[i+2:])
				}
				if r = utf16.DecodeRune(r, next); r != utf8.RuneError {
					i += 6
				}
			}
			out = utf8.AppendRune(out, r)
		case c == '\\':
			out = append(out, unescaped[text[i+1]])
			i += 2
		case c < utf8.RuneSelf:
			// The run of ASCII up to the next escape or non-ASCII byte.
			j := i + 1
			for j < len(text) && text[j] != '\\' && text[j] < utf8.RuneSelf {
				j++
			}
			out = append(out, text[i:j]...)
			i = j
		default:
			r, size := utf8.DecodeRune(text[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, r)
			} else {
				out = append(out, text[i:i+size]...)
			}
			i += size
		}
	}
	return out
}
