package wal

import tidwall "github.com/execstore/execstore/internal/tidwall/wal"

// isPadding reports whether b, which starts where an entry would, is padding (see
// "Preallocated segments" in the package documentation): tidwall's rule, which it reads the
// tail by.
func isPadding(b []byte) bool { return tidwall.IsPadding(b) }

// trimZeros drops the zero bytes b ends with.
func trimZeros(b []byte) []byte {
	i := len(b)
	for i > 0 && b[i-1] == 0 {
		i--
	}
	return b[:i]
}
