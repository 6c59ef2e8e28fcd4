package jsonv

import "bytes"

// canonical appends the canonical form of b to dst. b MUST have passed
// validate with the same scratch, which is what lets this second pass skip
// every check: it only copies, re-spells strings and reorders members.
//
// Members are written in input order as they are met; when an object
// closes, its members' spans are sorted by key and, unless they were in
// order already, the object's body is rewritten in place.
// Inner objects are finished before their parent sorts, so a parent moves
// their final text as opaque bytes.
func (s *scratch) canonical(dst, b []byte) []byte {
	s.stack = s.stack[:0]
	s.keys = s.keys[:0]
	s.spans = s.spans[:0]
	s.arena = s.arena[:0]
	out := dst
	i := skipSpace(b, 0)
	for {
		// Invariant: i is where a value starts.
		switch c := b[i]; c {
		case '{', '[':
			out = append(out, c)
			j := skipSpace(b, i+1)
			if b[j] == c+2 { // '{'+2 is '}', '['+2 is ']'
				out = append(out, b[j])
				i = j + 1
				break
			}
			s.pushFrame(frame{object: c == '{', base: uint32(len(s.keys)), arenaBase: uint32(len(s.arena))})
			i = j
			if c == '{' {
				out, i = s.canonicalKey(out, b, j)
			}
			continue
		case '"':
			out, i = canonicalString(out, b, i)
		default: // number or literal: kept as written
			j := tokenEnd(b, i)
			out = append(out, b[i:j]...)
			i = j
		}
		var done bool
		if out, i, done = s.canonicalNext(out, b, i); done {
			return out
		}
	}
}

// canonicalNext is called with i just past a value. It closes the
// containers that end there and returns where the next value starts, or
// done at the end of the top-level value.
func (s *scratch) canonicalNext(out, b []byte, i int) ([]byte, int, bool) {
	for {
		i = skipSpace(b, i)
		n := len(s.stack)
		if n == 0 {
			return out, i, true
		}
		f := s.stack[n-1]
		if f.object {
			s.spans[len(s.spans)-1].end = len(out)
		}
		c := b[i]
		if c == ',' {
			out = append(out, ',')
			i = skipSpace(b, i+1)
			if f.object {
				out, i = s.canonicalKey(out, b, i)
			}
			return out, i, false
		}
		// c closes the innermost container.
		if f.object {
			out = s.sortMembers(out, b, f)
			s.keys = s.keys[:f.base]
			s.spans = s.spans[:f.base]
			s.arena = s.arena[:f.arenaBase]
		}
		out = append(out, c)
		s.stack = s.stack[:n-1]
		i++
	}
}

// canonicalKey writes the key at i and its colon, opens a member for it,
// and returns where the member's value starts.
func (s *scratch) canonicalKey(out, b []byte, i int) ([]byte, int) {
	end, escaped := stringEnd(b, i)
	k := keyRef{pos: uint32(i), lo: uint32(i + 1), hi: uint32(end - 1)}
	start := len(out)
	if escaped {
		k = s.pushUnescaped(i, b[i+1:end-1])
		out = appendQuoted(out, s.keyBytes(b, k))
	} else {
		// Without escapes, a valid string is already canonical.
		out = append(out, b[i:end]...)
	}
	out = append(out, ':')
	s.pushKey(k)
	s.pushSpan(span{start: start})
	i = skipSpace(b, end) // at the colon
	return out, skipSpace(b, i+1)
}

// canonicalString writes the string at i canonically spelled and returns
// the offset just past it.
func canonicalString(out, b []byte, i int) ([]byte, int) {
	end, escaped := stringEnd(b, i)
	if !escaped {
		return append(out, b[i:end]...), end
	}
	return appendRespelled(out, b[i+1:end-1]), end
}

// sortMembers puts the members of the object f, whose canonical text ends
// out, in order of their unescaped keys. Keys are unique (validate saw to
// that), so the order is total. The sorted body is assembled past the end
// of out, in the caller's buffer, and copied back over the original: the
// output's own spare capacity is the scratch.
func (s *scratch) sortMembers(out, b []byte, f frame) []byte {
	keys, spans := s.keys[f.base:], s.spans[f.base:]
	sorted := true
	for j := 1; j < len(keys) && sorted; j++ {
		sorted = bytes.Compare(s.keyBytes(b, keys[j-1]), s.keyBytes(b, keys[j])) < 0
	}
	if sorted {
		return out
	}
	lo, hi := spans[0].start, spans[len(spans)-1].end
	if hi != len(out) {
		panic("jsonv: object body does not end the output")
	}
	for n, it := range s.sortKeys(b, keys) {
		if n > 0 {
			out = append(out, ',')
		}
		sp := spans[it.j]
		out = append(out, out[sp.start:sp.end]...)
	}
	if len(out)-hi != hi-lo {
		panic("jsonv: reordered members changed length")
	}
	copy(out[lo:hi], out[hi:])
	return out[:hi]
}

// stringEnd returns the offset just past the string whose opening quote is
// at i, and whether it holds any escape. The string MUST be valid.
func stringEnd(b []byte, i int) (int, bool) {
	escaped := false
	i++
	for {
		i = skipPlain(b, i)
		switch b[i] {
		case '"':
			return i + 1, escaped
		case '\\':
			// Skipping the escaped byte is enough: the rest of a \uXXXX
			// escape is hex digits, which are plain.
			escaped = true
			i += 2
		default:
			i++
		}
	}
}

// tokenEnd returns the offset just past the number or literal at i, which
// MUST be valid: it stops at the first byte no number or literal holds.
func tokenEnd(b []byte, i int) int {
	for i < len(b) {
		c := b[i]
		if !(isDigit(c) || 'a' <= c && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E') {
			break
		}
		i++
	}
	return i
}
