package chunk

import (
	"cmp"
	"slices"
)

// Entry is an entry of the change log: the change at position Seq, of the
// record with admission number No, at time At. It is live while that record
// exists and its ChangeSeq is Seq.
type Entry struct {
	Seq uint64
	No  uint64
	At  int64
}

// Live reports whether x is the latest change of a record that exists in t.
func (x *Entry) Live(t *Table) bool {
	e := t.Get(x.No)
	return e != nil && e.ChangeSeq() == x.Seq
}

// Feed is a chunk of the change log, a run of entries in position order.
// Its Lo is the least position it may hold, fixed when the chunk is made:
// the chunks' Lo order them, and a chunk holds positions from its Lo to the
// next chunk's.
//
// Its array of entries is shared with every copy of the chunk (see Own): it
// is only ever appended to (a copy's slice never reaches past its own
// length), and a sweep writes the live entries to a new chunk.
type Feed struct {
	lo   uint64
	ents []Entry
	gen  uint32
}

// FeedLess orders chunks by Lo.
func FeedLess(a, b *Feed) bool { return a.lo < b.lo }

// NewFeed returns an empty chunk from position lo, with room for capacity
// entries, of a state of generation gen.
func NewFeed(lo uint64, capacity int, gen uint32) *Feed {
	return &Feed{lo: lo, ents: make([]Entry, 0, capacity), gen: gen}
}

// FeedKey returns a chunk that only searches a tree of chunks by Lo: it
// belongs to no state (generation 0, which no state has) and holds nothing.
func FeedKey(lo uint64) *Feed { return &Feed{lo: lo} }

// Lo returns the least position the chunk may hold.
func (c *Feed) Lo() uint64 { return c.lo }

// Len returns the number of entries, live or not.
func (c *Feed) Len() int { return len(c.ents) }

// Entry returns the i-th entry.
func (c *Feed) Entry(i int) Entry { return c.ents[i] }

// Search returns the index of the entry at position seq, or of the first
// after it, and whether the entry is there.
func (c *Feed) Search(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(c.ents, seq, func(x Entry, seq uint64) int { return cmp.Compare(x.Seq, seq) })
}

// Own returns c if the state of generation gen may write it, else a copy
// that it may, sharing c's array.
func (c *Feed) Own(gen uint32) *Feed {
	if c.gen == gen {
		return c
	}
	return &Feed{lo: c.lo, ents: c.ents, gen: gen}
}

// Append appends entry x, whose position is above every other. It panics on
// a chunk of another generation than gen (see Own).
func (c *Feed) Append(x Entry, gen uint32) {
	if c.gen != gen {
		panic("chunk: an entry appended to a chunk of another state's generation")
	}
	c.ents = append(c.ents, x)
}
