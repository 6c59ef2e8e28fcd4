package execstore

import (
	"crypto/rand"
	"encoding/binary"
	"io"
	"time"
)

// crockford is Crockford's base32 alphabet: no I, L, O or U, so IDs read
// aloud and copied by hand survive.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newID returns a 26-character ULID: 48 bits of milliseconds, then 80 random
// bits from bits (crypto/rand when nil). IDs sort by creation time, and a
// collision is not a practical concern; if a caller happened to choose the
// same string, the state machine derives a different unused ID (see fsm), so
// a generated ID is never a conflict.
func newID(now time.Time, bits io.Reader) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	if bits == nil {
		_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails (Go 1.24+)
	} else {
		_, _ = io.ReadFull(bits, b[6:])
	}
	var out [26]byte
	// 128 bits as 26 base32 digits: the first digit carries 3 bits.
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// idTime is the time a generated ID carries: the clock's on a single node
// (whose IDs then sort by creation, as the simulator relies on); on a
// replica the store's time (Now), which never goes back across a leader
// change, even when the new leader's clock is behind.
func (s *Store) idTime() time.Time { return s.commit.idTime() }
