package fsm

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// EncodedLen is the encoding's length with the time counted at its widest,
// for every kind and for random commands: a caller that sizes a command
// before the time is stamped never underestimates it.
func TestEncodedLenBoundsTheEncoding(t *testing.T) {
	check := func(c Command) {
		t.Helper()
		got := EncodedLen(&c)
		enc := len(AppendEncode(nil, &c))
		want := enc - uvarintLen(uint64(c.Now)) + binary.MaxVarintLen64
		if c.Kind == KindPutSchedule { // its first occurrence is stamped after it is sized too
			want += binary.MaxVarintLen64 - uvarintLen(uint64(c.At))
		}
		if got != want {
			t.Fatalf("%v: EncodedLen = %d, want %d (encoding is %d bytes)", c.Kind, got, want, enc)
		}
		c.Now = maxTime
		if enc := len(AppendEncode(nil, &c)); got < enc {
			t.Fatalf("%v: EncodedLen = %d, less than the %d bytes of the widest time", c.Kind, got, enc)
		}
	}
	for _, c := range sampleCommands() {
		check(c)
	}
	big := Command{Kind: KindSaveStep, Now: 1, ExecutionID: "e", Token: 1 << 40, Key: "k", Value: string(make([]byte, 300_000))}
	check(big)
	for seed := uint64(1); seed <= 20; seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 2)), now: 1000}
		for range 200 {
			check(g.next())
		}
	}
}
