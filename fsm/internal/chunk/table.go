package chunk

import (
	"slices"

	"github.com/execstore/execstore/fsm/internal/record"
)

// The admission table's chunks hold 1<<SlotsShift slots; arrays indexed by
// status have StatusCap entries.
const (
	SlotsShift = 8
	SlotsSize  = 1 << SlotsShift
	StatusCap  = 8
)

// Slots is one chunk of the admission table: for each of its admission
// numbers, the stored record (nil once retired) and its status, and counts
// of its slots by status.
type Slots struct {
	e    [SlotsSize]*record.Stored
	st   [SlotsSize]record.Status // the status of each slot's record; 0: empty
	n    [StatusCap]uint16        // slots by status
	live uint16                   // slots with a record
	gen  uint32                   // the generation of the state that made it
}

// Rec returns the record in slot j (an admission number's low bits), or nil.
func (c *Slots) Rec(j uint64) *record.Stored { return c.e[j&(SlotsSize-1)] }

// Status returns the status in slot j; 0: empty.
func (c *Slots) Status(j uint64) record.Status { return c.st[j&(SlotsSize-1)] }

// Counts returns the chunk's count of slots by status.
func (c *Slots) Counts() [StatusCap]uint16 { return c.n }

// Live returns the number of slots with a record.
func (c *Slots) Live() uint16 { return c.live }

// Put sets slot j to record e of status st (nil and 0 empty it) and keeps
// the counts. It reports the statuses whose count left 0 (in) and reached 0
// (out), one bit each (bit st), with bit 0 for the count of records. It
// panics on a chunk of another generation than gen: get the chunk from
// Table.Writable first.
func (c *Slots) Put(j uint64, e *record.Stored, st record.Status, gen uint32) (in, out uint8) {
	if c.gen != gen {
		panic("chunk: a slot written in a chunk of another state's generation")
	}
	j &= SlotsSize - 1
	old := c.st[j]
	c.e[j] = e
	if old == st {
		return 0, 0
	}
	c.st[j] = st
	if old != 0 {
		if c.n[old]--; c.n[old] == 0 {
			out |= 1 << old
		}
	}
	if st != 0 {
		if c.n[st]++; c.n[st] == 1 {
			in |= 1 << st
		}
	}
	switch {
	case old == 0:
		if c.live++; c.live == 1 {
			in |= 1
		}
	case st == 0:
		if c.live--; c.live == 0 {
			out |= 1
		}
	}
	return in, out
}

// Table is the admission table's list of chunks: chunk i holds admission
// numbers (base+i)<<SlotsShift to (base+i+1)<<SlotsShift - 1. A Table is
// shared with a copy of the state by copying the value: its arrays are
// copied by the first write of a state of another generation.
type Table struct {
	base   uint64
	chunks []*Slots // nil: every slot of it retired
	at0    []int64  // the admission time of each chunk's first number
	gen    uint32   // the generation of chunks' and at0's arrays
}

// Base returns the chunk number of the first chunk.
func (t *Table) Base() uint64 { return t.base }

// Len returns the number of chunks, empty ones included.
func (t *Table) Len() int { return len(t.chunks) }

// Chunk returns the i-th chunk (chunk number Base()+i), nil if empty.
func (t *Table) Chunk(i int) *Slots { return t.chunks[i] }

// At0 returns the admission time of the i-th chunk's first number.
func (t *Table) At0(i int) int64 { return t.at0[i] }

// SearchAt returns the index of the first chunk whose first number was
// admitted at or after at (Len(): none).
func (t *Table) SearchAt(at int64) int {
	k, _ := slices.BinarySearch(t.at0, at)
	return k
}

// Get returns the record with admission number no, or nil.
func (t *Table) Get(no uint64) *record.Stored {
	i := no>>SlotsShift - t.base
	if no>>SlotsShift < t.base || i >= uint64(len(t.chunks)) || t.chunks[i] == nil {
		return nil
	}
	return t.chunks[i].e[no&(SlotsSize-1)]
}

// StatusOf returns the status in the slot of admission number no (0: none).
func (t *Table) StatusOf(no uint64) record.Status {
	i := no>>SlotsShift - t.base
	if no>>SlotsShift < t.base || i >= uint64(len(t.chunks)) || t.chunks[i] == nil {
		return 0
	}
	return t.chunks[i].st[no&(SlotsSize-1)]
}

// own makes the chunk list writable by a state of generation gen.
func (t *Table) own(gen uint32) {
	if t.gen != gen {
		t.chunks, t.at0 = slices.Clone(t.chunks), slices.Clone(t.at0)
		t.gen = gen
	}
}

// Writable returns the chunk of admission number no as the state of
// generation gen may write it: the chunk itself if that state made it,
// else a copy put in its place. It creates the chunk (its first number
// admitted at time at) if it is the next one.
func (t *Table) Writable(no uint64, at int64, gen uint32) *Slots {
	t.own(gen)
	if len(t.chunks) == 0 {
		t.base = no >> SlotsShift
	}
	i := no>>SlotsShift - t.base
	for uint64(len(t.chunks)) <= i {
		t.chunks = append(t.chunks, nil)
		t.at0 = append(t.at0, at)
	}
	c := t.chunks[i]
	switch {
	case c == nil:
		c = &Slots{gen: gen}
		t.chunks[i] = c
	case c.gen != gen:
		cp := *c
		cp.gen = gen
		c = &cp
		t.chunks[i] = c
	}
	return c
}

// Drop drops the chunk of admission number no, which no longer holds a
// record, and the empty chunks at the front (the newest chunk is kept for
// its time), for a state of generation gen.
func (t *Table) Drop(no uint64, gen uint32) {
	t.own(gen)
	i := no>>SlotsShift - t.base
	if c := t.chunks[i]; c != nil && c.live != 0 {
		panic("chunk: a chunk dropped with records in it")
	}
	t.chunks[i] = nil
	for len(t.chunks) > 1 && t.chunks[0] == nil {
		t.chunks, t.at0 = t.chunks[1:], t.at0[1:]
		t.base++
	}
}
