package sim

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"strings"
)

// trace is a run's record: one line per operation and per crash, hashed as
// it grows. Generated execution IDs carry random bits, so the trace names them
// by order of appearance (g1, g2, ...): the same seed gives the same trace,
// byte for byte, and the same hash.
type trace struct {
	h       hash.Hash
	aliases map[string]string
	tail    []string // the latest lines, for a violation's report
	out     io.Writer
	seed    uint64
}

const traceTail = 40

func newTrace(seed uint64, out io.Writer) *trace {
	return &trace{h: sha256.New(), aliases: map[string]string{}, out: out, seed: seed}
}

// alias names an execution ID in the trace: user-chosen IDs as they are,
// generated ones by their order of appearance.
func (t *trace) alias(id string) string {
	if a, ok := t.aliases[id]; ok {
		return a
	}
	if !isGenerated(id) {
		return id
	}
	a := fmt.Sprintf("g%d", len(t.aliases)+1)
	t.aliases[id] = a
	return a
}

// isGenerated reports whether id has the shape of a store-generated ID: 26
// characters of Crockford's base32.
func isGenerated(id string) bool {
	if len(id) != 26 {
		return false
	}
	for _, r := range id {
		if !strings.ContainsRune("0123456789ABCDEFGHJKMNPQRSTVWXYZ", r) {
			return false
		}
	}
	return true
}

func (t *trace) line(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	t.h.Write([]byte(s))
	t.h.Write([]byte{'\n'})
	if len(t.tail) == traceTail {
		copy(t.tail, t.tail[1:])
		t.tail = t.tail[:traceTail-1]
	}
	t.tail = append(t.tail, s)
	if t.out != nil {
		fmt.Fprintf(t.out, "seed %d: %s\n", t.seed, s)
	}
}

func (t *trace) sum() [32]byte {
	var out [32]byte
	copy(out[:], t.h.Sum(nil))
	return out
}
