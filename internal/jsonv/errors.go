package jsonv

import (
	"strconv"
	"unicode/utf8"
)

// Error says what is wrong with a value and where.
type Error struct {
	// Offset is the byte offset into the input of the problem: the
	// offending byte, or the start of the offending token when the token
	// as a whole is wrong (a duplicate key, an unterminated string, a bad
	// escape, a number with a leading zero), or the input's length when
	// the input ends too soon.
	Offset int
	// Reason is a short English description for people, such as
	// `duplicate object key "a"`; programs should not parse it.
	Reason string
}

func (e *Error) Error() string {
	return "json: " + e.Reason + " at offset " + strconv.Itoa(e.Offset)
}

func errorAt(offset int, reason string) *Error {
	return &Error{Offset: offset, Reason: reason}
}

// unexpected reports that the byte at i (or the end of the input) is not
// what the grammar wants there.
func unexpected(b []byte, i int, want string) *Error {
	if i >= len(b) {
		return errorAt(i, "unexpected end of input, want "+want)
	}
	what, ok := describe(b, i)
	if !ok {
		return errorAt(i, what)
	}
	return errorAt(i, "unexpected character "+what+", want "+want)
}

// unexpectedAfter reports bytes after a complete top-level value.
func unexpectedAfter(b []byte, i int) *Error {
	what, ok := describe(b, i)
	if !ok {
		return errorAt(i, what)
	}
	return errorAt(i, "unexpected character "+what+" after top-level value")
}

// describe quotes the character at i for an error message, or, when the
// bytes there are not UTF-8, says so and returns false.
func describe(b []byte, i int) (string, bool) {
	r, size := utf8.DecodeRune(b[i:])
	if r == utf8.RuneError && size == 1 {
		return "invalid UTF-8", false
	}
	return strconv.QuoteRune(r), true
}

// codePoint spells r, which MUST be below U+10000, as U+XXXX.
func codePoint(r rune) string {
	const hex = "0123456789ABCDEF"
	return "U+" + string([]byte{hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf]})
}

// duplicateKeyShownMax bounds how much of a duplicate key an error repeats,
// so that a hostile key cannot make the error message huge.
const duplicateKeyShownMax = 64

// duplicateKey reports that the key at offset pos, whose unescaped bytes
// are key, repeats an earlier key of the same object. The key is shown in
// canonical JSON spelling.
func duplicateKey(pos int, key []byte) *Error {
	shown, cut := key, false
	if len(shown) > duplicateKeyShownMax {
		n := duplicateKeyShownMax
		for n > 0 && !utf8.RuneStart(shown[n]) {
			n--
		}
		shown, cut = shown[:n], true
	}
	reason := "duplicate object key " + string(appendQuoted(nil, shown))
	if cut {
		reason += "..."
	}
	return errorAt(pos, reason)
}
