package fsm

import "encoding/binary"

// Forgetting (Options.ForgetAfter; docs/design/archive.md). An archiving
// state may forget the archived executions last updated before a cutoff:
// from the forget command on, the state machine decides as if they had never
// been admitted (their IDs may be admitted again, reads do not find them)
// and its counts no longer hold them. The state keeps one number for it,
// Meta.ForgotBefore: an archived record updated before it is forgotten.
//
// The cutoff only grows, and a forget command is applied only when no
// terminal execution updated before its cutoff is still in the state: every
// execution it forgets is in the archive already, and none can reach the
// archive later (a record becomes terminal at its command's time, after the
// cutoff). So the forgotten set is exactly "archived, updated before
// ForgotBefore", whenever the records are deleted from the archive's files.
//
// The counts are the archive's, not the state's: the store reads them from
// the archive's index by time (the executions updated between the previous
// cutoff and the new one) and the command carries them, by workflow and
// status, so that replay and every replica subtract the same numbers. Apply
// checks them against what the state counts as archived: a command that
// would make a count negative changes nothing (CodeMismatch).

// ForgetCount is how many archived executions of one workflow, with one
// status, a forget command forgets.
type ForgetCount struct {
	WorkflowID string
	Status     Status // terminal
	N          int    // at least 1
}

// MaxForgetCounts bounds a forget command's counts (workflow and status
// pairs).
const MaxForgetCounts = 1024

func forgetCountLess(a, b ForgetCount) bool {
	return a.WorkflowID < b.WorkflowID || (a.WorkflowID == b.WorkflowID && a.Status < b.Status)
}

// forget applies a forget command: c.At is the new cutoff, c.Forgotten the
// counts of the archived executions updated from the old cutoff to it.
func (s *State) forget(c *Command, now int64, dry bool) Result {
	if c.At <= s.meta.ForgotBefore || c.At > now {
		return Result{Code: CodeMismatch} // not later than the cutoff it has, or in the future
	}
	if !s.trackEnded {
		if dry {
			return mutates // building the index is a change; applying decides
		}
		s.TrackRetirement()
	}
	if k, ok := s.ended.Min(); ok && k.At < c.At {
		return Result{Code: CodeMismatch} // a record it would forget is not archived yet
	}
	n := 0
	var byStatus [statusCap]int
	for i, f := range c.Forgotten {
		n += f.N
		byStatus[f.Status] += f.N
		share := 0
		if wc, ok := s.list.workflows.Get(workflowCount{Name: f.WorkflowID}); ok && s.meta.Retired == 0 {
			share = wc.p.Total() - wc.p.Live()
		}
		for j := i - 1; j >= 0 && c.Forgotten[j].WorkflowID == f.WorkflowID; j-- {
			share -= c.Forgotten[j].N
		}
		if f.N > share {
			return Result{Code: CodeMismatch}
		}
	}
	if n > s.meta.Archived {
		return Result{Code: CodeMismatch}
	}
	for st, k := range byStatus {
		if k > s.list.counts[st] {
			return Result{Code: CodeMismatch}
		}
	}
	if dry {
		return mutates
	}
	s.meta.ForgotBefore = c.At
	s.meta.Archived -= n
	s.meta.Terminal -= n
	for st, k := range byStatus {
		s.list.counts[st] -= k
	}
	for _, f := range c.Forgotten {
		wc, _ := s.list.workflows.Get(workflowCount{Name: f.WorkflowID})
		p := wc.p.Own(s.gen)
		p.Uncount(f.N, s.gen)
		switch {
		case p.Total() == 0 && p.Runs() == 0:
			s.list.workflows.Delete(wc)
		case p != wc.p:
			wc.p = p
			s.list.workflows.Set(wc)
		}
	}
	return Result{Count: n}
}

// ForgotBefore returns the forget cutoff: an archived execution last
// updated before it is forgotten (Meta.ForgotBefore).
func (s *State) ForgotBefore() int64 { return s.meta.ForgotBefore }

// startedBy reports whether the caller a child's parent link names started
// it: its start request names the child. Always, unless the caller was
// retired (its start requests went with it: it is terminal, nothing to
// wake), or the child or its caller was forgotten and the ID admitted again
// as another execution, which a wake or a cancel must not reach.
func (s *State) startedBy(p *Parent, child string) bool {
	if p == nil {
		return false
	}
	st, ok := s.starts.Get(startEntry{Caller: p.ExecutionID, Key: p.StepKey})
	return ok && st.Child == child
}

// forgotten reports whether an archived record is forgotten.
func (s *State) forgotten(r *Retired) bool { return r.UpdatedAt < s.meta.ForgotBefore }

// ---- Codec ---------------------------------------------------------------------

//	forget  before:uv n:uv (workflow:str status:1B count:uv)*n   (version 4)

func encodeForget(dst []byte, c *Command, _ byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(c.At))
	dst = binary.AppendUvarint(dst, uint64(len(c.Forgotten)))
	for _, f := range c.Forgotten {
		dst = appendStr(dst, f.WorkflowID)
		dst = append(dst, byte(f.Status))
		dst = binary.AppendUvarint(dst, uint64(f.N))
	}
	return dst
}

func decodeForget(d *Decoder, c *Command, _ byte) {
	c.At = d.Int()
	n := d.Count(3) // a workflow's length, a status and a count
	if n > MaxForgetCounts {
		d.refuse("forget of " + itoa(uint64(n)) + " counts")
		return
	}
	if n > 0 {
		c.Forgotten = make([]ForgetCount, n)
	}
	for i := range c.Forgotten {
		f := &c.Forgotten[i]
		f.WorkflowID = d.Str()
		f.Status = Status(d.Byte())
		f.N = int(d.Int())
	}
}

func sizeForget(c *Command) int {
	n := uvarintLen(uint64(c.At)) + uvarintLen(uint64(len(c.Forgotten)))
	for _, f := range c.Forgotten {
		n += strLen(f.WorkflowID) + 1 + uvarintLen(uint64(f.N))
	}
	return n
}

func boundForget(b *Bounds) int { return 2*boundNum + MaxForgetCounts*(b.id()+1+boundNum) }

func checkForget(c *Command) string {
	if c.At <= 0 || len(c.Forgotten) > MaxForgetCounts {
		return "non-positive cutoff, or too many counts"
	}
	for i, f := range c.Forgotten {
		if f.WorkflowID == "" || !f.Status.Terminal() || f.N <= 0 || f.N > maxCount {
			return "a count with an empty workflow, a status that is not terminal, or a non-positive number"
		}
		if i > 0 && !forgetCountLess(c.Forgotten[i-1], f) {
			return "counts out of order or repeated"
		}
	}
	return ""
}
