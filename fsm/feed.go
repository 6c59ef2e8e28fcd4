package fsm

import (
	"github.com/execstore/execstore/fsm/internal/chunk"
	"github.com/execstore/execstore/internal/mutant"

	"github.com/tidwall/btree"
)

// feedEntry is an entry of the change log: the change at position Seq, of
// the record with admission number No, at time At. It is live while that
// record exists and its ChangeSeq is Seq.
type feedEntry = chunk.Entry

// chunkCap is the most entries a chunk of the change log holds: 256
// (Sizes.FeedChunk; the simulator makes it small).
func (f *feed) chunkCap() int { return f.sizes.withDefaults().FeedChunk }

// The change log's chunks are chunk.Feed: a run of entries in position
// order from the chunk's Lo, whose array is shared with the chunk's copies
// (it is only appended to) and which only the state of its generation
// writes.

// feed is the change log: chunks of entries by position, appended at the
// end and swept from the front.
type feed struct {
	chunks *btree.BTreeG[*chunk.Feed] // nil until the first change
	n      int                        // entries, live or not
	sweep  uint64                     // the Lo of the chunk the next sweep step compacts
	sizes  Sizes                      // the state's (see SetSizes); zero fields: the defaults
}

// append adds the entry of a new change, whose position is above every
// other.
func (f *feed) append(x feedEntry, gen uint32) {
	if f.chunks == nil {
		f.chunks = newTree(chunk.FeedLess)
	}
	f.n++
	c, ok := f.chunks.Max()
	if !ok || c.Len() >= f.chunkCap() {
		c = chunk.NewFeed(x.Seq, f.chunkCap(), gen)
	} else if o := c.Own(gen); o != c {
		c = o // a copy sharing the array, which is only appended to
	} else {
		c.Append(x, gen) // the newest chunk, this state's own
		return
	}
	c.Append(x, gen)
	f.chunks.Set(c)
}

// slack is how many entries over twice the records (Sizes.FeedSweep times;
// the simulator makes it once) the log may hold before the writer sweeps: a
// quarter chunk.
func (f *feed) slack() int { return f.chunkCap() / 4 }

// trigger is how many entries the log may hold for records records before
// the writer sweeps it: FeedSweep entries a record, plus slack.
func (f *feed) trigger(records int) int {
	return f.sizes.withDefaults().FeedSweep*records + f.slack()
}

// bound is the most entries the log holds for records records while the
// sweep works: twice the trigger, plus two chunks. CheckInvariants holds
// the log to it, so a sweep that stops moving, which keeps every change
// ever made while every read stays right, is a violation as soon as the
// dead entries pass it.
//
// Why a working sweep stays under it: once the log is over the trigger,
// every change, admission and retirement runs one sweep step, and a pass of
// steps visits each chunk but the last, dropping every entry that was dead
// when the pass reached it. So the dead entries at any time are at most the
// trigger's dead weight, those made since the pass went by (one per step,
// so at most one per chunk) and the last chunk. Chunks a step did not merge
// hold more than a chunk's worth with the one before, and chunks not yet
// swept are full, so there are at most 2n/FeedChunk+2 chunks for n entries:
// n ≤ trigger + 2n/FeedChunk + 2 + FeedChunk, which for chunks of 4 or more
// (Sizes) is under 2·trigger + 2·FeedChunk. (tests:
// TestTheChangeLogIsSweptToTwiceTheRecordsAndCopiesKeepTheirView and
// TestAnAdversaryKeepsTheChangeLogWithinItsBound measure how close they
// come.)
func (f *feed) bound(records int) int {
	return 2*f.trigger(records) + 2*f.chunkCap()
}

// sweepIfOver compacts one chunk when the log holds more than its trigger
// (FeedSweep entries a record, plus slack). (The last chunk, which changes
// append to, is not swept: the log may exceed the trigger by up to a
// chunk.)
//
// Each change appends one entry and makes at most one other dead, so a
// sweep step, which drops every dead entry of one chunk (and merges it into
// the chunk before when both fit in one), keeps the log near the trigger:
// while it is over, at least half of the log is dead, so a full pass of
// sweep steps (one per change) frees more than the changes in it add (bound
// says how far over it can go). A step costs at most two chunks' worth of copying: the writer does
// a bounded amount of work per change, never a pass over the whole log.
func (f *feed) sweepIfOver(records int, adm *admissions, gen uint32) {
	if f.n > f.trigger(records) {
		f.sweepStep(adm, gen)
	}
}

// sweepStep compacts the chunk at the sweep's position (never the last
// chunk, which changes append to) and moves the position on, back to the
// first chunk after the last.
func (f *feed) sweepStep(adm *admissions, gen uint32) {
	var c, after *chunk.Feed
	var prev *chunk.Feed
	tail, _ := f.chunks.Max()
	f.chunks.Descend(chunk.FeedKey(f.sweep), func(p *chunk.Feed) bool {
		if p.Lo() < f.sweep {
			prev = p
			return false
		}
		return true
	})
	f.chunks.Ascend(chunk.FeedKey(f.sweep), func(p *chunk.Feed) bool {
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
		f.chunks.Ascend(chunk.FeedKey(c.Lo()+1), func(p *chunk.Feed) bool { after = p; return false })
	}
	live := 0
	for i := range c.Len() {
		if x := c.Entry(i); x.Live(&adm.t) {
			live++
		}
	}
	dead := c.Len() - live
	f.n -= dead
	switch {
	case mutant.SweepStaysPut:
	case after != nil:
		f.sweep = after.Lo()
	default:
		f.sweep = 0
	}
	if prev != nil && prev != tail && prev.Len()+live <= f.chunkCap() {
		// Merge into the chunk before, which now holds up to the next one.
		m := chunk.NewFeed(prev.Lo(), f.chunkCap(), gen)
		for i := range prev.Len() {
			m.Append(prev.Entry(i), gen)
		}
		appendLive(m, c, adm, gen)
		f.chunks.Delete(c)
		f.chunks.Set(m)
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
	m := chunk.NewFeed(c.Lo(), live, gen)
	appendLive(m, c, adm, gen)
	f.chunks.Set(m)
}

// appendLive appends src's live entries to dst, a chunk of generation gen.
func appendLive(dst, src *chunk.Feed, adm *admissions, gen uint32) {
	drop := mutant.SweepDropsLive
	for i := range src.Len() {
		if x := src.Entry(i); x.Live(&adm.t) {
			if drop {
				drop = false
				continue
			}
			dst.Append(x, gen)
		}
	}
}

// ascend calls fn with the chunk that holds position seq or would, and the
// chunks after it, until fn returns false.
func (f *feed) ascend(seq uint64, fn func(c *chunk.Feed) bool) {
	if f.chunks == nil {
		return
	}
	start := chunk.FeedKey(seq)
	f.chunks.Descend(start, func(c *chunk.Feed) bool { start = c; return false })
	f.chunks.Ascend(start, fn)
}

// lookup returns the entry at position seq, live or not.
func (f *feed) lookup(seq uint64) (feedEntry, bool) {
	var x feedEntry
	found := false
	f.ascend(seq, func(c *chunk.Feed) bool {
		i, ok := c.Search(seq)
		if ok {
			x, found = c.Entry(i), true
			return false
		}
		return i == c.Len() // not in this chunk's entries: it may be in the next
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
// (checkList checks it has one); the log is within its bound for records
// records.
func (f *feed) check(last uint64, adm *admissions, records int) error {
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
	f.chunks.Scan(func(c *chunk.Feed) bool {
		lo = append(lo, c.Lo())
		if c.Len() == 0 || c.Len() > f.chunkCap() {
			err = invariantErr("change log: a chunk of " + itoa(uint64(c.Len())) + " entries")
			return false
		}
		for i := range c.Len() {
			x := c.Entry(i)
			if x.Seq <= prev || x.Seq < c.Lo() || x.Seq > last {
				err = invariantErr("change log: position " + itoa(x.Seq) + " out of order, out of its chunk or beyond " + itoa(last))
				return false
			}
			prev = x.Seq
			if x.Live(&adm.t) {
				if seen[x.No] {
					err = invariantErr("change log: two live changes of admission " + itoa(x.No))
					return false
				}
				seen[x.No] = true
			}
		}
		n += c.Len()
		return true
	})
	if err != nil {
		return err
	}
	if n != f.n {
		return invariantErr("change log: counts " + itoa(uint64(f.n)) + " entries, holds " + itoa(uint64(n)))
	}
	if b := f.bound(records); n > b {
		return invariantErr("change log: " + itoa(uint64(n)) + " entries for " + itoa(uint64(records)) +
			" records, over its bound of " + itoa(uint64(b)) + ": the sweep is not keeping up")
	}
	return nil
}
