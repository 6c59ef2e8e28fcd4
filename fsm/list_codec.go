package fsm

import (
	"slices"

	"github.com/execstore/execstore/internal/mutant"
)

// The change log in the state encoding (version 4), after the retired
// records: two lists, each naming every record once by its position in the
// records section (ID order), so that decoding builds each structure in its
// own order by appends, without sorting:
//
//	changes  last:uv (Meta.ChangeSeq) count:uv (the number of records)
//	         admissions, in admission order: (adm-delta:uv record:uv) per
//	           record, adm-delta from the previous admission's position
//	           (the first from 0), at least 1: the record's AdmitSeq
//	         latest changes, in sequence order: (seq-delta:uv at:uv
//	           record:uv) per record, likewise: its ChangeSeq, and the
//	           change's time
//
// Positions are at most last. A change's status is its record's: the log
// keeps only each record's latest change. The listing indexes and the counts
// are derived, not stored: decoding rebuilds them from the records (and the
// retired records, for the counts).
//
// Versions 1 and 2 have no change log. Decoding one derives it: each record
// that is not retired is admitted at a position in (admission time, ID)
// order, 1 to n, and its latest change is numbered n+1 to 2n in (time, ID)
// order, to its status, at its admission time if it is still admitted and
// at its latest update otherwise (for a terminal record that is when it
// ended; a suspended record's suspension may be earlier than that). A store
// opened from such a snapshot continues the sequence from 2n.

// encodeChanges writes the change log.
func (s *State) encodeChanges(e *encoder) {
	type ref struct {
		seq uint64
		at  int64
		pos uint64
	}
	adms := make([]ref, 0, s.execs.Len())
	changes := make([]ref, 0, s.execs.Len())
	pos := uint64(0)
	s.execs.Scan(func(it execItem) bool {
		adms = append(adms, ref{seq: it.e.AdmitSeq, pos: pos})
		changes = append(changes, ref{seq: it.e.ChangeSeq, pos: pos})
		pos++
		return true
	})
	bySeq := func(a, b ref) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	}
	slices.SortFunc(adms, bySeq)
	slices.SortFunc(changes, bySeq)
	// The log holds exactly the records' latest changes, in the same order:
	// its times pair with the sorted list one to one, without a search.
	i := 0
	s.list.changes.Scan(func(c change) bool {
		if i < len(changes) {
			changes[i].at = c.At
		}
		i++
		return true
	})
	last := s.meta.ChangeSeq
	if mutant.ChangeSeqRestarts {
		last = renumber(adms, changes, func(r *ref) *uint64 { return &r.seq })
	}
	e.uv(last)
	e.uv(uint64(len(changes)))
	for i, list := range [][]ref{adms, changes} {
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

// renumber gives the positions of two sorted lists the numbers 1, 2, ... in
// their joint order, as a sequence that restarted would, and returns the
// last. Only mutant.ChangeSeqRestarts uses it.
func renumber[T any](a, b []T, seq func(*T) *uint64) uint64 {
	var all []uint64
	for _, l := range [][]T{a, b} {
		for i := range l {
			all = append(all, *seq(&l[i]))
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	for _, l := range [][]T{a, b} {
		for i := range l {
			p := seq(&l[i])
			n, _ := slices.BinarySearch(all, *p)
			*p = uint64(n + 1)
		}
	}
	return uint64(len(all))
}

// recordList returns the stored records in ID order: their positions in the
// encoding.
func (s *State) recordList() []*Execution {
	recs := make([]*Execution, 0, s.execs.Len())
	s.execs.Scan(func(it execItem) bool { recs = append(recs, it.e); return true })
	return recs
}

// changeLists is what the change log's two lists say, by record position.
type changeLists struct {
	admitted []int32 // record positions in admission order
	changed  []int32 // record positions in sequence order
	ats      []int64 // the time of each record's latest change
}

// decodeChanges reads the change log and builds the listing indexes.
func (s *State) decodeChanges(d *streamDecoder) error {
	recs := s.recordList()
	last := d.Uvarint()
	n := d.count(maxCount)
	if d.err == nil && n != len(recs) {
		return decodeErr("state: " + itoa(uint64(n)) + " changes for " + itoa(uint64(len(recs))) + " records")
	}
	cl := changeLists{admitted: make([]int32, 0, n), changed: make([]int32, 0, n), ats: make([]int64, n)}
	for list := range 2 {
		seq := uint64(0)
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
			msg := checkChange(&seq, delta, last, pos, len(recs))
			e := (*Execution)(nil)
			if msg == "" {
				e = recs[pos]
				if (list == 0 && e.AdmitSeq != 0) || (list == 1 && e.ChangeSeq != 0) {
					msg = "a record named twice"
				}
			}
			if msg != "" {
				return decodeErr("state: change log: " + msg)
			}
			if list == 0 {
				e.AdmitSeq = seq
				cl.admitted = append(cl.admitted, int32(pos))
			} else {
				e.ChangeSeq = seq
				cl.ats[pos] = at
				cl.changed = append(cl.changed, int32(pos))
			}
		}
	}
	if d.err != nil {
		return d.err
	}
	s.meta.ChangeSeq = last
	s.buildList(recs, &cl)
	return nil
}

// checkChange checks one entry of the change log's lists (its position's
// delta, and the record it names) and advances seq; it returns "" when they
// hold. CheckState and DecodeState both use it (and then check that no
// record is named twice in one list).
func checkChange(seq *uint64, delta, last, pos uint64, records int) string {
	switch {
	case delta == 0 || delta > maxChangeSeq || *seq+delta > last:
		return "positions out of order or beyond the last"
	case pos >= uint64(records):
		return "names no record"
	}
	*seq += delta
	return ""
}

// deriveChanges gives a state decoded from version 1 or 2 its change log:
// see the format comment above.
func (s *State) deriveChanges() {
	recs := s.recordList()
	n := len(recs)
	cl := changeLists{admitted: make([]int32, n), changed: make([]int32, n), ats: make([]int64, n)}
	for i, e := range recs {
		cl.ats[i] = e.UpdatedAt
		if e.Status == StatusAdmitted {
			cl.ats[i] = e.AdmittedAt
		}
		cl.admitted[i], cl.changed[i] = int32(i), int32(i)
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
	slices.SortStableFunc(cl.admitted, byTime(func(i int32) int64 { return recs[i].AdmittedAt }))
	slices.SortStableFunc(cl.changed, byTime(func(i int32) int64 { return cl.ats[i] }))
	for i, pos := range cl.admitted {
		recs[pos].AdmitSeq = uint64(i + 1)
	}
	for i, pos := range cl.changed {
		recs[pos].ChangeSeq = uint64(n + i + 1)
	}
	s.meta.ChangeSeq = uint64(2 * n)
	s.buildList(recs, &cl)
}

// buildList builds the listing indexes, the change log and the counts of a
// decoded state whose records have their positions.
func (s *State) buildList(recs []*Execution, cl *changeLists) {
	l := &s.list
	for _, pos := range cl.changed {
		e := recs[pos]
		l.changes.Load(change{Key: changeKey(e.ChangeSeq, e.Status), At: cl.ats[pos], ID: e.ID})
	}
	// In admission order each index is filled in its own order, by appends
	// (Load falls back to an insertion for an entry out of that order).
	workflows := map[string]*[]*Execution{} // only looked up; the names are sorted below
	parents := map[string]*[]*Execution{}
	var names, parentNames []string
	bucket := func(m map[string]*[]*Execution, names *[]string, name string, last **[]*Execution, lastName *string) *[]*Execution {
		if *last != nil && name == *lastName { // runs of one name are the common case
			return *last
		}
		b, ok := m[name]
		if !ok {
			b = new([]*Execution)
			m[name] = b
			*names = append(*names, name)
		}
		*last, *lastName = b, name
		return b
	}
	var lastWF, lastParent *[]*Execution
	var lastWFName, lastParentName string
	for _, pos := range cl.admitted {
		e := recs[pos]
		l.counts[e.Status]++
		l.byStatus[e.Status].Load(statusEntry(e))
		b := bucket(workflows, &names, e.WorkflowID, &lastWF, &lastWFName)
		*b = append(*b, e)
		if e.Parent != nil {
			b := bucket(parents, &parentNames, e.Parent.ExecutionID, &lastParent, &lastParentName)
			*b = append(*b, e)
		}
	}
	slices.Sort(names)
	slices.Sort(parentNames)
	for _, name := range names {
		for _, e := range *workflows[name] {
			l.byWorkflow.Load(workflowEntry(e))
		}
	}
	for _, name := range parentNames {
		for _, e := range *parents[name] {
			l.byParent.Load(parentEntry(e))
		}
	}
	counts := map[string]int{}
	for _, name := range names {
		counts[name] = len(*workflows[name])
	}
	s.retired.Scan(func(it retiredItem) bool {
		l.counts[it.r.Outcome.Status]++
		if _, ok := counts[it.r.WorkflowID]; !ok {
			names = append(names, it.r.WorkflowID)
		}
		counts[it.r.WorkflowID]++
		return true
	})
	slices.Sort(names)
	for _, name := range names {
		l.workflows.Load(workflowCount{Name: name, N: counts[name]})
	}
}

// changes reads the change log as decodeChanges does, keeping two bits per
// record: whether each list named it.
func (c *checker) changes(sum *StateSummary) error {
	last := c.Uvarint()
	n := c.count(maxCount)
	if c.err == nil && n != c.live {
		return decodeErr("state: " + itoa(uint64(n)) + " changes for " + itoa(uint64(c.live)) + " records")
	}
	seen := [2][]uint64{make([]uint64, (c.live+63)/64), make([]uint64, (c.live+63)/64)}
	for list := range 2 {
		seq := uint64(0)
		for i := 0; i < n && c.err == nil; i++ {
			delta := c.Uvarint()
			if list == 1 {
				c.int()
			}
			pos := c.Uvarint()
			if c.err != nil {
				break
			}
			msg := checkChange(&seq, delta, last, pos, c.live)
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
	sum.Meta.ChangeSeq = last
	return nil
}
