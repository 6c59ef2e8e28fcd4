package fsm

import (
	"slices"

	"github.com/execstore/execstore/internal/mutant"
)

// The change log in the state encoding (version 3), after the retired
// records:
//
//	changes  last:uv (Meta.ChangeSeq) count:uv (one per record), then per
//	         change in sequence order: seq-delta:uv (from the previous
//	         change's, the first from 0; at least 1) at:uv
//	         record:uv (the record's position in the records section)
//
// A change's status is its record's: the log keeps only each record's latest
// change. The listing indexes and the counts are derived, not stored:
// decoding rebuilds them from the records (and the retired records, for the
// counts).
//
// Versions 1 and 2 have no change log. Decoding one derives it: one change
// per record that is not retired, to its status, at its admission time if
// it is still admitted and at its latest update otherwise (for a terminal
// record that is when it ended; a suspended record's suspension may be
// earlier than that), numbered 1, 2, ... in (time, ID) order. A store
// opened from such a snapshot continues the sequence from there.

// encodeChanges writes the change log.
func (s *State) encodeChanges(e *encoder) {
	type ref struct {
		seq uint64
		at  int64
		pos uint64
	}
	refs := make([]ref, 0, s.execs.Len())
	pos := uint64(0)
	s.execs.Scan(func(it execItem) bool {
		k, _ := s.list.byStatus[it.e.Status].Get(listEntry{At: it.e.AdmittedAt, e: it.e})
		c, _ := s.list.changes.Get(change{Key: changeKey(k.Seq, it.e.Status)})
		refs = append(refs, ref{seq: k.Seq, at: c.At, pos: pos})
		pos++
		return true
	})
	slices.SortFunc(refs, func(a, b ref) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	last := s.meta.ChangeSeq
	if mutant.ChangeSeqRestarts {
		// The sequence as if it had started again at this snapshot.
		for i := range refs {
			refs[i].seq = uint64(i + 1)
		}
		last = uint64(len(refs))
	}
	e.uv(last)
	e.uv(uint64(len(refs)))
	prev := uint64(0)
	for _, r := range refs {
		e.uv(r.seq - prev)
		e.uv(uint64(r.at))
		e.uv(r.pos)
		prev = r.seq
		e.flush(false)
		if e.err != nil {
			return
		}
	}
}

// recordList returns the stored records in ID order: their positions in the
// encoding.
func (s *State) recordList() []*Execution {
	recs := make([]*Execution, 0, s.execs.Len())
	s.execs.Scan(func(it execItem) bool { recs = append(recs, it.e); return true })
	return recs
}

// decodeChanges reads the change log and builds the listing indexes.
func (s *State) decodeChanges(d *streamDecoder) error {
	recs := s.recordList()
	last := d.Uvarint()
	n := d.count(maxCount)
	if d.err == nil && n != len(recs) {
		return decodeErr("state: " + itoa(uint64(n)) + " changes for " + itoa(uint64(len(recs))) + " records")
	}
	seqs := make([]uint64, len(recs))
	ats := make([]int64, len(recs))
	order := make([]int32, 0, len(recs)) // record positions in sequence order
	seq := uint64(0)
	for i := 0; i < n && d.err == nil; i++ {
		delta, at, pos := d.Uvarint(), d.int(), d.Uvarint()
		if d.err != nil {
			break
		}
		msg := checkChange(&seq, delta, last, pos, len(recs))
		if msg == "" && seqs[pos] != 0 {
			msg = "a second change of one record"
		}
		if msg != "" {
			return decodeErr("state: change " + itoa(uint64(i)) + ": " + msg)
		}
		seqs[pos], ats[pos] = seq, at
		order = append(order, int32(pos))
	}
	if d.err != nil {
		return d.err
	}
	s.meta.ChangeSeq = last
	s.buildList(recs, seqs, ats, order)
	return nil
}

// checkChange checks one encoded change's sequence and record, and advances
// seq; it returns "" when they hold. CheckState and DecodeState both use it
// (each then checks that no record has two changes).
func checkChange(seq *uint64, delta, last, pos uint64, records int) string {
	switch {
	case delta == 0 || delta > maxChangeSeq || *seq+delta > last:
		return "sequence out of order or beyond the last"
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
	seqs := make([]uint64, len(recs))
	ats := make([]int64, len(recs))
	order := make([]int32, len(recs))
	for i, e := range recs {
		ats[i] = e.UpdatedAt
		if e.Status == StatusAdmitted {
			ats[i] = e.AdmittedAt
		}
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { // records are in ID order already
		switch {
		case ats[a] < ats[b]:
			return -1
		case ats[a] > ats[b]:
			return 1
		}
		return 0
	})
	for i, pos := range order {
		seqs[pos] = uint64(i + 1)
	}
	s.meta.ChangeSeq = uint64(len(recs))
	s.buildList(recs, seqs, ats, order)
}

// buildList builds the listing indexes, the change log and the counts of a
// decoded state. recs are the records in ID order; seqs[i] and ats[i] are
// record i's latest change; order lists the records in sequence order.
func (s *State) buildList(recs []*Execution, seqs []uint64, ats []int64, order []int32) {
	l := &s.list
	for _, pos := range order {
		e := recs[pos]
		l.changes.Load(change{Key: changeKey(seqs[pos], e.Status), At: ats[pos], ID: e.ID})
	}
	// Records in (admission time, ID) order: then each index is filled in
	// its own order, by appends.
	byAdmission := make([]int32, len(recs))
	for i := range byAdmission {
		byAdmission[i] = int32(i)
	}
	slices.SortStableFunc(byAdmission, func(a, b int32) int { // ID order breaks ties
		switch x, y := recs[a].AdmittedAt, recs[b].AdmittedAt; {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	workflows := map[string][]int32{} // only looked up; the names are sorted below
	parents := map[string][]int32{}
	var names, parentNames []string
	for _, pos := range byAdmission {
		e := recs[pos]
		l.counts[e.Status]++
		l.byStatus[e.Status].Load(listEntry{At: e.AdmittedAt, e: e, Seq: seqs[pos]})
		if _, ok := workflows[e.WorkflowID]; !ok {
			names = append(names, e.WorkflowID)
		}
		workflows[e.WorkflowID] = append(workflows[e.WorkflowID], pos)
		if e.Parent != nil {
			p := e.Parent.ExecutionID
			if _, ok := parents[p]; !ok {
				parentNames = append(parentNames, p)
			}
			parents[p] = append(parents[p], pos)
		}
	}
	slices.Sort(names)
	slices.Sort(parentNames)
	for _, name := range names {
		for _, pos := range workflows[name] {
			e := recs[pos]
			l.byWorkflow[e.Status].Load(groupEntry{Group: name, At: e.AdmittedAt, e: e})
		}
	}
	for _, name := range parentNames {
		for _, pos := range parents[name] {
			e := recs[pos]
			l.byParent[e.Status].Load(groupEntry{Group: name, At: e.AdmittedAt, e: e})
		}
	}
	counts := map[string]int{}
	for _, name := range names {
		counts[name] = len(workflows[name])
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

// changes reads the change log as decodeChanges does, keeping one bit per
// record to find a record with two changes.
func (c *checker) changes(sum *StateSummary) error {
	last := c.Uvarint()
	n := c.count(maxCount)
	if c.err == nil && n != c.live {
		return decodeErr("state: " + itoa(uint64(n)) + " changes for " + itoa(uint64(c.live)) + " records")
	}
	seen := make([]uint64, (c.live+63)/64)
	seq := uint64(0)
	for i := 0; i < n && c.err == nil; i++ {
		delta, _, pos := c.Uvarint(), c.int(), c.Uvarint()
		if c.err != nil {
			break
		}
		msg := checkChange(&seq, delta, last, pos, c.live)
		if msg == "" && seen[pos/64]&(1<<(pos%64)) != 0 {
			msg = "a second change of one record"
		}
		if msg != "" {
			return decodeErr("state: change " + itoa(uint64(i)) + ": " + msg)
		}
		seen[pos/64] |= 1 << (pos % 64)
	}
	if c.err != nil {
		return c.err
	}
	sum.Meta.ChangeSeq = last
	return nil
}
