package wal

import "encoding/binary"

// isPadding reports whether b, which starts where an entry would, is padding: non-empty and
// all zeros. An entry never starts with a zero byte (its length is at least a frame's).
func isPadding(b []byte) bool {
	return len(b) > 0 && b[0] == 0 && allZero(b)
}

// allZero reports whether every byte of b is zero.
func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// trimZeros drops the zero bytes b ends with.
func trimZeros(b []byte) []byte {
	i := len(b)
	for i > 0 && b[i-1] == 0 {
		i--
	}
	return b[:i]
}
