package wire

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/engine"
)

// Metadata is the OData metadata level of entity JSON.
type Metadata int

// Metadata levels of the Azure Tables protocol.
const (
	NoMetadata Metadata = iota
	MinimalMetadata
	FullMetadata
)

// timeLayout has exactly seven fractional digits, as Azure writes.
const timeLayout = "2006-01-02T15:04:05.0000000Z"

// FormatTime formats ticks as Azure does: UTC with seven fractional digits.
func FormatTime(ticks int64) string { return string(appendTime(nil, ticks)) }

// appendTime appends ticks as FormatTime does, without time.Format's
// layout interpretation for the years 0 to 9999.
func appendTime(dst []byte, ticks int64) []byte {
	t := engine.TicksToTime(ticks).UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, timeLayout)
	}
	hour, min, sec := t.Clock()
	frac := t.Nanosecond() / 100
	var b [28]byte
	put := func(at, width, v int) {
		for i := at + width - 1; i >= at; i-- {
			b[i] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, 4, year)
	b[4] = '-'
	put(5, 2, int(month))
	b[7] = '-'
	put(8, 2, day)
	b[10] = 'T'
	put(11, 2, hour)
	b[13] = ':'
	put(14, 2, min)
	b[16] = ':'
	put(17, 2, sec)
	b[19] = '.'
	put(20, 7, frac)
	b[27] = 'Z'
	return append(dst, b[:]...)
}

// ParseTime parses an RFC 3339 time into ticks: with its zone (Z or an
// offset) and at most seven fractional digits, the resolution of a tick.
// A time without a zone or with finer digits is refused rather than read
// as UTC or truncated, so that two different inputs are not one value.
func ParseTime(s string) (int64, error) {
	// The fraction, if any, follows "2006-01-02T15:04:05".
	if len(s) > 20 && (s[19] == '.' || s[19] == ',') {
		if n := digitsEnd([]byte(s), 20) - 20; n > 7 {
			return 0, fmt.Errorf("%q has %d fractional digits; the limit is 7 (100 ns)", s, n)
		}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, err
	}
	return engine.TimeToTicks(t), nil
}

// AppendEntityJSON appends e as an Azure Tables entity JSON object.
func AppendEntityJSON(dst []byte, e *engine.Entity, etag string, meta Metadata) []byte {
	dst = append(dst, '{')
	first := true
	key := func(k string) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendString(dst, k)
		dst = append(dst, ':')
	}
	annotate := func(name, typ string) {
		if meta != NoMetadata {
			key(name + "@odata.type")
			dst = appendString(dst, typ)
		}
	}
	if meta != NoMetadata && etag != "" {
		key("odata.etag")
		dst = appendString(dst, etag)
	}
	key("PartitionKey")
	dst = appendString(dst, e.PartitionKey)
	key("RowKey")
	dst = appendString(dst, e.RowKey)
	if e.Timestamp != 0 {
		if meta == FullMetadata {
			annotate("Timestamp", "Edm.DateTime")
		}
		key("Timestamp")
		dst = append(appendTime(append(dst, '"'), e.Timestamp), '"')
	}
	for _, p := range e.Properties {
		v := p.Value
		switch v.Type() {
		case engine.TypeString:
			key(p.Name)
			dst = appendString(dst, v.Str())
		case engine.TypeInt32:
			key(p.Name)
			dst = strconv.AppendInt(dst, v.Int(), 10)
		case engine.TypeBoolean:
			key(p.Name)
			dst = strconv.AppendBool(dst, v.Boolean())
		case engine.TypeDouble:
			f := v.Float()
			switch {
			case math.IsNaN(f), math.IsInf(f, 0):
				annotate(p.Name, "Edm.Double")
				key(p.Name)
				s := "NaN"
				if math.IsInf(f, 1) {
					s = "Infinity"
				} else if math.IsInf(f, -1) {
					s = "-Infinity"
				}
				dst = appendString(dst, s)
			default:
				if meta == FullMetadata {
					annotate(p.Name, "Edm.Double")
				}
				key(p.Name)
				dst = appendDouble(dst, f)
			}
		case engine.TypeInt64:
			annotate(p.Name, "Edm.Int64")
			key(p.Name)
			dst = append(dst, '"')
			dst = strconv.AppendInt(dst, v.Int(), 10)
			dst = append(dst, '"')
		case engine.TypeDateTime:
			annotate(p.Name, "Edm.DateTime")
			key(p.Name)
			dst = append(appendTime(append(dst, '"'), v.Ticks()), '"')
		case engine.TypeGuid:
			annotate(p.Name, "Edm.Guid")
			key(p.Name)
			dst = appendString(dst, v.GuidString())
		case engine.TypeBinary:
			annotate(p.Name, "Edm.Binary")
			key(p.Name)
			dst = append(dst, '"')
			dst = base64.StdEncoding.AppendEncode(dst, v.Bytes())
			dst = append(dst, '"')
		}
	}
	return append(dst, '}')
}

// appendDouble writes a finite double so that it reads back as a double:
// always with a '.' or an exponent (5 is written 5.0).
func appendDouble(dst []byte, f float64) []byte {
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'g', -1, 64)
	if !bytes.ContainsAny(dst[start:], ".eE") {
		dst = append(dst, '.', '0')
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// Bit tricks on eight bytes at once (SWAR): lsb has the low bit of every
// byte set, msb the high bit.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
// Runs of bytes that need no escaping are copied whole: entity values are
// mostly plain text, and this runs for every value a query returns.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0 // s[start:i] is plain and not yet copied
	for i := 0; i < len(s); {
		// Eight bytes at a time while none needs escaping: no control
		// character, quote, backslash or non-ASCII byte (a byte of v is
		// zero exactly when (v-lsb)&^v&msb has its high bit).
		for ; i+8 <= len(s); i += 8 {
			w := s[i : i+8] // one bounds check; the loads combine into one
			x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
				uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
			q, bs := x^(lsb*'"'), x^(lsb*'\\')
			if (x|(x-lsb*0x20)&^x|(q-lsb)&^q|(bs-lsb)&^bs)&msb != 0 {
				break
			}
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue // valid UTF-8 is copied as it is
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendJSONString appends s as a JSON string.
func AppendJSONString(dst []byte, s string) []byte { return appendString(dst, s) }
