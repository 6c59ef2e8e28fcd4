package jsonv

import (
	"bytes"
	"errors"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The reference implementation below is deliberately naive: recursive
// descent, a regexp for numbers, a map for duplicate keys, a tree for the
// canonical form. It shares no code with the package, so the fuzz tests can
// hold the two against each other.

// node is a parsed JSON value.
type node struct {
	kind  byte   // 'o' object, 'a' array, 's' string, 'n' number, 'l' literal
	text  string // number or literal as written; string unescaped
	keys  []string
	elems []*node // object values (parallel to keys) or array elements
}

var refNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`)

type refParser struct {
	b        []byte
	i        int
	depthMax int
}

var errRef = errors.New("reference parser refuses the value")

// refParse parses b under the package's rules, recursing at most depthMax
// deep (plus one frame for the value that exceeds it).
func refParse(b []byte, depthMax int) (*node, error) {
	p := &refParser{b: b, depthMax: depthMax}
	p.space()
	n, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(b) {
		return nil, errRef
	}
	return n, nil
}

func (p *refParser) space() {
	for p.i < len(p.b) && strings.IndexByte(" \t\n\r", p.b[p.i]) >= 0 {
		p.i++
	}
}

func (p *refParser) value(depth int) (*node, error) {
	if p.i >= len(p.b) {
		return nil, errRef
	}
	rest := p.b[p.i:]
	switch rest[0] {
	case '{', '[':
		if depth+1 > p.depthMax {
			return nil, errRef
		}
		if rest[0] == '{' {
			return p.object(depth + 1)
		}
		return p.array(depth + 1)
	case '"':
		s, err := p.str()
		return &node{kind: 's', text: s}, err
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(rest, []byte(lit)) {
			p.i += len(lit)
			return &node{kind: 'l', text: lit}, nil
		}
	}
	if m := refNumber.Find(rest); m != nil {
		p.i += len(m)
		return &node{kind: 'n', text: string(m)}, nil
	}
	return nil, errRef
}

func (p *refParser) object(depth int) (*node, error) {
	n := &node{kind: 'o'}
	seen := map[string]bool{}
	p.i++
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return n, nil
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, errRef
		}
		k, err := p.str()
		if err != nil || seen[k] {
			return nil, errRef
		}
		seen[k] = true
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, errRef
		}
		p.i++
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		n.keys = append(n.keys, k)
		n.elems = append(n.elems, v)
		if done, err := p.separator('}'); done || err != nil {
			return n, err
		}
	}
}

func (p *refParser) array(depth int) (*node, error) {
	n := &node{kind: 'a'}
	p.i++
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return n, nil
	}
	for {
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, v)
		if done, err := p.separator(']'); done || err != nil {
			return n, err
		}
	}
}

// separator consumes ',' (and the space after it) or the closing byte.
func (p *refParser) separator(closing byte) (bool, error) {
	p.space()
	if p.i >= len(p.b) {
		return false, errRef
	}
	switch p.b[p.i] {
	case ',':
		p.i++
		p.space()
		return false, nil
	case closing:
		p.i++
		return true, nil
	}
	return false, errRef
}

func (p *refParser) str() (string, error) {
	var sb strings.Builder
	p.i++
	for p.i < len(p.b) {
		r, size := utf8.DecodeRune(p.b[p.i:])
		switch {
		case r == utf8.RuneError && size == 1, r < 0x20:
			return "", errRef
		case r == '"':
			p.i++
			return sb.String(), nil
		case r == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			sb.WriteRune(r)
		default:
			sb.WriteRune(r)
			p.i += size
		}
	}
	return "", errRef
}

func (p *refParser) escape() (rune, error) {
	if p.i+1 >= len(p.b) {
		return 0, errRef
	}
	if i := strings.IndexByte(`"\/bfnrt`, p.b[p.i+1]); i >= 0 {
		p.i += 2
		return rune("\"\\/\b\f\n\r\t"[i]), nil
	}
	hi, ok := p.u4(p.i)
	if !ok {
		return 0, errRef
	}
	p.i += 6
	if !utf16.IsSurrogate(hi) {
		return hi, nil
	}
	lo, ok := p.u4(p.i)
	if r := utf16.DecodeRune(hi, lo); ok && r != utf8.RuneError {
		p.i += 6
		return r, nil
	}
	return 0, errRef
}

// u4 decodes a \uXXXX escape at i.
func (p *refParser) u4(i int) (rune, bool) {
	if i+6 > len(p.b) || p.b[i] != '\\' || p.b[i+1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.b[i+2:i+6]), 16, 32)
	return rune(v), err == nil
}

// refCanonical spells n in the canonical form, as the package doc defines
// it, from the tree.
func refCanonical(n *node) string {
	var sb strings.Builder
	refWrite(&sb, n)
	return sb.String()
}

func refWrite(sb *strings.Builder, n *node) {
	switch n.kind {
	case 'o':
		order := make([]int, len(n.keys))
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(i, j int) bool { return n.keys[order[i]] < n.keys[order[j]] })
		sb.WriteByte('{')
		for j, i := range order {
			if j > 0 {
				sb.WriteByte(',')
			}
			refQuote(sb, n.keys[i])
			sb.WriteByte(':')
			refWrite(sb, n.elems[i])
		}
		sb.WriteByte('}')
	case 'a':
		sb.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				sb.WriteByte(',')
			}
			refWrite(sb, e)
		}
		sb.WriteByte(']')
	case 's':
		refQuote(sb, n.text)
	default:
		sb.WriteString(n.text)
	}
}

func refQuote(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r < 0x20:
			if i := strings.IndexRune("\b\f\n\r\t", r); i >= 0 {
				sb.WriteByte('\\')
				sb.WriteByte("bfnrt"[i])
			} else {
				sb.WriteString(`\u00`)
				sb.WriteString(strconv.FormatInt(int64(r)>>4, 16))
				sb.WriteString(strconv.FormatInt(int64(r)&0xf, 16))
			}
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
}
