package jsonv

import (
	"math/rand/v2"
	"testing"
)

// TestSkipPlainMatchesAByteLoop checks the word-at-a-time scan against the
// table, around every byte value that borders a class and at every
// alignment.
func TestSkipPlainMatchesAByteLoop(t *testing.T) {
	edges := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', 0x23, '\\', 0x5b, 0x5d, 0x7e, 0x7f, 0x80, 0xa2, 0xdc, 0xff, 'a'}
	rng := rand.New(rand.NewPCG(3, 3))
	for range 20000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			if rng.IntN(4) == 0 {
				b[i] = edges[rng.IntN(len(edges))]
			} else {
				b[i] = byte(0x20 + rng.IntN(0x5f))
			}
		}
		i := rng.IntN(len(b) + 1)
		want := i
		for want < len(b) && plain[b[want]] {
			want++
		}
		if got := skipPlain(b, i); got != want {
			t.Fatalf("skipPlain(%q, %d) = %d, want %d", b, i, got, want)
		}
	}
}
