package fsm

import (
	"cmp"
	"slices"
)

// postings is the list of admission numbers of one group (a workflow, or a
// parent's children), in number order: admissions only append to it, so it
// needs no tree. A retired record's number stays in its chunk, dead (its
// slot in the admission table is empty), until that chunk is more dead than
// live; then the chunk is rewritten with its live numbers only (merged into
// the chunk before when both fit in one), or dropped when none is left.
//
// Copy-on-write: a postings list, or a chunk, is written in place only if it
// is of the state's generation; otherwise the writer works on a copy (a
// chunk's array may be shared, since it is only appended to, and a rewrite
// makes a new one).
type postings struct {
	chunks []*postChunk
	live   int // numbers of records that exist
	total  int // a workflow's: its records, retired ones included (a parent's: 0)
	gen    uint32
}

// postChunk is a run of a postings list.
type postChunk struct {
	nos  []uint64
	live int
	gen  uint32
}

// postChunkCap is the most numbers a chunk holds.
const postChunkCap = 256

// own returns p, or a copy of it, writable by a state of generation gen.
func (p *postings) own(gen uint32) *postings {
	if p.gen == gen {
		return p
	}
	return &postings{chunks: slices.Clone(p.chunks), live: p.live, total: p.total, gen: gen}
}

// add appends an admission number above every other. p must be owned.
func (p *postings) add(no uint64, gen uint32) {
	p.live++
	if k := len(p.chunks) - 1; k >= 0 && len(p.chunks[k].nos) < postChunkCap {
		c := p.chunks[k]
		if c.gen != gen {
			c = &postChunk{nos: c.nos, live: c.live, gen: gen} // the array is only appended to
			p.chunks[k] = c
		}
		c.nos = append(c.nos, no)
		c.live++
		return
	}
	nos := make([]uint64, 1, 4)
	nos[0] = no
	if len(p.chunks) > 0 {
		nos = make([]uint64, 1, postChunkCap) // a group that fills a chunk fills more
		nos[0] = no
	}
	p.chunks = append(p.chunks, &postChunk{nos: nos, live: 1, gen: gen})
}

// chunkOf returns the index of the chunk that holds number no, or -1.
func (p *postings) chunkOf(no uint64) int {
	k, found := slices.BinarySearchFunc(p.chunks, no, func(c *postChunk, no uint64) int { return cmp.Compare(c.nos[0], no) })
	if found {
		return k
	}
	if k == 0 {
		return -1
	}
	k--
	if _, ok := slices.BinarySearch(p.chunks[k].nos, no); !ok {
		return -1
	}
	return k
}

// remove marks the number of a record being retired dead, and rewrites its
// chunk if it is now more dead than live. adm must no longer hold the
// record. p must be owned.
func (p *postings) remove(no uint64, adm *admissions, gen uint32) {
	k := p.chunkOf(no)
	if k < 0 {
		return // CheckInvariants reports it
	}
	p.live--
	c := p.chunks[k]
	live := c.live - 1
	if live*2 >= len(c.nos) {
		if c.gen != gen {
			c = &postChunk{nos: c.nos, live: c.live, gen: gen}
			p.chunks[k] = c
		}
		c.live = live
		return
	}
	if live == 0 {
		p.chunks = slices.Delete(p.chunks, k, k+1)
		return
	}
	if k > 0 && len(p.chunks[k-1].nos)+live <= postChunkCap {
		prev := p.chunks[k-1]
		nos := make([]uint64, 0, postChunkCap)
		nos = append(nos, prev.nos...)
		nos = appendLiveNos(nos, c.nos, adm)
		p.chunks[k-1] = &postChunk{nos: nos, live: prev.live + live, gen: gen}
		p.chunks = slices.Delete(p.chunks, k, k+1)
		return
	}
	p.chunks[k] = &postChunk{nos: appendLiveNos(make([]uint64, 0, live), c.nos, adm), live: live, gen: gen}
}

func appendLiveNos(dst, src []uint64, adm *admissions) []uint64 {
	for _, no := range src {
		if adm.get(no) != nil {
			dst = append(dst, no)
		}
	}
	return dst
}

// walk calls fn with each live number from lo to hi (exclusive), in
// ascending order or, newest, descending, until fn returns false.
func (p *postings) walk(lo, hi uint64, newest bool, adm *admissions, fn func(no uint64, e *stored) bool) {
	if p == nil || lo >= hi {
		return
	}
	if !newest {
		k := max(p.chunkAtOrBefore(lo), 0)
		for ; k < len(p.chunks); k++ {
			nos := p.chunks[k].nos
			j, _ := slices.BinarySearch(nos, lo)
			for ; j < len(nos); j++ {
				if nos[j] >= hi {
					return
				}
				if e := adm.get(nos[j]); e != nil && !fn(nos[j], e) {
					return
				}
			}
		}
		return
	}
	for k := p.chunkAtOrBefore(hi - 1); k >= 0; k-- {
		nos := p.chunks[k].nos
		j, found := slices.BinarySearch(nos, hi-1)
		if !found {
			j--
		}
		for ; j >= 0; j-- {
			if nos[j] < lo {
				return
			}
			if e := adm.get(nos[j]); e != nil && !fn(nos[j], e) {
				return
			}
		}
	}
}

// chunkAtOrBefore returns the index of the last chunk whose first number is
// at most no, or -1.
func (p *postings) chunkAtOrBefore(no uint64) int {
	k, found := slices.BinarySearchFunc(p.chunks, no, func(c *postChunk, no uint64) int { return cmp.Compare(c.nos[0], no) })
	if found {
		return k
	}
	return k - 1
}

// check verifies a postings list: numbers strictly ascending, no chunk
// empty or over its capacity, each chunk's live count and the list's agree
// with the admission table, and each live number's record in the group
// (in reports whether a record belongs to it). It returns "" when they
// hold.
func (p *postings) check(adm *admissions, in func(e *stored) bool) string {
	prev, live := uint64(0), 0
	for _, c := range p.chunks {
		if len(c.nos) == 0 || len(c.nos) > postChunkCap {
			return "a chunk of " + itoa(uint64(len(c.nos))) + " numbers"
		}
		n := 0
		for _, no := range c.nos {
			if no <= prev {
				return "numbers out of order"
			}
			prev = no
			if e := adm.get(no); e != nil {
				if !in(e) {
					return "number " + itoa(no) + " of a record of another group"
				}
				n++
			}
		}
		if n != c.live {
			return "a chunk counts " + itoa(uint64(c.live)) + " live numbers, holds " + itoa(uint64(n))
		}
		live += n
	}
	if live != p.live {
		return "counts " + itoa(uint64(p.live)) + " live numbers, holds " + itoa(uint64(live))
	}
	return ""
}
