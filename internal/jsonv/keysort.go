package jsonv

import (
	"bytes"
	"math/bits"
	"slices"
)

// sortItem stands for the j-th key of one object while the object's keys
// are sorted. Most comparisons are decided by prefix, the key's first 8
// bytes read as a big-endian number (shorter keys padded with zeros), which
// orders keys the way bytes.Compare does whenever the prefixes differ. Only
// keys that share a prefix cost a byte comparison, and the items are small
// enough that moving them is cheap.
type sortItem struct {
	prefix uint64
	j      uint32
}

// sortKeys returns the items of keys, the keys of one object in input
// order, sorted by their unescaped bytes and then by j, so that equal keys
// end up next to each other in input order. The result lives in s.items and
// is valid until the next call.
func (s *scratch) sortKeys(b []byte, keys []keyRef) []sortItem {
	if cap(s.items) < len(keys) {
		s.items = grown(s.items[:0], len(keys))
	}
	items := s.items[:len(keys)]
	for j, k := range keys {
		items[j] = sortItem{prefix: prefix8(s.keyBytes(b, k)), j: uint32(j)}
	}
	slices.SortFunc(items, func(x, y sortItem) int {
		switch {
		case x.prefix < y.prefix:
			return -1
		case x.prefix > y.prefix:
			return 1
		}
		if c := bytes.Compare(s.keyBytes(b, keys[x.j]), s.keyBytes(b, keys[y.j])); c != 0 {
			return c
		}
		return int(x.j) - int(y.j)
	})
	return items
}

func prefix8(k []byte) uint64 {
	if len(k) >= 8 {
		return uint64(k[0])<<56 | uint64(k[1])<<48 | uint64(k[2])<<40 | uint64(k[3])<<32 |
			uint64(k[4])<<24 | uint64(k[5])<<16 | uint64(k[6])<<8 | uint64(k[7])
	}
	var p uint64
	for i, c := range k {
		p |= uint64(c) << (56 - 8*i)
	}
	return p
}

// firstRepeat returns the index of the first key, in input order, that
// equals an earlier key of the same object, or -1 if the keys are unique.
//
// It groups keys by hash rather than sorting them by bytes: each key
// becomes one uint64 (hash bits above, index below), and a slice of
// integers sorts several times faster than items compared through a
// function. Keys with equal hash bits end up next to each other, and only
// those are compared byte by byte. The hash is fixed (the package takes no
// randomness), so a hostile value could make many keys collide; a run of
// more than hashRunMax equal hashes, which honest keys all but never
// produce, sends the object to the byte sort instead, which is
// O(n log n) whatever the keys are.
func (s *scratch) firstRepeat(b []byte, keys []keyRef) int {
	if len(keys) <= hashIndexMask {
		if dup, ok := s.firstRepeatHashed(b, keys, hashRunMax); ok {
			return dup
		}
	}
	return s.firstRepeatSorted(b, keys)
}

const (
	hashIndexBits = 20 // low bits of a packed hash that hold the key index
	hashIndexMask = 1<<hashIndexBits - 1
	hashRunMax    = 8
)

// firstRepeatHashed is firstRepeat by hash, or !ok if more than runMax keys
// share a hash.
func (s *scratch) firstRepeatHashed(b []byte, keys []keyRef, runMax int) (int, bool) {
	if cap(s.hashes) < len(keys) {
		s.hashes = grown(s.hashes[:0], len(keys))
	}
	hs := s.hashes[:len(keys)]
	for j, k := range keys {
		hs[j] = hashKey(s.keyBytes(b, k))&^hashIndexMask | uint64(j)
	}
	slices.Sort(hs)
	dup := -1
	for lo := 0; lo < len(hs); {
		hi := lo + 1
		for hi < len(hs) && hs[hi]&^hashIndexMask == hs[lo]&^hashIndexMask {
			hi++
		}
		if hi-lo > runMax {
			return 0, false
		}
		// Within a run, indexes ascend: y repeats a key if any x before it
		// in the run has the same bytes.
		for y := lo + 1; y < hi; y++ {
			jy := int(hs[y] & hashIndexMask)
			for x := lo; x < y && (dup < 0 || jy < dup); x++ {
				if bytes.Equal(s.keyBytes(b, keys[hs[x]&hashIndexMask]), s.keyBytes(b, keys[jy])) {
					dup = jy
				}
			}
		}
		lo = hi
	}
	return dup, true
}

// firstRepeatSorted is firstRepeat by sorting the keys' bytes. Sorting by
// (bytes, index) puts each run of equal keys together in input order, so
// the earliest second key of a run is the first repeat.
func (s *scratch) firstRepeatSorted(b []byte, keys []keyRef) int {
	dup := -1
	items := s.sortKeys(b, keys)
	for n := 1; n < len(items); n++ {
		x, y := items[n-1], items[n]
		if x.prefix == y.prefix && (dup < 0 || int(y.j) < dup) &&
			bytes.Equal(s.keyBytes(b, keys[x.j]), s.keyBytes(b, keys[y.j])) {
			dup = int(y.j)
		}
	}
	return dup
}

// hashKey is a small multiply-mix hash over 8-byte words. It need not be
// strong: collisions cost a byte comparison, and floods of them a sort.
func hashKey(k []byte) uint64 {
	const (
		p0 = 0xa0761d6478bd642f
		p1 = 0xe7037ed1a0b428db
	)
	h := uint64(len(k)) ^ p0
	for len(k) >= 8 {
		w := uint64(k[0]) | uint64(k[1])<<8 | uint64(k[2])<<16 | uint64(k[3])<<24 |
			uint64(k[4])<<32 | uint64(k[5])<<40 | uint64(k[6])<<48 | uint64(k[7])<<56
		h = mix(h^w, p1)
		k = k[8:]
	}
	var w uint64
	for i, c := range k {
		w |= uint64(c) << (8 * i)
	}
	return mix(h^w, p1^p0)
}

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
