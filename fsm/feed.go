package fsm

import (
	"cmp"
	"slices"

	"github.com/execstore/execstore/internal/mutant"

	"github.com/tidwall/btree"
)

// feedEntry is an entry of the change log: the change at position Seq, of
// the record with admission number No, at time At. It is live while that
// record exists and its ChangeSeq is Seq.
type feedEntry struct {
	Seq uint64
	No  uint64
	At  int64
}

// chunkCap is the most entries a chunk of the change log holds: 256
// (Sizes.FeedChunk; the simulator makes it small).
func (f *feed) chunkCap() int { return f.sizes.withDefaults().FeedChunk }

// feedChunk is a run of the change log in position order. Lo is the least
// position it may hold, fixed when the chunk is created: the chunks' Lo
// order them, and a chunk holds positions from its Lo to the next chunk's.
//
// ents' backing array is shared with every copy of the chunk: it is only
// ever appended to (a copy's slice never reaches past its own length), and
// a sweep writes the live entries to a new array.
type feedChunk struct {
	Lo   uint64
	ents []feedEntry
	gen  uint32 // see State.gen
}

func feedChunkLess(a, b *feedChunk) bool { return a.Lo < b.Lo }

// feed is the change log: chunks of entries by position, appended at the
// end and swept from the front.
type feed struct {
	chunks *btree.BTreeG[*feedChunk] // nil until the first change
	n      int                       // entries, live or not
	sweep  uint64                    // the Lo of the chunk the next sweep step compacts
	sizes  Sizes                     // the state's (see SetSizes); zero fields: the defaults
}

// append adds the entry of a new change, whose position is above every
// other.
func (f *feed) append(x feedEntry, gen uint32) {
	if f.chunks == nil {
		f.chunks = newTree(feedChunkLess)
	}
	f.n++
	c, ok := f.chunks.Max()
	switch {
	case !ok || len(c.ents) >= f.chunkCap():
		c = &feedChunk{Lo: x.Seq, ents: make([]feedEntry, 0, f.chunkCap()), gen: gen}
	case c.gen != gen:
		c = &feedChunk{Lo: c.Lo, ents: c.ents, gen: gen} // the array is only appended to
	default:
		c.ents = append(c.ents, x) // the newest chunk, this state's own
		return
	}
	c.ents = append(c.ents, x)
	f.chunks.Set(c)
}

// live reports whether x is the latest change of a record that exists.
func (x *feedEntry) live(adm *admissions) bool {
	e := adm.get(x.No)
	return e != nil && e.ChangeSeq() == x.Seq
}

// slack is how many entries over twice the records (Sizes.FeedSweep times;
// the simulator makes it once) the log may hold before the writer sweeps: a
// quarter chunk.
func (f *feed) slack() int { return f.chunkCap() / 4 }

// sweepIfOver compacts one chunk when the log holds more than twice as many
// entries as there are records (records), plus slack. (The last chunk,
// which changes append to, is not swept: the log may exceed the bound by up
// to a chunk.)
//
// Each change appends one entry and makes at most one other dead, so a
// sweep step, which drops every dead entry of one chunk (and merges it into
// the chunk before when both fit in one), keeps the log within the bound:
// while it is over the bound at least half of the log is dead, so a full
// pass of sweep steps (one per change) frees more than the changes in it
// add. A step costs at most two chunks' worth of copying: the writer does
// a bounded amount of work per change, never a pass over the whole log.
func (f *feed) sweepIfOver(records int, adm *admissions, gen uint32) {
	if f.n > f.sizes.withDefaults().FeedSweep*records+f.slack() {
		f.sweepStep(adm, gen)
	}
}

// sweepStep compacts the chunk at the sweep's position (never the last
// chunk, which changes append to) and moves the position on, back to the
// first chunk after the last.
func (f *feed) sweepStep(adm *admissions, gen uint32) {
	var c, after *feedChunk
	var prev *feedChunk
	tail, _ := f.chunks.Max()
	f.chunks.Descend(&feedChunk{Lo: f.sweep}, func(p *feedChunk) bool {
		if p.Lo < f.sweep {
			prev = p
			return false
		}
		return true
	})
	f.chunks.Ascend(&feedChunk{Lo: f.sweep}, func(p *feedChunk) bool {
		if c == nil {
			c = p
			return true
		}
		after = p
		return false
	})
	if c == nil || c == tail {
		// Back to the first chunk.
		f.sweep, prev, after = 0, nil, nil
		c, _ = f.chunks.Min()
		if c == tail {
			return
		}
		f.chunks.Ascend(&feedChunk{Lo: c.Lo + 1}, func(p *feedChunk) bool { after = p; return false })
	}
	live := 0
	for i := range c.ents {
		if c.ents[i].live(adm) {
			live++
		}
	}
	dead := len(c.ents) - live
	f.n -= dead
	if after != nil {
		f.sweep = after.Lo
	} else {
		f.sweep = 0
	}
	if prev != nil && prev != tail && len(prev.ents)+live <= f.chunkCap() {
		// Merge into the chunk before, which now holds up to the next one.
		ents := make([]feedEntry, 0, f.chunkCap())
		ents = append(ents, prev.ents...)
		ents = appendLive(ents, c.ents, adm)
		f.chunks.Delete(c)
		f.chunks.Set(&feedChunk{Lo: prev.Lo, ents: ents, gen: gen})
		return
	}
	if dead == 0 {
		return
	}
	if live == 0 {
		// The first chunk, now empty: the next one starts the log.
		f.chunks.Delete(c)
		return
	}
	f.chunks.Set(&feedChunk{Lo: c.Lo, ents: appendLive(make([]feedEntry, 0, live), c.ents, adm), gen: gen})
}

func appendLive(dst, src []feedEntry, adm *admissions) []feedEntry {
	drop := mutant.SweepDropsLive
	for i := range src {
		if src[i].live(adm) {
			if drop {
				drop = false
				continue
			}
			dst = append(dst, src[i])
		}
	}
	return dst
}

// ascend calls fn with the chunk that holds position seq or would, and the
// chunks after it, until fn returns false.
func (f *feed) ascend(seq uint64, fn func(c *feedChunk) bool) {
	if f.chunks == nil {
		return
	}
	start := &feedChunk{Lo: seq}
	f.chunks.Descend(start, func(c *feedChunk) bool { start = c; return false })
	f.chunks.Ascend(start, fn)
}

// lookup returns the entry at position seq, live or not.
func (f *feed) lookup(seq uint64) (feedEntry, bool) {
	var x feedEntry
	found := false
	f.ascend(seq, func(c *feedChunk) bool {
		i, ok := slices.BinarySearchFunc(c.ents, seq, func(x feedEntry, seq uint64) int { return cmp.Compare(x.Seq, seq) })
		if ok {
			x, found = c.ents[i], true
			return false
		}
		return i == len(c.ents) // not in this chunk's entries: it may be in the next
	})
	return x, found
}

// copy returns the log for a Copy of the state.
func (f *feed) copy() feed {
	c := *f
	if f.chunks != nil {
		c.chunks = f.chunks.Copy()
	}
	return c
}

// check verifies the log's order and bookkeeping: positions strictly grow
// across chunks and lie within each chunk's range, at most last; no chunk
// is empty; n counts the entries; each record has at most one live entry
// (checkList checks it has one).
func (f *feed) check(last uint64, adm *admissions) error {
	if f.chunks == nil {
		if f.n != 0 {
			return invariantErr("change log: counts entries it does not have")
		}
		return nil
	}
	var err error
	n := 0
	prev := uint64(0)
	var lo []uint64
	seen := map[uint64]bool{} // admission numbers with a live entry
	f.chunks.Scan(func(c *feedChunk) bool {
		lo = append(lo, c.Lo)
		if len(c.ents) == 0 || len(c.ents) > f.chunkCap() {
			err = invariantErr("change log: a chunk of " + itoa(uint64(len(c.ents))) + " entries")
			return false
		}
		for _, x := range c.ents {
			if x.Seq <= prev || x.Seq < c.Lo || x.Seq > last {
				err = invariantErr("change log: position " + itoa(x.Seq) + " out of order, out of its chunk or beyond " + itoa(last))
				return false
			}
			prev = x.Seq
			if x.live(adm) {
				if seen[x.No] {
					err = invariantErr("change log: two live changes of admission " + itoa(x.No))
					return false
				}
				seen[x.No] = true
			}
		}
		n += len(c.ents)
		return true
	})
	if err != nil {
		return err
	}
	if n != f.n {
		return invariantErr("change log: counts " + itoa(uint64(f.n)) + " entries, holds " + itoa(uint64(n)))
	}
	return nil
}
