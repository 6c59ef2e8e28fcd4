package fsm

import "errors"

// CheckInvariants verifies every index against the records and the records
// against the rules of the state machine. It returns the first violation
// found, or nil. It reads the whole state: use it in tests, the simulator
// and after recovery, not on a hot path.
func (s *State) CheckInvariants() error {
	var err error
	fail := func(id, msg string) bool {
		err = errors.New("fsm: invariant violated: execution " + quote(id) + ": " + msg)
		return false
	}
	terminal := 0
	type laneKey struct {
		queue string
		prio  uint8
	}
	dueWant, leaseWant, liveWant := map[laneKey]int{}, map[laneKey]int{}, map[string]int{}
	s.execs.Scan(func(it execItem) bool {
		st := s.rec(it)
		if st == nil {
			return fail(it.ID, "indexed under an admission number with no record")
		}
		e := st.Value()
		if e.ID != it.ID || e.AdmitNo != it.no {
			return fail(it.ID, "indexed under another ID or admission number than its own")
		}
		if e.Terminal() {
			terminal++
			if _, ok := s.ended.Get(dueKey{At: e.UpdatedAt, ID: e.ID}); s.trackEnded && !ok {
				return fail(e.ID, "terminal but not awaiting retirement")
			}
		}
		if msg := checkRecord(&e); msg != "" {
			return fail(e.ID, msg)
		}
		if !e.Terminal() {
			liveWant[e.QueueName()]++
		}
		if at, ok := e.ClaimableAt(); ok {
			q := s.queues[e.QueueName()]
			if q == nil {
				return fail(e.ID, "claimable in queue "+quote(e.QueueName())+", which the state does not have")
			}
			prio := s.priorityOf(e.ID)
			l := q.laneOf(prio)
			if l == nil {
				return fail(e.ID, "claimable at priority "+itoa(uint64(prio))+", which its queue has no lane of")
			}
			t, _ := l.index(e.Leased())
			// One waiting for its key's slot is in no claimable index (checkKeys).
			parked := !e.Leased() && s.isParked(q, e.ID, at)
			switch {
			case parked:
			case e.Leased():
				leaseWant[laneKey{q.name, prio}]++
			default:
				dueWant[laneKey{q.name, prio}]++
			}
			if _, in := t.Get(claimKey{At: at, e: st}); !in && !parked {
				return fail(e.ID, "missing from the "+indexName(e.Leased())+" index at "+itoa(uint64(at)))
			}
		}
		if e.UpdatedAt > s.meta.Now {
			return fail(e.ID, "updated after the state's time")
		}
		if msg := s.checkLinks(&e); msg != "" {
			return fail(e.ID, msg)
		}
		return true
	})
	if err != nil {
		return err
	}
	if want := map[bool]int{true: terminal}[s.trackEnded]; s.ended.Len() != want {
		return errors.New("fsm: invariant violated: " + itoa(uint64(terminal)) + " terminal records but " +
			itoa(uint64(s.ended.Len())) + " awaiting retirement")
	}
	if s.retired.Len() != s.meta.Retired {
		return errors.New("fsm: invariant violated: retired count disagrees with the retired records")
	}
	if s.archive != nil && s.retired.Len() != 0 {
		return errors.New("fsm: invariant violated: a state with an archive keeps retired records")
	}
	terminal += s.retired.Len() + s.meta.Archived
	s.retired.Scan(func(it retiredItem) bool {
		if _, live := s.execs.Get(execItem{ID: it.ID}); live || it.r.Outcome == nil || !it.r.Outcome.Status.Terminal() {
			return fail(it.ID, "retired but also live, or not terminal")
		}
		if s.hasStarts(it.ID) {
			return fail(it.ID, "retired but its child starts are kept")
		}
		return true
	})
	if err != nil {
		return err
	}
	if terminal != s.meta.Terminal {
		return errors.New("fsm: invariant violated: terminal count " + itoa(uint64(s.meta.Terminal)) +
			" but " + itoa(uint64(terminal)) + " terminal records")
	}
	if err := s.checkQueues(liveWant); err != nil {
		return err
	}
	// Every entry belongs to a record of its queue that wants exactly that
	// entry in that index; with the counts equal, each such record is
	// indexed exactly once.
	for _, q := range s.queueList {
		for i, l := range q.lanes {
			if i > 0 && q.lanes[i-1].prio >= l.prio {
				return errors.New("fsm: invariant violated: queue " + quote(q.name) + "'s lanes out of priority order")
			}
			k := laneKey{q.name, l.prio}
			if err := s.checkQueueIndexes(q, l, dueWant[k], leaseWant[k]); err != nil {
				return err
			}
		}
	}
	if err := s.checkSideIndexes(); err != nil {
		return err
	}
	if err := s.checkList(); err != nil {
		return err
	}
	if err := s.checkSchedules(); err != nil { // schedule_state.go
		return err
	}
	if err := s.checkDeadlines(); err != nil { // deadline.go
		return err
	}
	if err := s.checkKeys(); err != nil { // conckeys.go
		return err
	}
	if err := s.checkPriorities(); err != nil { // priority.go
		return err
	}
	if err := s.checkRates(); err != nil { // rate.go
		return err
	}
	if err := s.checkQueueSettings(); err != nil { // queue_settings.go
		return err
	}
	return s.checkGrants() // claimkeys.go
}

// checkQueues verifies the queues against the live executions each holds:
// a queue exists exactly while it holds one, and counts them.
func (s *State) checkQueues(live map[string]int) error {
	if len(s.queues) != len(s.queueList) || len(s.queues) != len(live) {
		return errors.New("fsm: invariant violated: " + itoa(uint64(len(s.queues))) + " queues by name, " +
			itoa(uint64(len(s.queueList))) + " listed, " + itoa(uint64(len(live))) + " with live executions")
	}
	for _, q := range s.queueList {
		if s.queues[q.name] != q || q.live != live[q.name] {
			return errors.New("fsm: invariant violated: queue " + quote(q.name) + " counts " + itoa(uint64(q.live)) +
				" live executions, records say " + itoa(uint64(live[q.name])))
		}
	}
	return nil
}

// checkQueueIndexes verifies a queue's two claimable indexes against the
// numbers of entries its records want.
func (s *State) checkQueueIndexes(q *queue, l *lane, dueWant, leaseWant int) error {
	var err error
	fail := func(id, msg string) bool {
		err = errors.New("fsm: invariant violated: execution " + quote(id) + ": " + msg)
		return false
	}
	for _, leased := range []bool{false, true} {
		t, _ := l.index(leased)
		want := dueWant
		if leased {
			want = leaseWant
		}
		if t.Len() != want {
			return errors.New("fsm: invariant violated: queue " + quote(q.name) + ": " + indexName(leased) + " index has " +
				itoa(uint64(t.Len())) + " entries, records want " + itoa(uint64(want)))
		}
		t.Scan(func(k claimKey) bool {
			if k.e == nil {
				err = errors.New("fsm: invariant violated: " + indexName(leased) + " entry without a record")
				return false
			}
			e := s.find(k.e.ID(), nil)
			if e == nil {
				return fail(k.e.ID(), indexName(leased)+" entry of an unknown execution")
			}
			if k.e != e {
				return fail(k.e.ID(), indexName(leased)+" entry points to another record than the stored one")
			}
			if at, ok := e.ClaimableAt(); !ok || at != k.At || e.Leased() != leased {
				return fail(k.e.ID(), "stale "+indexName(leased)+" entry at "+itoa(uint64(k.At)))
			}
			if e.QueueName() != q.name || s.priorityOf(e.ID()) != l.prio {
				return fail(k.e.ID(), "indexed in queue "+quote(q.name)+" at priority "+itoa(uint64(l.prio))+" but in queue "+
					quote(e.QueueName())+" at "+itoa(uint64(s.priorityOf(e.ID()))))
			}
			return true
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkOutcome verifies a recorded outcome. It returns "" when it holds.
func checkOutcome(o *Outcome) string {
	switch {
	case !o.Status.Terminal():
		return "outcome is not terminal"
	case o.Status == StatusCompleted && o.Error != nil:
		return "completed outcome with an error"
	case o.Status == StatusFailed && (o.Error == nil || o.HasRes):
		return "failed outcome without an error, or with a result"
	case o.Status == StatusCancelled && (o.Error == nil || o.HasRes):
		return "cancelled outcome without its reason, or with a result"
	}
	return ""
}

// checkRecord verifies one record's own fields. It returns "" when they
// hold.
func checkRecord(e *Execution) string {
	switch {
	case !e.Status.Valid():
		return "invalid status"
	case e.Queue != "" && e.Queue == e.WorkflowID:
		return "names its default queue"
	case e.Terminal() != (e.Outcome != nil):
		return "outcome present exactly when terminal violated"
	case e.Outcome != nil && e.Outcome.Status != e.Status:
		return "outcome status differs from status"
	case e.Terminal() && (e.DueAt != 0 || e.CoveredAt != 0 || e.LeaseToken != 0 || e.WatchCount != 0):
		return "terminal record with a wake, lease or watch"
	case e.LeaseToken != 0 && (e.LeaseToken != e.LastToken || e.CoveredAt == 0 || e.LeaseExpiresAt == 0):
		return "current lease is not the latest token, or covers nothing, or has no expiry"
	case e.LeaseToken == 0 && (e.CoveredAt != 0 || e.LeaseExpiresAt != 0):
		return "covered wake or expiry without a current lease"
	case e.AdmittedAt <= 0 || e.UpdatedAt < e.AdmittedAt:
		return "timestamps out of order"
	case e.ID == "" || e.WorkflowID == "":
		return "empty ID or workflow ID"
	case e.Context != nil && !sortedUniqueKV(*e.Context):
		return "context keys not sorted and unique"
	case e.MaxAttempts != 0 && e.Tries > e.MaxAttempts:
		return "more tries than the attempt bound allows"
	case uint64(e.Tries) > e.LastToken || e.LeaseToken != 0 && e.Tries == 0:
		return "more tries than claims, or a current lease counted as no try"
	case e.Outcome != nil && checkOutcome(e.Outcome) != "":
		return checkOutcome(e.Outcome)
	}
	return ""
}

// checkLinks verifies the record's parent link and per-execution counts.
func (s *State) checkLinks(e *Execution) string {
	if p := e.Parent; p != nil {
		if s.meta.ForgotBefore > 0 {
			if pr := s.lookup(p.ExecutionID); pr == nil || pr.AdmittedAt() > e.AdmittedAt {
				// Its caller was forgotten (forget.go), and its ID may
				// name another execution since.
				return ""
			}
		}
		st, ok := s.starts.Get(startEntry{Caller: p.ExecutionID, Key: p.StepKey})
		_, retired := s.retired.Get(retiredItem{ID: p.ExecutionID})
		if !retired && s.archive != nil {
			_, retired = s.archive.Retired(p.ExecutionID)
		}
		// A retired parent's start requests are dropped with it.
		if (ok && st.Child != e.ID) || (!ok && !retired) {
			return "parent's start request does not name this child"
		}
	}
	steps := uint32(0)
	s.StepsOf(e.ID, func(string, string) bool { steps++; return true })
	if steps != e.StepCount {
		return "step count " + itoa(uint64(e.StepCount)) + " but " + itoa(uint64(steps)) + " steps"
	}
	watches := len(s.WatchesOf(e.ID))
	if watches != int(e.WatchCount) {
		return "watch count " + itoa(uint64(e.WatchCount)) + " but " + itoa(uint64(watches)) + " watches"
	}
	if e.Status == StatusCancelled {
		// Cancelling ends every execution it started that had not ended, and
		// a cancelled execution holds no lease to start another.
		msg := ""
		s.starts.Ascend(startEntry{Caller: e.ID}, func(st startEntry) bool {
			if st.Caller != e.ID {
				return false
			}
			// A child forgotten and admitted again under its ID is not this
			// start's child.
			if c := s.find(st.Child, nil); c != nil && !c.Terminal() && s.startedBy(c.Parent(), st.Child) {
				msg = "cancelled, but its child " + quote(st.Child) + " is not terminal"
			}
			return msg == ""
		})
		return msg
	}
	return ""
}

// checkSideIndexes verifies that steps, start requests and watches refer to
// existing records, and that the three watch indexes agree.
func (s *State) checkSideIndexes() error {
	var err error
	fail := func(msg string) bool { err = errors.New("fsm: invariant violated: " + msg); return false }
	exists := s.exists
	s.steps.Scan(func(st stepEntry) bool {
		return exists(st.ExecutionID) || fail("step of unknown execution "+quote(st.ExecutionID))
	})
	s.starts.Scan(func(st startEntry) bool {
		// A child may be forgotten while its caller runs, and deleted
		// from the archive since (forget.go).
		return (exists(st.Caller) && (exists(st.Child) || s.meta.ForgotBefore > 0)) || fail("start request with unknown caller or child "+quote(st.Child))
	})
	keys := 0
	s.watches.Scan(func(w watch) bool {
		if w.ID >= s.meta.NextWatchID {
			return fail("watch ID not below the next watch ID")
		}
		if _, ok := s.wexecs.Get(execWatch{ExecutionID: w.ExecutionID, ID: w.ID}); !ok {
			return fail("watch missing from the execution index")
		}
		for _, k := range w.Keys {
			if _, ok := s.wkeys.Get(watchKey{Key: k, ID: w.ID}); !ok {
				return fail("watch missing from the key index")
			}
		}
		keys += len(w.Keys)
		return true
	})
	if err != nil {
		return err
	}
	if s.wexecs.Len() != s.watches.Len() || s.wkeys.Len() != keys {
		return errors.New("fsm: invariant violated: watch indexes disagree in size")
	}
	return nil
}

func quote(s string) string { return "\"" + s + "\"" }

func indexName(leased bool) string {
	if leased {
		return "lease"
	}
	return "due"
}

// hasStarts reports whether an execution has child-start requests recorded.
func (s *State) hasStarts(caller string) bool {
	found := false
	s.starts.Ascend(startEntry{Caller: caller}, func(st startEntry) bool {
		found = st.Caller == caller
		return false
	})
	return found
}
