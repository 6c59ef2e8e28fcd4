package jsonv

import (
	"bytes"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// plain[c] is true for the bytes a string may hold as they are and that
// need no further look: printable ASCII other than '"' and '\\'. Everything
// else (the quote, a backslash, a control byte, the start of a multi-byte
// UTF-8 sequence) takes the slow path of scanString.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString scans the string whose opening quote is at i and returns the
// offset just past its closing quote and whether it holds any escape.
func scanString(b []byte, i int) (end int, escaped bool, err *Error) {
	start := i
	i++
	for {
		i = skipPlain(b, i)
		if i >= len(b) {
			return 0, false, errorAt(start, "unterminated string")
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i, err = scanEscape(b, i, start); err != nil {
				return 0, false, err
			}
		case c < 0x20:
			return 0, false, errorAt(i, "unescaped control character "+codePoint(rune(c))+" in string")
		default:
			// A decoder would replace a bad sequence with U+FFFD, so the
			// value would not come back as stored. utf8 also refuses
			// overlong forms and UTF-8-encoded surrogates.
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, errorAt(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
}

// skipPlain returns the offset of the first byte at or after i that is not
// plain. It tests eight bytes per step while eight remain: in the word w
// (byte k of the input is byte k of w, whatever the platform's byte
// order), the top bit of each byte of
//
//	(w - 0x20..) | ((w ^ 0x22..) - 0x01..) | ((w ^ 0x5c..) - 0x01..) | w
//
// is set where the byte is below 0x20, is '"', is '\\', or is 0x80 or
// above. A borrow can carry into a higher byte and set its bit falsely, but
// only out of a byte that is itself flagged, so the lowest flag is exact.
func skipPlain(b []byte, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for ; i+8 <= len(b); i += 8 {
		w := load64(b[i : i+8])
		m := (w - 0x20*ones) | ((w ^ '"'*ones) - ones) | ((w ^ '\\'*ones) - ones) | w
		if m &= highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(b) && plain[b[i]] {
		i++
	}
	return i
}

// load64 reads 8 bytes as a little-endian word (the compiler makes this a
// single load on common platforms).
func load64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// scanEscape scans the escape whose backslash is at i, in the string whose
// opening quote is at start, and returns the offset just past it.
func scanEscape(b []byte, i, start int) (int, *Error) {
	if i+1 >= len(b) {
		return 0, errorAt(start, "unterminated string")
	}
	switch c := b[i+1]; c {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case 'u':
	default:
		if c >= 0x21 && c < 0x7f {
			return 0, errorAt(i, `invalid escape \`+string(rune(c))+" in string")
		}
		return 0, errorAt(i, "invalid escape in string")
	}
	r, ok := hex4(b, i+2)
	if !ok {
		if i+6 > len(b) && allHex(b[i+2:]) {
			return 0, errorAt(start, "unterminated string")
		}
		return 0, errorAt(i, `invalid \u escape: want 4 hex digits`)
	}
	if !utf16.IsSurrogate(r) {
		return i + 6, nil
	}
	// A surrogate is only meaningful as a high half immediately followed by
	// a low half; decoders silently turn a lone one into U+FFFD.
	if r < 0xdc00 && i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
		if lo, ok := hex4(b, i+8); ok && 0xdc00 <= lo && lo <= 0xdfff {
			return i + 12, nil
		}
	}
	return 0, errorAt(i, `lone UTF-16 surrogate `+string(b[i:i+6])+" in string")
}

// hex4 decodes the four hex digits at i.
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		d, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | d
	}
	return r, true
}

func hexDigit(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10), true
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10), true
	}
	return 0, false
}

func allHex(b []byte) bool {
	for _, c := range b {
		if _, ok := hexDigit(c); !ok {
			return false
		}
	}
	return true
}

// decodeEscape decodes the escape at the start of raw, which MUST be
// valid (a surrogate pair counts as one escape), and returns the character
// and the escape's length.
func decodeEscape(raw []byte) (rune, int) {
	switch c := raw[1]; c {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, _ := hex4(raw, 2)
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		lo, _ := hex4(raw, 8)
		return utf16.DecodeRune(r, lo), 12
	default: // '"', '\\', '/'
		return rune(c), 2
	}
}

// unescapeInto writes the bytes that the body of a string (without its
// quotes) stands for into dst and returns how many it wrote. raw MUST have
// passed scanString, and dst MUST have room for len(raw) bytes: no escape
// is shorter than what it stands for.
func unescapeInto(dst, raw []byte) int {
	n := 0
	for {
		j := bytes.IndexByte(raw, '\\')
		if j < 0 {
			return n + copy(dst[n:], raw)
		}
		n += copy(dst[n:], raw[:j])
		r, size := decodeEscape(raw[j:])
		n += utf8.EncodeRune(dst[n:], r)
		raw = raw[j+size:]
	}
}

// appendRespelled appends the body of a string (without its quotes), which
// MUST have passed scanString, as a quoted string in the canonical
// spelling (see appendQuoted). Between escapes, a valid body holds no
// quote, backslash or control byte, so those runs are already canonical
// and are copied as they are; each escape is decoded and spelled anew.
func appendRespelled(dst, raw []byte) []byte {
	dst = append(dst, '"')
	for {
		j := bytes.IndexByte(raw, '\\')
		if j < 0 {
			dst = append(dst, raw...)
			return append(dst, '"')
		}
		dst = append(dst, raw[:j]...)
		r, size := decodeEscape(raw[j:])
		if r < 0x80 {
			dst = appendASCII(dst, byte(r))
		} else {
			dst = utf8.AppendRune(dst, r)
		}
		raw = raw[j+size:]
	}
}

// appendQuoted appends s, which MUST be valid UTF-8, as a JSON string in
// the one canonical spelling: only '"', '\\' and control bytes are
// escaped, with the short escapes where JSON has them and \u00xx (lower
// case) otherwise; everything else, including non-ASCII, is raw UTF-8.
// The bytes of a multi-byte sequence are all >= 0x80, so a byte-wise
// scan never splits one.
func appendQuoted(dst, s []byte) []byte {
	dst = append(dst, '"')
	done := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[done:i]...)
		dst = appendASCII(dst, c)
		done = i + 1
	}
	dst = append(dst, s[done:]...)
	return append(dst, '"')
}

// appendASCII appends the ASCII byte c in the canonical spelling.
func appendASCII(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	if c < 0x20 {
		const hex = "0123456789abcdef"
		return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
	}
	return append(dst, c)
}
