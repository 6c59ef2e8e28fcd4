package jsonv

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// keySet lays keys out in one buffer and refers to them as the scan would.
func keySet(keys []string) ([]byte, []keyRef) {
	var b []byte
	refs := make([]keyRef, len(keys))
	for j, k := range keys {
		lo := len(b)
		b = append(b, k...)
		refs[j] = keyRef{pos: uint32(lo), lo: uint32(lo), hi: uint32(len(b))}
	}
	return b, refs
}

func bruteFirstRepeat(b []byte, keys []keyRef) int {
	for y := range keys {
		for x := range y {
			if bytes.Equal(b[keys[x].lo:keys[x].hi], b[keys[y].lo:keys[y].hi]) {
				return y
			}
		}
	}
	return -1
}

func maxCount(keys []string) int {
	count := map[string]int{}
	most := 0
	for _, k := range keys {
		count[k]++
		most = max(most, count[k])
	}
	return most
}

func TestFirstRepeatStrategiesAgreeWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	prefixes := []string{"", "k", "a_long_shared_prefix_", "\x00", "é"}
	for round := range 3000 {
		n := 1 + rng.IntN(80)
		space := 1 + rng.IntN(3*n) // fewer distinct keys than n makes repeats likely
		keys := make([]string, n)
		for j := range keys {
			keys[j] = prefixes[rng.IntN(len(prefixes))] + strconv.Itoa(rng.IntN(space))
		}
		b, refs := keySet(keys)
		want := bruteFirstRepeat(b, refs)
		var s scratch
		hashed, ok := s.firstRepeatHashed(b, refs, hashRunMax)
		// Without real collisions, only a key repeated more than
		// hashRunMax times makes a run long enough to give up.
		if ok && hashed != want || !ok && maxCount(keys) <= hashRunMax {
			t.Fatalf("round %d: firstRepeatHashed = %d, %v; want %d", round, hashed, ok, want)
		}
		if sorted := s.firstRepeatSorted(b, refs); sorted != want {
			t.Fatalf("round %d: firstRepeatSorted = %d, want %d", round, sorted, want)
		}
		if got := s.firstRepeat(b, refs); got != want {
			t.Fatalf("round %d: firstRepeat = %d, want %d", round, got, want)
		}
	}
}

func TestHashRunLongerThanTheLimitFallsBackToSorting(t *testing.T) {
	// A run of equal hashes is what a collision flood looks like; equal
	// keys make one without needing real collisions.
	b, refs := keySet(strings.Split("a,b,c,b,d", ","))
	var s scratch
	if _, ok := s.firstRepeatHashed(b, refs, 1); ok {
		t.Fatal("a run of 2 equal hashes passed a limit of 1")
	}
	if got := s.firstRepeatSorted(b, refs); got != 3 {
		t.Fatalf("firstRepeatSorted = %d, want 3", got)
	}
}

func TestPrefixOrderMatchesByteOrder(t *testing.T) {
	keys := []string{"", "\x00", "a", "a\x00", "ab", "abcdefg", "abcdefgh", "abcdefghi", "b", "é", "\xff"}
	for _, x := range keys {
		for _, y := range keys {
			px, py := prefix8([]byte(x)), prefix8([]byte(y))
			if px != py && (px < py) != (x < y) {
				t.Errorf("prefix8(%q) = %x, prefix8(%q) = %x: order differs from the bytes", x, px, y, py)
			}
		}
	}
}
