package fsm

import (
	"crypto/sha256"
	"slices"

	"github.com/tidwall/btree"

	"github.com/execstore/execstore/internal/jsonv"
	"github.com/execstore/execstore/internal/mutant"
)

// Apply applies one command and returns its result. It is deterministic: the
// same commands applied to the same state give the same state and results.
// A command that fails (a conflict, a lost lease...) changes nothing.
func (s *State) Apply(c *Command) Result {
	return s.run(c, false)
}

// Precheck evaluates c against the state without changing it. When mutates is
// false, the result is final: Apply(c) would return the same result and change
// nothing, so the command need not be logged. When mutates is true, the
// result is meaningless and c must be logged and applied.
//
// The Store uses Precheck to answer no-op commands (a duplicate admission, an
// idle claim, a wake that merges into an earlier one) without writing them.
func (s *State) Precheck(c *Command) (r Result, mutates bool) {
	r = s.run(c, true)
	return r, r.Code == mutatesCode
}

// mutatesCode marks a dry run that reached a mutation. It is never returned by
// Apply.
const mutatesCode Code = 255

// run applies c, or with dry set only decides whether it would change the
// state. Checks and mutation share this one path so that Precheck and Apply
// can never disagree.
func (s *State) run(c *Command, dry bool) Result {
	now := c.Now
	if now < s.meta.Now {
		now = s.meta.Now
	}
	if !dry {
		s.meta.Now = now
	}
	switch c.Kind {
	case KindAdmit:
		return s.admit(c, now, dry)
	case KindWake:
		return s.wake(c, now, dry)
	case KindClaim:
		return s.claim(c, now, dry)
	case KindRenew:
		return s.renew(c, now, dry)
	case KindRelease:
		return s.release(c, now, dry)
	case KindAcknowledge:
		return s.acknowledge(&Ack{ExecutionID: c.ExecutionID, Token: c.Token, Outcome: c.Outcome}, now, dry)
	case KindAcknowledgeBatch:
		return s.acknowledgeBatch(c.Acks, now, dry)
	case KindSaveStep:
		return s.saveStep(c, dry)
	case KindStart:
		return s.start(c, now, dry)
	case KindCommit:
		return s.commit(c, now, dry)
	case KindWatch:
		return s.watch(c, dry)
	case KindRetire:
		return s.retire(c, dry)

	case KindPutSchedule:
		return s.putSchedule(c, dry)
	case KindDeleteSchedule:
		return s.deleteSchedule(c, dry)
	case KindFireSchedules:
		return s.fireSchedules(c, now, dry)
	}
	// Commands are validated when decoded and when built; an unknown kind here
	// is a programming error, and guessing would break determinism.
	panic("fsm: apply: unknown command kind " + c.Kind.String())
}

var mutates = Result{Code: mutatesCode}

func (s *State) admit(c *Command, now int64, dry bool) Result {
	id := c.ExecutionID
	if s.exists(id) {
		if !c.Generated {
			return Result{Code: CodeConflict, ID: id}
		}
		if dry {
			return mutates
		}
		id = s.freeID(id)
	}
	if dry {
		return mutates
	}
	e := Execution{
		ID:         id,
		WorkflowID: c.WorkflowID,
		Params:     c.Params,
		HasParams:  c.HasParams,
		Context:    c.Context,
		Status:     StatusAdmitted,
		AdmittedAt: now,
		UpdatedAt:  now,
		DueAt:      now,
	}
	s.put(nil, &e)
	return Result{ID: id, Became: Transitions{Due: true}}
}

// freeID derives an unused ID from a generated one that happens to be taken
// (a caller chose that exact string). Deterministic: it depends only on the
// state.
func (s *State) freeID(id string) string {
	for n := uint64(1); ; n++ {
		cand := id + "-" + itoa(n)
		if !s.exists(cand) {
			return cand
		}
	}
}

func (s *State) wake(c *Command, now int64, dry bool) Result {
	p := s.lookup(c.ExecutionID)
	switch {
	case p == nil:
		return Result{Code: CodeNotFound}
	case p.Terminal():
		return Result{Wake: WakeIgnored}
	case p.DueAt != 0 && p.DueAt <= c.At:
		// Merges into an earlier (or equal) pending wake: nothing changes.
		return Result{Wake: WakeRequested}
	case dry:
		return mutates
	}
	e := *p
	e.DueAt = c.At
	e.UpdatedAt = now
	s.put(p, &e)
	return Result{Wake: WakeRequested, Became: Transitions{Due: true}}
}

// requestWake wakes an execution at `at` as a wake command would, for effects
// of other commands (a child's outcome, a commit). It reports whether the
// execution exists and is not terminal.
func (s *State) requestWake(id string, at, now int64) bool {
	p := s.lookup(id)
	if p == nil || p.Terminal() {
		return false
	}
	if p.DueAt == 0 || at < p.DueAt {
		e := *p
		e.DueAt = at
		e.UpdatedAt = now
		s.put(p, &e)
	}
	return true
}

func (s *State) claim(c *Command, now int64, dry bool) Result {
	first, ok := s.nextClaimable()
	if !ok || first.At > now || c.Limit <= 0 {
		return Result{}
	}
	if dry {
		return mutates
	}
	taken := s.takeClaimable(c.Limit, now)
	leases := make([]Lease, 0, len(taken))
	expires := addSaturating(now, c.Duration)
	for _, k := range taken {
		p := k.e
		e := *p
		// The new lease covers every wake pending at the claim: those an
		// expired, superseded lease covered and those requested since.
		e.CoveredAt = minNonZero(e.CoveredAt, e.DueAt)
		e.DueAt = 0
		if !mutant.ReuseToken || e.LeaseToken == 0 {
			e.LastToken++
		}
		e.LeaseToken = e.LastToken
		e.LeaseExpiresAt = expires
		e.UpdatedAt = now
		stored := s.putRecord(p, &e)
		// Lease expiries mostly come last in their index: Load appends
		// without a search when the key is greater than every other.
		s.leases.Load(claimKey{At: expires, ID: e.ID, e: stored})
		leases = append(leases, Lease{ExecutionID: e.ID, Token: e.LeaseToken, ExpiresAt: expires})
	}
	clear(taken) // the scratch buffer must not keep records alive
	return Result{Leases: leases}
}

// takeClaimable removes and returns the earliest entries claimable at now,
// at most limit of them, from the two claimable indexes together, in
// (time, ID) order. The entries taken from each index are a prefix of it,
// so each is cut with one bulk deletion instead of one search per entry.
func (s *State) takeClaimable(limit int, now int64) []claimKey {
	prefix := func(t *btree.BTreeG[claimKey], buf []claimKey) []claimKey {
		t.Scan(func(k claimKey) bool {
			if k.At > now || len(buf) == limit {
				return false
			}
			buf = append(buf, k)
			return true
		})
		return buf
	}
	due := prefix(s.due, s.claimScratch[0][:0])
	leased := prefix(s.leases, s.claimScratch[1][:0])
	taken := s.claimScratch[2][:0]
	i, j := 0, 0
	for len(taken) < limit && (i < len(due) || j < len(leased)) {
		if j == len(leased) || (i < len(due) && claimLess(due[i], leased[j])) {
			taken = append(taken, due[i])
			i++
		} else {
			taken = append(taken, leased[j])
			j++
		}
	}
	cut := func(t *btree.BTreeG[claimKey], n int) {
		if n == 0 {
			return
		}
		t.DeleteAscend(claimKey{}, func(claimKey) btree.Action {
			if n == 0 {
				return btree.Stop
			}
			n--
			return btree.Delete
		})
	}
	cut(s.due, i)
	cut(s.leases, j)
	clear(due)
	clear(leased)
	s.claimScratch = [3][]claimKey{due[:0], leased[:0], taken[:0]}
	return taken
}

var (
	resultNotFound  = Result{Code: CodeNotFound}
	resultLeaseLost = Result{Code: CodeLeaseLost}
)

// current looks up the lease's execution and reports whether the lease is
// current. A non-nil fail is the final result (p is nil when not found).
func (s *State) current(id string, token uint64) (p *Execution, fail *Result) {
	p = s.lookup(id)
	if p == nil {
		return nil, &resultNotFound
	}
	if p.LeaseToken == 0 || p.LeaseToken != token {
		return p, &resultLeaseLost
	}
	return p, nil
}

func (s *State) renew(c *Command, now int64, dry bool) Result {
	p, fail := s.current(c.ExecutionID, c.Token)
	if fail != nil {
		return *fail
	}
	if dry {
		return mutates
	}
	e := *p
	e.LeaseExpiresAt = addSaturating(now, c.Duration)
	e.UpdatedAt = now
	s.put(p, &e)
	return Result{Lease: Lease{ExecutionID: e.ID, Token: e.LeaseToken, ExpiresAt: e.LeaseExpiresAt}}
}

func (s *State) release(c *Command, now int64, dry bool) Result {
	p, fail := s.current(c.ExecutionID, c.Token)
	if fail != nil {
		return *fail
	}
	if dry {
		return mutates
	}
	e := *p
	due := minNonZero(e.CoveredAt, e.DueAt)
	if retry := addSaturating(now, c.Duration); retry > due {
		due = retry
	}
	e.DueAt = due
	e.CoveredAt = 0
	e.LeaseToken = 0
	e.LeaseExpiresAt = 0
	e.UpdatedAt = now
	s.put(p, &e)
	return Result{Became: Transitions{Due: true}}
}

func (s *State) acknowledge(c *Ack, now int64, dry bool) Result {
	p, fail := s.current(c.ExecutionID, c.Token)
	if fail != nil {
		if p != nil && p.Terminal() {
			// Outcomes are immutable: a late or repeated acknowledgement gets
			// the recorded outcome.
			return Result{Exec: p.value()}
		}
		return *fail
	}
	if dry {
		return mutates
	}
	e := *p
	if mutant.KeepCoveredWakes {
		e.DueAt = minNonZero(e.DueAt, e.CoveredAt)
	}
	e.CoveredAt = 0
	e.LeaseToken = 0
	e.LeaseExpiresAt = 0
	e.UpdatedAt = now
	r := Result{}
	if c.Outcome.Status == StatusSuspended {
		e.Status = StatusSuspended
		r.Became.Due = e.DueAt != 0
	} else {
		e.Status = c.Outcome.Status
		e.Outcome = internOutcome(&c.Outcome)
		e.DueAt = 0
		s.meta.Terminal++
		if s.trackEnded {
			s.ended.Load(dueKey{At: now, ID: e.ID}) // time never goes backwards: mostly an append
		}
		r.Became.Terminal = true
	}
	s.put(p, &e)
	r.Exec = e.value()
	if e.Terminal() {
		if e.WatchCount > 0 {
			s.dropWatches(e.ID)
			r.Exec, _ = s.Get(e.ID) // the watch count changed
		}
		if parent := e.Parent; parent != nil && s.requestWake(parent.ExecutionID, now, now) {
			r.Woken = []string{parent.ExecutionID}
			r.Became.Due = true
		}
	}
	return r
}

// acknowledgeBatch applies each acknowledgement in order as its own
// acknowledge command. A dry run reports a mutation as soon as one of them
// would change something; when none would, each is evaluated against the
// unchanged state, which is then exactly what applying them would see.
func (s *State) acknowledgeBatch(acks []Ack, now int64, dry bool) Result {
	if dry {
		for i := range acks {
			if r := s.acknowledge(&acks[i], now, true); r.Code == mutatesCode {
				return mutates
			}
		}
	}
	r := Result{Acks: make([]Result, len(acks))}
	for i := range acks {
		a := s.acknowledge(&acks[i], now, dry)
		r.Acks[i] = a
		r.Became.Due = r.Became.Due || a.Became.Due
		r.Became.Terminal = r.Became.Terminal || a.Became.Terminal
	}
	return r
}

func (s *State) saveStep(c *Command, dry bool) Result {
	p, fail := s.current(c.ExecutionID, c.Token)
	if fail != nil {
		return *fail
	}
	if _, saved := s.steps.Get(stepEntry{ExecutionID: p.ID, Key: c.Key}); saved {
		return Result{} // the first saved value wins
	}
	if p.StepCount >= MaxStepsPerExecution {
		return Result{Code: CodeLimitExceeded}
	}
	if dry {
		return mutates
	}
	s.steps.Set(stepEntry{ExecutionID: p.ID, Key: c.Key, Value: c.Value})
	e := *p
	e.StepCount++
	s.put(p, &e)
	return Result{}
}

// paramsSum is the SHA-256 of the params' canonical JSON form, so that key
// order and insignificant whitespace do not make two starts differ.
func paramsSum(params string, has bool) [32]byte {
	if !has {
		return [32]byte{}
	}
	canon, err := jsonv.Canonical(nil, []byte(params))
	if err != nil {
		// Params are validated before they are logged; keep the raw bytes so
		// the result stays deterministic even so.
		canon = []byte(params)
	}
	return sha256.Sum256(canon)
}

func (s *State) start(c *Command, now int64, dry bool) Result {
	caller, fail := s.current(c.ExecutionID, c.Token)
	if fail != nil {
		return *fail
	}
	if prev, ok := s.starts.Get(startEntry{Caller: caller.ID, Key: c.Key}); ok {
		if prev.WorkflowID == c.WorkflowID && prev.HasParams == c.HasParams &&
			prev.ParamsSum == paramsSum(c.Params, c.HasParams) {
			return Result{ID: prev.Child}
		}
		return Result{Code: CodeMismatch, ID: prev.Child}
	}
	if dry {
		return mutates
	}
	id := c.ChildID
	if s.exists(id) {
		id = s.freeID(id)
	}
	child := Execution{
		ID:         id,
		WorkflowID: c.WorkflowID,
		Params:     c.Params,
		HasParams:  c.HasParams,
		Context:    caller.Context,
		Parent:     &Parent{ExecutionID: caller.ID, StepKey: c.Key},
		Status:     StatusAdmitted,
		AdmittedAt: now,
		UpdatedAt:  now,
		DueAt:      now,
	}
	s.put(nil, &child)
	s.starts.Set(startEntry{
		Caller:     caller.ID,
		Key:        c.Key,
		Child:      id,
		WorkflowID: c.WorkflowID,
		ParamsSum:  paramsSum(c.Params, c.HasParams),
		HasParams:  c.HasParams,
	})
	return Result{ID: id, Became: Transitions{Due: true}}
}

func (s *State) commit(c *Command, now int64, dry bool) Result {
	if len(c.Writes) == 0 {
		return Result{}
	}
	if dry {
		return mutates
	}
	var fired []uint64
	for _, w := range c.Writes {
		if w.HasValue {
			s.kv.Set(kvEntry{Key: w.Key, Value: w.Value})
		} else {
			s.kv.Delete(kvEntry{Key: w.Key})
		}
		s.wkeys.Ascend(watchKey{Key: w.Key}, func(k watchKey) bool {
			if k.Key != w.Key {
				return false
			}
			fired = append(fired, k.ID)
			return true
		})
	}
	r := Result{}
	for _, id := range fired {
		wt, ok := s.watches.Get(watch{ID: id})
		if !ok {
			continue // fired already by an earlier key of this commit
		}
		s.removeWatch(wt)
		if s.requestWake(wt.ExecutionID, now, now) {
			r.Woken = append(r.Woken, wt.ExecutionID)
			r.Became.Due = true
		}
	}
	return r
}

func (s *State) watch(c *Command, dry bool) Result {
	p := s.lookup(c.ExecutionID)
	switch {
	case p == nil:
		return Result{Code: CodeNotFound}
	case p.Terminal():
		return Result{Wake: WakeIgnored}
	case s.hasWatch(p, c.Keys):
		// The same watch is registered already (a rerun repeating it): it
		// would fire at the same commit, so a second changes nothing.
		return Result{Wake: WakeRequested}
	case p.WatchCount >= MaxWatchesPerExecution:
		return Result{Code: CodeLimitExceeded}
	case dry:
		return mutates
	}
	e := *p
	w := watch{ID: s.meta.NextWatchID, ExecutionID: e.ID, Keys: c.Keys}
	s.meta.NextWatchID++
	s.watches.Set(w)
	s.wexecs.Set(execWatch{ExecutionID: e.ID, ID: w.ID})
	for _, k := range w.Keys {
		s.wkeys.Set(watchKey{Key: k, ID: w.ID})
	}
	e.WatchCount++
	s.put(p, &e)
	return Result{Wake: WakeRequested}
}

// hasWatch reports whether the execution has a watch on exactly keys.
func (s *State) hasWatch(e *Execution, keys []string) bool {
	if e.WatchCount == 0 {
		return false
	}
	found := false
	s.wexecs.Ascend(execWatch{ExecutionID: e.ID}, func(w execWatch) bool {
		if w.ExecutionID != e.ID {
			return false
		}
		ww, _ := s.watches.Get(watch{ID: w.ID})
		found = slices.Equal(ww.Keys, keys)
		return !found
	})
	return found
}

// removeWatch deletes a watch from all three watch indexes.
func (s *State) removeWatch(w watch) {
	s.watches.Delete(w)
	s.wexecs.Delete(execWatch{ExecutionID: w.ExecutionID, ID: w.ID})
	for _, k := range w.Keys {
		s.wkeys.Delete(watchKey{Key: k, ID: w.ID})
	}
	if p := s.lookup(w.ExecutionID); p != nil {
		e := *p
		e.WatchCount--
		s.put(p, &e)
	}
}

// dropWatches removes every watch of a (now terminal) execution.
func (s *State) dropWatches(id string) {
	var ids []uint64
	s.wexecs.Ascend(execWatch{ExecutionID: id}, func(w execWatch) bool {
		if w.ExecutionID != id {
			return false
		}
		ids = append(ids, w.ID)
		return true
	})
	for _, wid := range ids {
		if w, ok := s.watches.Get(watch{ID: wid}); ok {
			s.removeWatch(w)
		}
	}
}
