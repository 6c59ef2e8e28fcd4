package jsonv

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf16"
)

// runePalette holds the characters generated strings are made of: plain
// ASCII, everything the canonical form escapes, '/', and non-ASCII from
// each UTF-8 length, including U+2028 (which encoding/json escapes), the
// replacement character, a noncharacter and the last code point.
var runePalette = []rune{
	'a', 'b', 'Z', '0', ' ', '<', '&', '/', '"', '\\',
	0x00, '\b', '\t', '\n', '\f', '\r', 0x1f, 0x7f,
	'é', 'ß', 0x2028, 0xfffd, 0xffff, 0xe000, '😀', 0x10ffff,
}

var numberPalette = []string{"0", "-0", "1", "-1", "1.0", "1e0", "1E+2", "-12.5e-3", "12345678901234567890", "1e400"}

// genValue returns a random valid value at most depthMax deep.
func genValue(rng *rand.Rand, depthMax int) *node {
	k := rng.IntN(7)
	if depthMax == 0 {
		k = rng.IntN(3)
	}
	switch k {
	case 0:
		return &node{kind: 's', text: genString(rng)}
	case 1:
		return &node{kind: 'n', text: numberPalette[rng.IntN(len(numberPalette))]}
	case 2:
		return &node{kind: 'l', text: []string{"true", "false", "null"}[rng.IntN(3)]}
	case 3, 4:
		n := &node{kind: 'a'}
		for range rng.IntN(5) {
			n.elems = append(n.elems, genValue(rng, depthMax-1))
		}
		return n
	default:
		n := &node{kind: 'o'}
		seen := map[string]bool{}
		// Up to 40 members, so that some objects take the sorted
		// duplicate check.
		count := rng.IntN(6)
		if rng.IntN(8) == 0 {
			count = 10 + rng.IntN(31)
		}
		for range count {
			key := genString(rng)
			if seen[key] {
				continue
			}
			seen[key] = true
			n.keys = append(n.keys, key)
			n.elems = append(n.elems, genValue(rng, depthMax-1))
		}
		return n
	}
}

func genString(rng *rand.Rand) string {
	var sb strings.Builder
	for range rng.IntN(5) {
		sb.WriteRune(runePalette[rng.IntN(len(runePalette))])
	}
	return sb.String()
}

// render spells n as valid JSON, choosing at random the member order, the
// whitespace between tokens and the spelling of every string character, so
// that two renderings of one tree differ in everything the canonical form
// ignores.
func render(rng *rand.Rand, n *node) []byte {
	var sb strings.Builder
	space(rng, &sb)
	renderValue(rng, &sb, n)
	space(rng, &sb)
	return []byte(sb.String())
}

func renderValue(rng *rand.Rand, sb *strings.Builder, n *node) {
	switch n.kind {
	case 'o':
		sb.WriteByte('{')
		for j, i := range rng.Perm(len(n.keys)) {
			if j > 0 {
				sb.WriteByte(',')
			}
			space(rng, sb)
			renderString(rng, sb, n.keys[i])
			space(rng, sb)
			sb.WriteByte(':')
			space(rng, sb)
			renderValue(rng, sb, n.elems[i])
			space(rng, sb)
		}
		space(rng, sb)
		sb.WriteByte('}')
	case 'a':
		sb.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				sb.WriteByte(',')
			}
			space(rng, sb)
			renderValue(rng, sb, e)
			space(rng, sb)
		}
		space(rng, sb)
		sb.WriteByte(']')
	case 's':
		renderString(rng, sb, n.text)
	default:
		sb.WriteString(n.text)
	}
}

// space writes no whitespace half the time, else one to three bytes of it.
func space(rng *rand.Rand, sb *strings.Builder) {
	if rng.IntN(2) == 0 {
		return
	}
	for range 1 + rng.IntN(3) {
		sb.WriteByte(" \t\n\r"[rng.IntN(4)])
	}
}

func renderString(rng *rand.Rand, sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for _, r := range s {
		mustEscape := r < 0x20 || r == '"' || r == '\\'
		switch {
		case !mustEscape && rng.IntN(3) > 0:
			sb.WriteRune(r)
		case strings.ContainsRune("\"\\/\b\f\n\r\t", r) && rng.IntN(2) == 0:
			i := strings.IndexRune("\"\\/\b\f\n\r\t", r)
			sb.WriteByte('\\')
			sb.WriteByte(`"\/bfnrt`[i])
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			writeU(rng, sb, hi)
			writeU(rng, sb, lo)
		default:
			writeU(rng, sb, r)
		}
	}
	sb.WriteByte('"')
}

// writeU writes \uXXXX, in upper or lower case hex at random.
func writeU(rng *rand.Rand, sb *strings.Builder, r rune) {
	h := strconv.FormatInt(int64(r), 16)
	h = strings.Repeat("0", 4-len(h)) + h
	if rng.IntN(2) == 0 {
		h = strings.ToUpper(h)
	}
	sb.WriteString(`\u` + h)
}
