package fsm

// Retention. A terminal execution older than the store's retention drops its
// params, context and steps; its ID, workflow, status, outcome, timestamps
// and delivery count stay, in a compact record of their own, so an ID is
// still never reused and reads still answer. Retirement is a command (with
// the cutoff in it), so replay and every replica retire exactly the same
// records at the same point of the log.

// retiredItem is the retired tree's item: the ID inline and the rest behind
// a pointer, so the tree's nodes (half empty after in-order inserts) hold 24
// bytes per record rather than the whole record.
type retiredItem struct {
	ID string
	r  *Retired
}

func retiredLess(a, b retiredItem) bool { return a.ID < b.ID }

// Retired is a retired execution's compact record (56 bytes): every field a
// record has except the params, the context and the saved steps, which
// retention drops (a terminal record has no wake and no lease). It shares
// the outcome and the parent link of the record it replaces, which are never
// changed once recorded, and is itself never changed after it is made.
type Retired struct {
	WorkflowID string
	Outcome    *Outcome // the recorded outcome: terminal
	Parent     *Parent  // nil unless another execution started this one
	AdmittedAt int64
	UpdatedAt  int64
	Deliveries uint64 // the execution's last token: every claim issued one
}

// execution expands a retired record into the record reads return.
func (r *Retired) execution(id string) *Execution {
	return &Execution{
		ID:         id,
		WorkflowID: r.WorkflowID,
		Status:     r.Outcome.Status,
		Outcome:    r.Outcome,
		Parent:     r.Parent,
		AdmittedAt: r.AdmittedAt,
		UpdatedAt:  r.UpdatedAt,
		LastToken:  r.Deliveries,
	}
}

// TrackRetirement keeps the index of terminal records awaiting retirement
// (built from the records if it is not kept yet). A state keeps it only while
// retention is on: without it every terminal record would cost an index entry
// for nothing. The index is derived, so keeping it or not changes no result:
// a retire command applied to a state that does not keep it builds it first.
func (s *State) TrackRetirement() {
	if s.trackEnded {
		return
	}
	s.trackEnded = true
	var ended []dueKey
	s.execs.Scan(func(it execItem) bool {
		if e := s.rec(it); e.Terminal() {
			ended = append(ended, dueKey{At: e.UpdatedAt(), ID: it.ID})
		}
		return true
	})
	loadSorted(s.ended, ended, dueLess)
}

// NextRetirable returns the last-update time of the oldest terminal
// execution not yet retired.
func (s *State) NextRetirable() (int64, bool) {
	k, ok := s.ended.Min()
	return k.At, ok
}

func (s *State) retire(c *Command, dry bool) Result {
	if !s.trackEnded {
		if dry {
			return mutates // building the index is a change; applying decides
		}
		s.TrackRetirement()
	}
	first, ok := s.ended.Min()
	if !ok || first.At >= c.At {
		return Result{}
	}
	if dry {
		return mutates
	}
	n := 0
	var archived []ArchivedRecord
	for ; n < c.Limit; n++ {
		k, ok := s.ended.Min()
		if !ok || k.At >= c.At {
			break
		}
		s.ended.PopMin()
		st := s.lookup(k.ID)
		p := st.Value()
		r := Retired{
			WorkflowID: p.WorkflowID, Outcome: p.Outcome, Parent: p.Parent,
			AdmittedAt: p.AdmittedAt, UpdatedAt: p.UpdatedAt, Deliveries: p.LastToken,
		}
		if s.archive != nil {
			archived = append(archived, ArchivedRecord{ID: p.ID, Retired: r})
		} else {
			s.retired.Set(retiredItem{ID: p.ID, r: &r})
		}
		s.unindex(st)
		if s.prio.Len() > 0 {
			s.prio.Delete(prioItem{id: p.ID})
		}
		if s.ckeys.Len() > 0 {
			s.dropConcurrencyKey(p.ID)
		}
		s.execs.Delete(execItem{ID: p.ID})
		s.execsWritten()
		s.deleteSteps(p.ID)
		s.deleteStarts(p.ID)
	}
	if s.archive != nil {
		s.meta.Archived += n
	} else {
		s.meta.Retired += n
	}
	return Result{Count: n, Retired: archived}
}

// deleteSteps removes every saved step of an execution.
func (s *State) deleteSteps(id string) {
	var keys []stepEntry
	s.steps.Ascend(stepEntry{ExecutionID: id}, func(st stepEntry) bool {
		if st.ExecutionID != id {
			return false
		}
		keys = append(keys, stepEntry{ExecutionID: id, Key: st.Key})
		return true
	})
	for _, k := range keys {
		s.steps.Delete(k)
	}
}

// RetirementTracked reports whether the state keeps the index of terminal
// records awaiting retirement (see TrackRetirement).
func (s *State) RetirementTracked() bool { return s.trackEnded }

// deleteStarts removes the child-start requests an execution made: a
// terminal execution holds no lease, so it can never start a child again.
func (s *State) deleteStarts(caller string) {
	var keys []startEntry
	s.starts.Ascend(startEntry{Caller: caller}, func(st startEntry) bool {
		if st.Caller != caller {
			return false
		}
		keys = append(keys, startEntry{Caller: caller, Key: st.Key})
		return true
	})
	for _, k := range keys {
		s.starts.Delete(k)
	}
}
