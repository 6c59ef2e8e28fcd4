package fsm

import (
	"cmp"
	"slices"

	"github.com/execstore/execstore/fsm/internal/chunk"
	"github.com/execstore/execstore/internal/mutant"
)

// The change log in the state encoding (version 4), after the schedules:
// two lists, each naming every record once by its position in the records
// section (ID order), so that decoding builds each structure in its own
// order by appends, without sorting:
//
//	changes  last:uv (Meta.ChangeSeq) admitted:uv (Meta.Admitted)
//	         count:uv (the number of records)
//	         admissions, in admission order: (no-delta:uv record:uv) per
//	           record, no-delta from the previous record's admission
//	           number (the first from 0), at least 1: its AdmitNo
//	         latest changes, in sequence order: (seq-delta:uv at:uv
//	           record:uv) per record, likewise: its ChangeSeq, and the
//	           change's time
//
// Admission numbers are at most admitted, positions at most last. A
// change's status is its record's. The change log holds only each record's
// latest change after decoding; the admission table, the group indexes and
// the counts are derived, not stored: decoding rebuilds them from the
// records (and the retired records, for the counts).
//
// Versions 1 to 3 have no change log. Decoding one derives it: each record
// that is not retired is given an admission number in (admission time, ID)
// order, 1 to n, and its latest change is numbered n+1 to 2n in (time, ID)
// order, to its status, at its admission time if it is still admitted and
// at its latest update otherwise (for a terminal record that is when it
// ended; a suspended record's suspension may be earlier than that). A store
// opened from such a snapshot continues the admissions from n and the
// sequence from 2n.

// changeRef names a record in one of the change log's lists: its number
// there (admission number or change position), the change's time (changes
// only) and its position in the records section.
type changeRef struct {
	seq uint64
	at  int64
	pos uint64
}

// encodeChanges writes the change log.
func (s *State) encodeChanges(e *encoder) {
	adms, changes := s.changeRefs()
	last := s.meta.ChangeSeq
	if mutant.ChangeSeqRestarts {
		for i := range changes {
			changes[i].seq = uint64(i + 1)
		}
		last = uint64(len(changes))
	}
	e.uv(last)
	e.uv(s.meta.Admitted)
	e.uv(uint64(len(changes)))
	for i, list := range [][]changeRef{adms, changes} {
		prev := uint64(0)
		for _, r := range list {
			e.uv(r.seq - prev)
			if i == 1 {
				e.uv(uint64(r.at))
			}
			e.uv(r.pos)
			prev = r.seq
			e.flush(false)
			if e.err != nil {
				return
			}
		}
	}
}

// changeRefs lists the records in admission order and in the order of
// their latest changes, each with its position. Admission numbers are dense
// (only retirement leaves holes), so it places each record at its number in
// one table, and the live entries of the change log are exactly the records'
// latest changes, in order: O(n), no sorting. When retirement left the
// numbers too sparse for a table, or the log does not name every record
// once, it sorts instead (changeRefsSorted), which gives the same lists.
func (s *State) changeRefs() (adms, changes []changeRef) {
	if adms, changes, ok := s.changeRefsByNumber(); ok {
		return adms, changes
	}
	return s.changeRefsSorted()
}

// changeRefsByNumber is changeRefs without sorting; ok is false when it
// cannot be done so.
func (s *State) changeRefsByNumber() (adms, changes []changeRef, ok bool) {
	n := s.execs.Len()
	lo := s.list.adm.t.Base() << admShift
	if n == 0 || s.meta.Admitted < lo || s.meta.Admitted-lo >= uint64(4*n)+admSize {
		return nil, nil, false
	}
	slots := make([]changeRef, s.meta.Admitted-lo+1) // slots[no-lo]: the record admitted as no; seq 0: none
	pos := uint64(0)
	ok = true
	s.execs.Scan(func(it execItem) bool {
		no := it.no
		if ok = no >= lo && no-lo < uint64(len(slots)) && slots[no-lo].seq == 0; !ok {
			return false
		}
		slots[no-lo] = changeRef{seq: no, pos: pos}
		pos++
		return true
	})
	changes = make([]changeRef, 0, n)
	if f := &s.list.feed; ok && f.chunks != nil {
		f.chunks.Scan(func(c *chunk.Feed) bool {
			for j := range c.Len() {
				x := c.Entry(j)
				if !x.Live(&s.list.adm.t) {
					continue
				}
				if ok = len(changes) < n && x.No >= lo && x.No-lo < uint64(len(slots)) && slots[x.No-lo].seq == x.No; !ok {
					return false
				}
				changes = append(changes, changeRef{seq: x.Seq, at: x.At, pos: slots[x.No-lo].pos})
			}
			return true
		})
	}
	if !ok || len(changes) != n {
		return nil, nil, false
	}
	adms = slots[:0]
	for _, r := range slots {
		if r.seq != 0 {
			adms = append(adms, r)
		}
	}
	return adms, changes, true
}

// changeRefsSorted is changeRefs by sorting the records by admission number
// and by latest change.
func (s *State) changeRefsSorted() (adms, changes []changeRef) {
	adms = make([]changeRef, 0, s.execs.Len())
	changes = make([]changeRef, 0, s.execs.Len())
	pos := uint64(0)
	s.execs.Scan(func(it execItem) bool {
		adms = append(adms, changeRef{seq: it.no, pos: pos})
		changes = append(changes, changeRef{seq: s.rec(it).ChangeSeq(), pos: pos})
		pos++
		return true
	})
	bySeq := func(a, b changeRef) int { return cmp.Compare(a.seq, b.seq) }
	slices.SortFunc(adms, bySeq)
	slices.SortFunc(changes, bySeq)
	// The live entries of the log are exactly the records' latest changes,
	// in the same order: their times pair with the sorted list one to one,
	// without a search.
	i := 0
	if f := &s.list.feed; f.chunks != nil {
		f.chunks.Scan(func(c *chunk.Feed) bool {
			for j := range c.Len() {
				if x := c.Entry(j); x.Live(&s.list.adm.t) && i < len(changes) {
					changes[i].at = x.At
					i++
				}
			}
			return true
		})
	}
	return adms, changes
}

// decodeChanges reads the change log and builds the listing indexes as it
// reads: the admission table and the postings lists in the admissions'
// order, the change log in its own, each record visited once per list.
func (s *State) decodeChanges(d *streamDecoder, recs []*stored) error {
	last := d.Uvarint()
	admitted := d.Uvarint()
	n := d.count(maxCount)
	if d.err == nil && n != len(recs) {
		return decodeErr("state: " + itoa(uint64(n)) + " changes for " + itoa(uint64(len(recs))) + " records")
	}
	b := newListBuilder(s, recs)
	for list := range 2 {
		seq, bound := uint64(0), admitted
		if list == 1 {
			bound = last
		}
		for i := 0; i < n && d.err == nil; i++ {
			delta := d.Uvarint()
			var at int64
			if list == 1 {
				at = d.int()
			}
			pos := d.Uvarint()
			if d.err != nil {
				break
			}
			msg := checkChange(&seq, delta, bound, pos, len(recs))
			e := (*stored)(nil)
			if msg == "" {
				e = recs[pos]
				if (list == 0 && e.AdmitNo() != 0) || (list == 1 && e.ChangeSeq() != 0) {
					msg = "a record named twice"
				}
			}
			if msg != "" {
				return decodeErr("state: change log: " + msg)
			}
			if list == 0 {
				e.SetPositions(seq, 0, s.gen)
				b.admitted(e)
			} else {
				e.SetPositions(0, seq, s.gen)
				b.changed(e, at)
			}
		}
	}
	if d.err != nil {
		return d.err
	}
	s.meta.ChangeSeq, s.meta.Admitted = last, admitted
	b.finish()
	return nil
}

// checkChange checks one entry of the change log's lists (its number's
// delta, and the record it names) and advances seq; it returns "" when they
// hold. CheckState and DecodeState both use it (and then check that no
// record is named twice in one list).
func checkChange(seq *uint64, delta, last, pos uint64, records int) string {
	switch {
	case delta == 0 || delta > maxChangeSeq || *seq+delta > last:
		return "numbers out of order or beyond the last"
	case pos >= uint64(records):
		return "names no record"
	}
	*seq += delta
	return ""
}

// deriveChanges gives a state decoded from version 1, 2 or 3 its change
// log: see the format comment above.
func (s *State) deriveChanges(recs []*stored) {
	n := len(recs)
	admitted, changed, ats := make([]int32, n), make([]int32, n), make([]int64, n)
	for i, e := range recs {
		ats[i] = e.UpdatedAt()
		if e.Status() == StatusAdmitted {
			ats[i] = e.AdmittedAt()
		}
		admitted[i], changed[i] = int32(i), int32(i)
	}
	byTime := func(at func(int32) int64) func(a, b int32) int {
		return func(a, b int32) int { // records are in ID order already
			switch x, y := at(a), at(b); {
			case x < y:
				return -1
			case x > y:
				return 1
			}
			return 0
		}
	}
	slices.SortStableFunc(admitted, byTime(func(i int32) int64 { return recs[i].AdmittedAt() }))
	slices.SortStableFunc(changed, byTime(func(i int32) int64 { return ats[i] }))
	b := newListBuilder(s, recs)
	for i, pos := range admitted {
		recs[pos].SetPositions(uint64(i+1), 0, s.gen)
		b.admitted(recs[pos])
	}
	for i, pos := range changed {
		recs[pos].SetPositions(0, uint64(n+i+1), s.gen)
		b.changed(recs[pos], ats[pos])
	}
	s.meta.ChangeSeq, s.meta.Admitted = uint64(2*n), uint64(n)
	b.finish()
}

// listBuilder builds the listing indexes of a decoded state: given each
// record in admission order, then in change order.
type listBuilder struct {
	s        *State
	lists    map[string]*chunk.Postings // by workflow
	last     string                     // the workflow of the latest admission, and its list:
	lastList *chunk.Postings            // runs of one workflow are common
	parents  map[string]*chunk.Postings
	names    []string // of parents
}

// newListBuilder counts the records by workflow (and the retired ones, and
// those by status) and makes each workflow's list.
func newListBuilder(s *State, recs []*stored) *listBuilder {
	l := &s.list
	counts := map[string]int{}
	var names []string
	count := func(name string) {
		if _, ok := counts[name]; !ok {
			names = append(names, name)
		}
		counts[name]++
	}
	for _, e := range recs {
		count(e.WorkflowID())
	}
	s.retired.Scan(func(it retiredItem) bool {
		l.counts[it.r.Outcome.Status]++
		count(it.r.WorkflowID)
		return true
	})
	if a := s.archivedCounts; a != nil { // archive.go
		for st, n := range a.byStatus {
			l.counts[st] += n
		}
		for _, w := range a.byWorkflow {
			count(w.name)
			counts[w.name] += w.n - 1
		}
		s.archivedCounts = nil
	}
	slices.Sort(names)
	b := &listBuilder{s: s, lists: make(map[string]*chunk.Postings, len(names)), parents: map[string]*chunk.Postings{}}
	for _, name := range names {
		b.lists[name] = chunk.NewPostings(counts[name], s.gen)
		l.workflows.Load(workflowCount{Name: name, p: b.lists[name]})
	}
	return b
}

// admitted indexes the next record in admission order.
func (b *listBuilder) admitted(e *stored) {
	s := b.s
	s.list.counts[e.Status()]++
	s.list.adm.add(e, s.gen)
	if b.lastList == nil || e.WorkflowID() != b.last {
		b.last, b.lastList = e.WorkflowID(), b.lists[e.WorkflowID()]
	}
	b.lastList.Add(e.AdmitNo(), s.gen)
	if e.Parent() != nil {
		p, ok := b.parents[e.Parent().ExecutionID]
		if !ok {
			p = chunk.NewPostings(0, s.gen)
			b.parents[e.Parent().ExecutionID] = p
			b.names = append(b.names, e.Parent().ExecutionID)
		}
		p.Add(e.AdmitNo(), s.gen)
	}
}

// changed logs the next record's latest change in position order.
func (b *listBuilder) changed(e *stored, at int64) {
	b.s.list.feed.append(feedEntry{Seq: e.ChangeSeq(), No: e.AdmitNo(), At: at}, b.s.gen)
}

// finish loads the parents' lists.
func (b *listBuilder) finish() {
	slices.Sort(b.names)
	for _, name := range b.names {
		b.s.list.parents.Load(parentGroup{Parent: name, p: b.parents[name]})
	}
}

// changes reads the change log as decodeChanges does, keeping two bits per
// record: whether each list named it.
func (c *checker) changes(sum *StateSummary) error {
	last := c.Uvarint()
	admitted := c.Uvarint()
	n := c.count(maxCount)
	if c.err == nil && n != c.live {
		return decodeErr("state: " + itoa(uint64(n)) + " changes for " + itoa(uint64(c.live)) + " records")
	}
	seen := [2][]uint64{make([]uint64, (c.live+63)/64), make([]uint64, (c.live+63)/64)}
	for list := range 2 {
		seq, bound := uint64(0), admitted
		if list == 1 {
			bound = last
		}
		for i := 0; i < n && c.err == nil; i++ {
			delta := c.Uvarint()
			if list == 1 {
				c.int()
			}
			pos := c.Uvarint()
			if c.err != nil {
				break
			}
			msg := checkChange(&seq, delta, bound, pos, c.live)
			if msg == "" && seen[list][pos/64]&(1<<(pos%64)) != 0 {
				msg = "a record named twice"
			}
			if msg != "" {
				return decodeErr("state: change log: " + msg)
			}
			seen[list][pos/64] |= 1 << (pos % 64)
		}
	}
	if c.err != nil {
		return c.err
	}
	sum.Meta.ChangeSeq, sum.Meta.Admitted = last, admitted
	return nil
}
