//go:build invariants

package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// checkPrecheck: in a build with the invariants tag, Precheck fingerprints
// the state before and after each dry run and panics if the fingerprint
// moved: a handler that wrote before deciding it mutates is caught by every
// test and simulator run of such a build, not left to convention.
const checkPrecheck = true

// fingerprint is a hash of everything a command could change: the state's
// encoding (records, steps, starts, the key-value store, watches, retired
// records, schedules), its counters, the sizes of every index the encoding
// leaves out, the change feed's bookkeeping and the copy-on-write marks.
// Search hints and scratch buffers are not part of it: a dry run may move
// them.
func (s *State) fingerprint() [32]byte {
	h := sha256.New()
	if err := s.Encode(h); err != nil {
		panic("fsm: fingerprint: " + err.Error())
	}
	var b []byte
	for _, n := range []int{s.due.Len(), s.leases.Len(), s.wkeys.Len(), s.wexecs.Len(), s.ended.Len(),
		s.schedDue.Len(), s.list.workflows.Len(), s.list.parents.Len(), s.list.feed.n} {
		b = binary.AppendUvarint(b, uint64(n))
	}
	for _, n := range s.list.counts {
		b = binary.AppendUvarint(b, uint64(n))
	}
	b = fmt.Appendf(b, "%+v %d %d %d %v", s.meta, s.list.feed.sweep, s.gen, s.copies, s.trackEnded)
	h.Write(b)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// unchanged panics if the state's fingerprint is no longer before's.
func (s *State) unchanged(before [32]byte, c *Command) {
	if s.fingerprint() != before {
		panic("fsm: the precheck of a " + c.Kind.String() + " command changed the state")
	}
}
