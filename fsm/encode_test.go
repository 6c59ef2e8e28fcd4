package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// randomState applies n random commands with the given seed.
func randomState(seed uint64, n int) *State {
	g := &gen{rng: rand.New(rand.NewPCG(seed, 3)), now: 1000}
	s := New()
	for i := 0; i < n; i++ {
		c := g.next()
		g.observe(s.Apply(&c))
	}
	return s
}

func encodeState(t testing.TB, s *State) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestEncodedStateDecodesToAnEqualState(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		s := randomState(seed, 500)
		got, err := DecodeState(bufio.NewReader(bytes.NewReader(encodeState(t, s))))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := got.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if s.trackEnded {
			got.TrackRetirement() // as a store with retention on does
		}
		if want, have := dumpOf(s), dumpOf(got); !reflect.DeepEqual(want, have) {
			t.Fatalf("seed %d: decoded state differs:\n%s", seed, cmp.Diff(want, have, cmpOpts))
		}
		if err := got.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		// And it behaves the same from here on.
		g := &gen{rng: rand.New(rand.NewPCG(seed, 4)), now: s.meta.Now}
		for i := 0; i < 200; i++ {
			c := g.next()
			r1, r2 := s.Apply(&c), got.Apply(&c)
			g.observe(r1)
			if !reflect.DeepEqual(r1, r2) {
				t.Fatalf("seed %d op %d: results differ after decoding:\n%s", seed, i, cmp.Diff(r1, r2, cmpOpts))
			}
		}
	}
}

func TestDecodeStateRefusesEveryTruncation(t *testing.T) {
	b := encodeState(t, randomState(7, 200))
	for n := 0; n < len(b); n += 1 + n/50 {
		if _, err := DecodeState(bufio.NewReader(bytes.NewReader(b[:n]))); !errors.Is(err, ErrDecode) {
			t.Fatalf("prefix %d/%d: err = %v, want ErrDecode", n, len(b), err)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add(encodeState(f, New()))
	f.Add(encodeState(f, randomState(1, 50)))
	f.Add(encodeState(f, randomState(2, 150)))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeState(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error does not wrap ErrDecode: %v", err)
			}
			return
		}
		// A state that decodes is usable: applying commands never panics.
		g := &gen{rng: rand.New(rand.NewPCG(1, 1)), now: s.meta.Now + 1}
		for i := 0; i < 20; i++ {
			c := g.next()
			g.observe(s.Apply(&c))
		}
	})
}
