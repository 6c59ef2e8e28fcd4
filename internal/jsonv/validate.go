package jsonv

import (
	"bytes"
	"strconv"
)

// smallObjectKeys is how many keys an object may have before duplicate
// detection stops comparing each new key with all earlier ones (quadratic,
// but with no setup and cheap for the handful of keys params usually have)
// and instead checks all the object's keys at once when it closes (see
// firstRepeat).
const smallObjectKeys = 16

// validate scans b once, left to right, with an explicit stack of open
// containers. It reports the first problem met, except that a duplicate key
// in an object of more than smallObjectKeys keys is found when the object
// closes.
func (s *scratch) validate(b []byte, maxDepth int) *Error {
	if uint64(len(b)) > maxInputLen {
		return errorAt(0, "input too large")
	}
	s.stack = s.stack[:0]
	s.keys = s.keys[:0]
	s.arena = s.arena[:0]
	i := skipSpace(b, 0)
	for {
		// Invariant: i is where a value must start.
		var err *Error
		i, err = s.value(b, i, maxDepth)
		if err != nil {
			return err
		}
		if i < 0 {
			// A container opened: i is ^(start of its first value).
			i = ^i
			continue
		}
		var done bool
		i, done, err = s.next(b, i)
		if err != nil || done {
			return err
		}
	}
}

// value scans the value starting at i. For a scalar or an empty container
// it returns the offset just past it. For a non-empty container it pushes a
// frame and returns ^(offset of its first value), which is negative.
func (s *scratch) value(b []byte, i, maxDepth int) (int, *Error) {
	if i >= len(b) {
		return 0, unexpected(b, i, "a value")
	}
	switch c := b[i]; c {
	case '{', '[':
		if len(s.stack) >= maxDepth {
			return 0, errorAt(i, "nesting depth exceeds the limit of "+strconv.Itoa(maxDepth))
		}
		j := skipSpace(b, i+1)
		if c == '{' {
			if j < len(b) && b[j] == '}' {
				return j + 1, nil
			}
			s.pushFrame(frame{object: true, base: uint32(len(s.keys)), arenaBase: uint32(len(s.arena))})
			j, err := s.key(b, j, "an object key or '}'")
			return ^j, err
		}
		if j < len(b) && b[j] == ']' {
			return j + 1, nil
		}
		if j >= len(b) {
			return 0, unexpected(b, j, "a value or ']'")
		}
		s.pushFrame(frame{})
		return ^j, nil
	case '"':
		end, _, err := scanString(b, i)
		return end, err
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	default:
		if c == '-' || isDigit(c) {
			return scanNumber(b, i)
		}
		return 0, unexpected(b, i, "a value")
	}
}

// next is called with i just past a value. It closes the containers that
// end there and returns where the next value starts, or done when the
// top-level value has ended (followed by nothing but whitespace).
func (s *scratch) next(b []byte, i int) (int, bool, *Error) {
	for {
		i = skipSpace(b, i)
		n := len(s.stack)
		if n == 0 {
			if i < len(b) {
				return 0, false, unexpectedAfter(b, i)
			}
			return i, true, nil
		}
		f := s.stack[n-1]
		if i < len(b) {
			switch c := b[i]; {
			case c == ',' && f.object:
				i, err := s.key(b, skipSpace(b, i+1), "an object key")
				return i, false, err
			case c == ',':
				return skipSpace(b, i+1), false, nil
			case c == '}' && f.object:
				if err := s.closeObject(b, f); err != nil {
					return 0, false, err
				}
				s.stack = s.stack[:n-1]
				i++
				continue
			case c == ']' && !f.object:
				s.stack = s.stack[:n-1]
				i++
				continue
			}
		}
		if f.object {
			return 0, false, unexpected(b, i, "',' or '}'")
		}
		return 0, false, unexpected(b, i, "',' or ']'")
	}
}

// key scans an object key at i, records it in the innermost object, checks
// it against the object's earlier keys while the object is small, and
// returns where the member's value starts.
func (s *scratch) key(b []byte, i int, want string) (int, *Error) {
	if i >= len(b) || b[i] != '"' {
		return 0, unexpected(b, i, want)
	}
	end, escaped, err := scanString(b, i)
	if err != nil {
		return 0, err
	}
	k := keyRef{pos: uint32(i), lo: uint32(i + 1), hi: uint32(end - 1)}
	if escaped {
		k = s.pushUnescaped(i, b[i+1:end-1])
	}
	base := int(s.stack[len(s.stack)-1].base)
	if len(s.keys)-base < smallObjectKeys {
		kb := s.keyBytes(b, k)
		for _, prev := range s.keys[base:] {
			if bytes.Equal(s.keyBytes(b, prev), kb) {
				return 0, duplicateKey(i, kb)
			}
		}
	}
	s.pushKey(k)
	i = skipSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		return 0, unexpected(b, i, "':' after object key")
	}
	return skipSpace(b, i+1), nil
}

// closeObject finishes the duplicate check of a large object and pops its
// keys.
func (s *scratch) closeObject(b []byte, f frame) *Error {
	keys := s.keys[f.base:]
	if len(keys) > smallObjectKeys {
		if dup := s.firstRepeat(b, keys); dup >= 0 {
			return duplicateKey(int(keys[dup].pos), s.keyBytes(b, keys[dup]))
		}
	}
	s.keys = s.keys[:f.base]
	s.arena = s.arena[:f.arenaBase]
	return nil
}

// validateObject is validate for a value that must be an object. The kind
// is checked first, so a caller who sends an array learns that, rather
// than whatever is wrong deep inside it.
func (s *scratch) validateObject(b []byte, maxDepth int) *Error {
	i := skipSpace(b, 0)
	if i < len(b) {
		if kind := kindOf(b[i]); kind != "" {
			return errorAt(i, "top-level value is "+kind+", want an object")
		}
	}
	return s.validate(b, maxDepth)
}

// kindOf names the kind of value starting with c, or returns "" for an
// object or a byte that starts no value.
func kindOf(c byte) string {
	switch {
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == '-' || isDigit(c):
		return "a number"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	}
	return ""
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipSpace returns the offset of the first byte at or after i that is not
// JSON whitespace. Only the four RFC 8259 whitespace bytes count.
func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanNumber scans the RFC 8259 number at i:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// The value is not range-checked: numbers are kept as text.
func scanNumber(b []byte, i int) (int, *Error) {
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
		if i < len(b) && isDigit(b[i]) {
			return 0, errorAt(start, "invalid number: leading zero")
		}
	case i < len(b) && isDigit(b[i]):
		i = skipDigits(b, i+1)
	default:
		return 0, unexpected(b, i, "a digit after '-'")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, unexpected(b, i, "a digit after '.'")
		}
		i = skipDigits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, unexpected(b, i, "a digit in exponent")
		}
		i = skipDigits(b, i+1)
	}
	return i, nil
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// scanLiteral scans the literal lit (true, false or null) at i.
func scanLiteral(b []byte, i int, lit string) (int, *Error) {
	for j := 0; j < len(lit); j++ {
		if i+j >= len(b) || b[i+j] != lit[j] {
			return 0, unexpected(b, i+j, "literal "+lit)
		}
	}
	return i + len(lit), nil
}
