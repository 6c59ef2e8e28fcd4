package chunk

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/execstore/execstore/fsm/internal/record"
)

// Postings is the list of admission numbers of one group (a workflow, or a
// parent's children), in number order: admissions only append to it, so it
// needs no tree. A retired record's number stays in its run, dead (its slot
// in the admission table is empty), until that run is more dead than live;
// then the run is rewritten with its live numbers only (merged into the run
// before when both fit in one), or dropped when none is left.
//
// A list, or a run, is written in place only by the state of its
// generation; Own gives any other state a copy of the list, and the list's
// writes copy a run of another generation before writing it (a run's array
// may be shared, since it is only appended to, and a rewrite makes a new
// one).
type Postings struct {
	runs  []*Run
	live  int // numbers of records that exist
	total int // a workflow's: its records, retired ones included (a parent's: 0)
	gen   uint32
}

// Run is a run of a postings list.
type Run struct {
	nos  []uint64
	live int
	gen  uint32
}

// RunCap is the most numbers a run holds.
const RunCap = 256

// NewPostings returns an empty list of a state of generation gen, counting
// total records.
func NewPostings(total int, gen uint32) *Postings {
	return &Postings{total: total, gen: gen}
}

// Live returns the number of numbers of records that exist.
func (p *Postings) Live() int { return p.live }

// Total returns a workflow's count of records, retired ones included.
func (p *Postings) Total() int { return p.total }

// Runs returns the number of runs.
func (p *Postings) Runs() int { return len(p.runs) }

// Run returns the k-th run.
func (p *Postings) Run(k int) *Run { return p.runs[k] }

// Len returns the number of numbers in the run, live or dead.
func (r *Run) Len() int { return len(r.nos) }

// No returns the run's i-th number.
func (r *Run) No(i int) uint64 { return r.nos[i] }

// Live returns the number of the run's numbers whose records exist.
func (r *Run) Live() int { return r.live }

// Own returns p if the state of generation gen may write it, else a copy
// that it may.
func (p *Postings) Own(gen uint32) *Postings {
	if p.gen == gen {
		return p
	}
	return &Postings{runs: slices.Clone(p.runs), live: p.live, total: p.total, gen: gen}
}

// mine panics unless the state of generation gen owns p.
func (p *Postings) mine(gen uint32) {
	if p.gen != gen {
		panic("chunk: a postings list written by a state of another generation")
	}
}

// CountRecord counts one more record of a workflow. p must be of generation
// gen (see Own).
func (p *Postings) CountRecord(gen uint32) {
	p.mine(gen)
	p.total++
}

// Uncount counts n fewer records of a workflow (forgotten ones: they were
// archived, so no number of theirs is live). p must be of generation gen.
func (p *Postings) Uncount(n int, gen uint32) {
	p.mine(gen)
	if n > p.total-p.live {
		panic("chunk: uncounting records that are live")
	}
	p.total -= n
}

// Add appends an admission number above every other. p must be of
// generation gen (see Own).
func (p *Postings) Add(no uint64, gen uint32) {
	p.mine(gen)
	p.live++
	if k := len(p.runs) - 1; k >= 0 && len(p.runs[k].nos) < RunCap {
		r := p.runs[k]
		if r.gen != gen {
			r = &Run{nos: r.nos, live: r.live, gen: gen} // the array is only appended to
			p.runs[k] = r
		}
		r.nos = append(r.nos, no)
		r.live++
		return
	}
	nos := make([]uint64, 1, 4)
	nos[0] = no
	if len(p.runs) > 0 {
		nos = make([]uint64, 1, RunCap) // a group that fills a run fills more
		nos[0] = no
	}
	p.runs = append(p.runs, &Run{nos: nos, live: 1, gen: gen})
}

// RunOf returns the index of the run that holds number no, or -1.
func (p *Postings) RunOf(no uint64) int {
	k, found := slices.BinarySearchFunc(p.runs, no, func(r *Run, no uint64) int { return cmp.Compare(r.nos[0], no) })
	if found {
		return k
	}
	if k == 0 {
		return -1
	}
	k--
	if _, ok := slices.BinarySearch(p.runs[k].nos, no); !ok {
		return -1
	}
	return k
}

// Remove marks the number of a record being retired dead, and rewrites its
// run if it is now more dead than live. t must no longer hold the record.
// p must be of generation gen (see Own).
func (p *Postings) Remove(no uint64, t *Table, gen uint32) {
	p.mine(gen)
	k := p.RunOf(no)
	if k < 0 {
		return // fsm.State.CheckInvariants reports it
	}
	p.live--
	r := p.runs[k]
	live := r.live - 1
	if live*2 >= len(r.nos) {
		if r.gen != gen {
			r = &Run{nos: r.nos, live: r.live, gen: gen}
			p.runs[k] = r
		}
		r.live = live
		return
	}
	if live == 0 {
		p.runs = slices.Delete(p.runs, k, k+1)
		return
	}
	if k > 0 && len(p.runs[k-1].nos)+live <= RunCap {
		prev := p.runs[k-1]
		nos := make([]uint64, 0, RunCap)
		nos = append(nos, prev.nos...)
		nos = appendLiveNos(nos, r.nos, t)
		p.runs[k-1] = &Run{nos: nos, live: prev.live + live, gen: gen}
		p.runs = slices.Delete(p.runs, k, k+1)
		return
	}
	p.runs[k] = &Run{nos: appendLiveNos(make([]uint64, 0, live), r.nos, t), live: live, gen: gen}
}

func appendLiveNos(dst, src []uint64, t *Table) []uint64 {
	for _, no := range src {
		if t.Get(no) != nil {
			dst = append(dst, no)
		}
	}
	return dst
}

// Walk calls fn with each live number from lo to hi (exclusive) and its
// record, in ascending order or, newest, descending, until fn returns
// false. p may be nil.
func (p *Postings) Walk(lo, hi uint64, newest bool, t *Table, fn func(no uint64, e *record.Stored) bool) {
	if p == nil || lo >= hi {
		return
	}
	if !newest {
		k := max(p.runAtOrBefore(lo), 0)
		for ; k < len(p.runs); k++ {
			nos := p.runs[k].nos
			j, _ := slices.BinarySearch(nos, lo)
			for ; j < len(nos); j++ {
				if nos[j] >= hi {
					return
				}
				if e := t.Get(nos[j]); e != nil && !fn(nos[j], e) {
					return
				}
			}
		}
		return
	}
	for k := p.runAtOrBefore(hi - 1); k >= 0; k-- {
		nos := p.runs[k].nos
		j, found := slices.BinarySearch(nos, hi-1)
		if !found {
			j--
		}
		for ; j >= 0; j-- {
			if nos[j] < lo {
				return
			}
			if e := t.Get(nos[j]); e != nil && !fn(nos[j], e) {
				return
			}
		}
	}
}

// runAtOrBefore returns the index of the last run whose first number is at
// most no, or -1.
func (p *Postings) runAtOrBefore(no uint64) int {
	k, found := slices.BinarySearchFunc(p.runs, no, func(r *Run, no uint64) int { return cmp.Compare(r.nos[0], no) })
	if found {
		return k
	}
	return k - 1
}

// Check verifies a postings list: numbers strictly ascending, no run empty
// or over its capacity, each run's live count and the list's agree with
// the admission table, each live number's record in the group (in reports
// whether a record belongs to it), and no run more dead than live (Remove
// rewrites a run before it is, so a list holds at most twice its live
// numbers). It returns "" when they hold.
func (p *Postings) Check(t *Table, in func(e *record.Stored) bool) string {
	prev, live := uint64(0), 0
	for _, r := range p.runs {
		if len(r.nos) == 0 || len(r.nos) > RunCap {
			return "a chunk of " + strconv.Itoa(len(r.nos)) + " numbers"
		}
		n := 0
		for _, no := range r.nos {
			if no <= prev {
				return "numbers out of order"
			}
			prev = no
			if e := t.Get(no); e != nil {
				if !in(e) {
					return "number " + strconv.FormatUint(no, 10) + " of a record of another group"
				}
				n++
			}
		}
		if n != r.live {
			return "a chunk counts " + strconv.Itoa(r.live) + " live numbers, holds " + strconv.Itoa(n)
		}
		if 2*n < len(r.nos) {
			return "a chunk of " + strconv.Itoa(len(r.nos)) + " numbers, only " + strconv.Itoa(n) + " of them live, was not rewritten"
		}
		live += n
	}
	if live != p.live {
		return "counts " + strconv.Itoa(p.live) + " live numbers, holds " + strconv.Itoa(live)
	}
	return ""
}
