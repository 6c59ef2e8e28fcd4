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

// Retired is a retired execution's compact record (64 bytes). It is never
// changed after it is made.
type Retired struct {
	WorkflowID string
	Result     string     // completed: meaningful only when HasRes
	Error      *ErrorInfo // failed
	AdmittedAt int64
	UpdatedAt  int64
	Deliveries uint32 // the execution's last token: every claim issued one
	Status     Status // StatusCompleted or StatusFailed
	HasRes     bool
}

// execution expands a retired record into the record reads return.
func (r *Retired) execution(id string) *Execution {
	return &Execution{
		ID:         id,
		WorkflowID: r.WorkflowID,
		Status:     r.Status,
		Outcome:    &Outcome{Status: r.Status, Result: r.Result, HasRes: r.HasRes, Error: r.Error},
		AdmittedAt: r.AdmittedAt,
		UpdatedAt:  r.UpdatedAt,
		LastToken:  uint64(r.Deliveries),
	}
}

// NextRetirable returns the last-update time of the oldest terminal
// execution not yet retired.
func (s *State) NextRetirable() (int64, bool) {
	k, ok := s.ended.Min()
	return k.At, ok
}

func (s *State) retire(c *Command, dry bool) Result {
	first, ok := s.ended.Min()
	if !ok || first.At >= c.At {
		return Result{}
	}
	if dry {
		return mutates
	}
	n := 0
	for ; n < c.Limit; n++ {
		k, ok := s.ended.Min()
		if !ok || k.At >= c.At {
			break
		}
		s.ended.PopMin()
		p := s.lookup(k.ID)
		s.retired.Set(retiredItem{ID: p.ID, r: &Retired{
			WorkflowID: p.WorkflowID, AdmittedAt: p.AdmittedAt, UpdatedAt: p.UpdatedAt,
			Status: p.Status, Result: p.Outcome.Result, HasRes: p.Outcome.HasRes, Error: p.Outcome.Error,
			Deliveries: uint32(min(p.LastToken, 1<<32-1)),
		}})
		s.execs.Delete(execItem{ID: p.ID})
		s.deleteSteps(p.ID)
	}
	s.meta.Retired += n
	return Result{Count: n}
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
