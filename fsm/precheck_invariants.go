//go:build invariants

package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"maps"
	"slices"
	"sync"

	"github.com/execstore/execstore/fsm/internal/chunk"
)

// invariantsBuild: in a build with the invariants tag, Precheck fingerprints
// the state before and after each dry run and panics if the fingerprint
// moved: a handler that wrote before deciding it mutates is caught by every
// test and simulator run of such a build, not left to convention. The same
// build fingerprints every Copy when it is taken and again when it is
// released: a write that skipped copy-on-write (a chunk of the listing
// indexes or of the change feed changed in place while a copy shared it)
// changes the copy, and Release panics. Package chunk refuses a write to a
// chunk of another generation than the writer says it has; this catches a
// writer that says a stale one.
const invariantsBuild = true

// fingerprint is a hash of everything a command could change: the state's
// encoding (records, steps, starts, the key-value store, watches, retired
// records, schedules), its counters, the sizes of every index the encoding
// leaves out, the change feed's bookkeeping and the copy-on-write marks.
// Search hints and scratch buffers are not part of it: a dry run may move
// them.
func (s *State) fingerprint() [32]byte {
	return s.print(true)
}

// print is the fingerprint, with or without the copy-on-write marks (the
// generation and the count of copies, which a copy of a copy moves).
func (s *State) print(marks bool) [32]byte {
	h := sha256.New()
	if err := s.Encode(h); err != nil {
		panic("fsm: fingerprint: " + err.Error())
	}
	var b []byte
	names := make([]string, 0, len(s.queueList))
	for _, q := range s.queueList {
		names = append(names, q.name)
	}
	slices.Sort(names)
	for _, n := range names {
		q := s.queues[n]
		b = fmt.Appendf(b, "%q %d ", n, q.live)
		for _, l := range q.lanes {
			b = fmt.Appendf(b, "%d:%d %d ", l.prio, l.due.Len(), l.leases.Len())
		}
		if k := q.keyed; k != nil {
			// The concurrency keys' bookkeeping, key by key (conckeys.go).
			b = fmt.Appendf(b, "keys %d %v %d %d ", k.limit, k.live, k.parked, len(k.keys))
			for _, key := range slices.Sorted(maps.Keys(k.keys)) {
				ks := k.keys[key]
				b = fmt.Appendf(b, "%q %d %d %d ", key, ks.holders, treeLen(ks.ready), treeLen(ks.parked))
			}
		}
	}
	for _, n := range []int{s.wkeys.Len(), s.wexecs.Len(), s.ended.Len(),
		s.schedDue.Len(), s.list.workflows.Len(), s.list.parents.Len(), s.list.feed.n, s.grantExp.Len(), s.grantLeases} {
		b = binary.AppendUvarint(b, uint64(n))
	}
	for _, n := range s.list.counts {
		b = binary.AppendUvarint(b, uint64(n))
	}
	b = fmt.Appendf(b, "%+v %d %v", s.meta, s.list.feed.sweep, s.trackEnded)
	if marks {
		b = fmt.Appendf(b, " %d %d", s.gen, s.copies)
	}
	h.Write(b)
	s.list.fingerprint(h)
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

// fingerprint hashes the contents of the chunked listing indexes, which the
// state's encoding leaves out (it rebuilds them): each admission slot's
// status and record, each workflow's and parent's postings, and each entry
// of the change feed.
func (l *listIndexes) fingerprint(h hash.Hash) {
	var b []byte
	t := &l.adm.t
	b = binary.AppendUvarint(b, t.Base())
	for i := range t.Len() {
		c := t.Chunk(i)
		if c == nil {
			b = append(b, 0xff)
			continue
		}
		for j := range uint64(admSize) {
			b = append(b, byte(c.Status(j)))
			if e := c.Rec(j); e != nil {
				b = binary.AppendUvarint(b, e.AdmitNo())
				b = binary.AppendUvarint(b, e.ChangeSeq())
			}
		}
		b = binary.AppendUvarint(b, uint64(c.Live()))
	}
	postings := func(name string, p *chunk.Postings) {
		b = append(b, name...)
		b = binary.AppendUvarint(b, uint64(p.Live()))
		b = binary.AppendUvarint(b, uint64(p.Total()))
		for k := range p.Runs() {
			r := p.Run(k)
			b = binary.AppendUvarint(b, uint64(r.Live()))
			for i := range r.Len() {
				b = binary.AppendUvarint(b, r.No(i))
			}
		}
	}
	l.workflows.Scan(func(w workflowCount) bool { postings(w.Name, w.p); return true })
	l.parents.Scan(func(g parentGroup) bool { postings(g.Parent, g.p); return true })
	if l.feed.chunks != nil {
		l.feed.chunks.Scan(func(c *chunk.Feed) bool {
			b = binary.AppendUvarint(b, c.Lo())
			for i := range c.Len() {
				x := c.Entry(i)
				b = binary.AppendUvarint(b, x.Seq)
				b = binary.AppendUvarint(b, x.No)
				b = binary.AppendVarint(b, x.At)
			}
			return true
		})
	}
	h.Write(b)
}

// sharedPrints holds the fingerprint of every unreleased copy, taken when
// it was copied (by any store of the process: tests run in parallel).
var sharedPrints sync.Map // *State → [32]byte

// shared remembers the fingerprint of a copy when it is taken.
func (c *State) shared() { sharedPrints.Store(c, c.print(false)) }

// unshared panics if a copy being released is not the state it was when it
// was taken.
func (c *State) unshared() {
	p, ok := sharedPrints.LoadAndDelete(c)
	if ok && c.print(false) != p.([32]byte) {
		panic("fsm: a copy of the state changed while it was shared: a write skipped copy-on-write")
	}
}
