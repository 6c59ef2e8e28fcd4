package fsm

import (
	"crypto/sha256"
	"slices"

	"github.com/execstore/execstore/internal/jsonv"
	"github.com/execstore/execstore/internal/mutant"
)

// Apply applies one command and returns its result. It is deterministic: the
// same commands applied to the same state give the same state and results.
// A command that fails (a conflict, a lost lease...) changes nothing.
func (s *State) Apply(c *Command) Result {
	return s.run(c, false)
}

// Buffers lend their capacity to ApplyWith: a claim's leases and an
// acknowledge-batch's results are built in them when they have room, or in
// new slices that replace them, so that a caller that keeps its Buffers
// between commands does not allocate those slices for each one. The
// result's slices alias the buffers until the next ApplyWith with them.
type Buffers struct {
	Leases []Lease
	Acks   []Result
}

// ApplyWith is Apply, building the result's leases and acknowledgement
// results in buf (see Buffers).
func (s *State) ApplyWith(c *Command, buf *Buffers) Result {
	s.buf = buf
	r := s.run(c, false)
	s.buf = nil
	return r
}

// leaseBuf returns an empty slice with room for n leases: ApplyWith's
// buffer, grown if needed.
func (s *State) leaseBuf(n int) []Lease {
	if s.buf == nil {
		return make([]Lease, 0, n)
	}
	if cap(s.buf.Leases) < n {
		s.buf.Leases = make([]Lease, 0, n)
	}
	return s.buf.Leases[:0]
}

// ackBuf returns a slice of n results: ApplyWith's buffer, grown if needed.
// Each is overwritten by its caller.
func (s *State) ackBuf(n int) []Result {
	if s.buf == nil {
		return make([]Result, n)
	}
	if cap(s.buf.Acks) < n {
		s.buf.Acks = make([]Result, n)
	}
	return s.buf.Acks[:n]
}

// Precheck evaluates c against the state without changing it. When mutates is
// false, the result is final: Apply(c) would return the same result and change
// nothing, so the command need not be logged. When mutates is true, the
// result is meaningless and c must be logged and applied.
//
// The Store uses Precheck to answer no-op commands (a duplicate admission, an
// idle claim, a wake that merges into an earlier one) without writing them.
//
// Precheck never changes the state: in a build with the invariants tag it
// checks so, and panics when a handler wrote before it decided.
func (s *State) Precheck(c *Command) (r Result, mutates bool) {
	if invariantsBuild {
		defer s.unchanged(s.fingerprint(), c)
	}
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
	k := kindOf(c.Kind)
	if k == nil {
		// Commands are validated when decoded and when built; an unknown
		// kind here is a programming error, and guessing would break
		// determinism.
		panic("fsm: apply: unknown command kind " + c.Kind.String())
	}
	r := k.apply(s, c, now, dry)
	if s.roomFreed {
		// A lease of a queue with a limit ended: a claim may take more.
		s.roomFreed = false
		r.Became.Due = true
	}
	return r
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

		MaxAttempts: uint16(c.MaxAttempts),
	}
	e.Queue = ownQueue(c.Queue, c.WorkflowID)
	s.setPriority(id, uint8(c.Priority))      // priority.go
	s.setDeadline(id, c.Deadline)             // deadline.go
	s.setConcurrencyKey(id, c.ConcurrencyKey) // conckeys.go
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
	case p.DueAt() != 0 && (p.DueAt() < c.At || (p.DueAt() == c.At && !mutant.WakeAtPendingTimeWrites)):
		// Merges into an earlier (or equal) pending wake: nothing changes.
		return Result{Wake: WakeRequested}
	case dry:
		return mutates
	}
	e := p.Value()
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
	if p.DueAt() == 0 || at < p.DueAt() {
		e := p.Value()
		e.DueAt = at
		e.UpdatedAt = now
		s.put(p, &e)
	}
	return true
}

func (s *State) claim(c *Command, now int64, dry bool) Result {
	if c.RequestKey != "" {
		if g, ok := s.liveGrant(c.RequestKey, now); ok {
			return s.replayGrant(g, c, dry) // claimkeys.go
		}
	}
	sel := s.selectQueues(c.Queues)
	if mutant.ClaimServesEveryQueue {
		sel = s.queueList
	}
	first, ok := s.firstIn(sel)
	if !ok || first.At > now || c.Limit <= 0 {
		return Result{}
	}
	if dry {
		return mutates
	}
	var taken []claimKey
	if len(sel) == 1 && len(sel[0].lanes) == 1 {
		// Not skipped: firstIn found an entry claimable at now.
		most, due, _ := s.claimBounds(sel[0], c.Limit, now)
		taken = s.takeClaimable(sel[0].lanes[0], FailLimit(c.Limit), most, due, now)
	} else {
		taken = s.takeClaimableFrom(sel, c.Limit, now)
	}
	leases := s.leaseBuf(len(taken))
	expires := addSaturating(now, c.Duration)
	failing := false
	for i, k := range taken {
		p := k.e
		if p.Exhausted() {
			taken[i].At, failing = -1, true // failed below (a lease expiry is never negative)
			continue
		}
		e := p.Value()
		if e.Tries < 1<<16-1 { // saturates: without a bound it only needs to stay above 0
			e.Tries++
		}
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
		q := s.queueNamed(e.QueueName())
		if k, key := s.keyedOf(q, e.ID); k != nil && k.waitedForSlot(p) { // conckeys.go
			k.keyClaimed(key, taken[i].At, e.ID)
		}
		stored := s.putRecord(p, &e)
		// Lease expiries mostly come last in their index: Load appends
		// without a search when the key is greater than every other.
		q.lane(s.priorityOf(e.ID)).leases.Load(claimKey{At: expires, e: stored})
		if len(s.rates) > 0 {
			s.noteGrant(e.QueueName(), now) // rate.go
		}
		leases = append(leases, Lease{ExecutionID: e.ID, Token: e.LeaseToken, ExpiresAt: expires})
	}
	r := Result{Leases: leases}
	if failing {
		// The lease of the last allowed attempt expired: the execution fails
		// instead of being delivered again. After the leasing, so that a
		// parent woken here is not one whose taken entry is about to be
		// leased; each record is looked up again, as a wake may have replaced
		// it.
		for _, k := range taken {
			if k.At == -1 {
				p := s.lookup(k.e.ID())
				s.end(p, exhaustedOutcome(p.MaxAttempts(), nil), now, &r)
			}
		}
	}
	clear(taken) // the scratch buffer must not keep records alive
	if c.RequestKey != "" && len(leases) > 0 {
		s.keepGrant(c, now, leases)
	}
	return r
}

// takeClaimable removes and returns the earliest entries claimable at now
// from a lane's two claimable indexes together, in (time, ID) order: at most limit
// to lease, at most room of them due wakes (the rest expired leases), and,
// among them, at most failLimit expired leases of a last
// allowed attempt (exhausted), which the claim fails instead; it stops at
// whichever bound it reaches first. The entries taken from each index are a
// prefix of it, so each is cut with one bulk deletion instead of one search
// per entry.
func (s *State) takeClaimable(q *lane, failLimit, limit, room int, now int64) []claimKey {
	due := claimPrefix(q.due, s.claimScratch[0][:0], false, room, failLimit, now)
	leased := claimPrefix(q.leases, s.claimScratch[1][:0], true, limit, failLimit, now)
	taken := s.claimScratch[2][:0]
	i, j := 0, 0
	for leasable, failing := 0, 0; leasable < limit && failing < failLimit && (i < len(due) || j < len(leased)); {
		if j == len(leased) || (i < len(due) && claimLess(due[i], leased[j])) {
			taken = append(taken, due[i])
			i++
			leasable++
		} else {
			taken = append(taken, leased[j])
			if leased[j].e.Exhausted() {
				failing++
			} else {
				leasable++
			}
			j++
		}
	}
	cutPrefix(q.due, i)
	cutPrefix(q.leases, j)
	clear(due)
	clear(leased)
	s.claimScratch = [3][]claimKey{due[:0], leased[:0], taken[:0]}
	return taken
}

var (
	resultNotFound       = Result{Code: CodeNotFound}
	resultLeaseLost      = Result{Code: CodeLeaseLost}
	resultLeaseCancelled = Result{Code: CodeLeaseCancelled}
)

// current looks up the lease's execution and reports whether the lease is
// current. A non-nil fail is the final result (p is nil when not found).
func (s *State) current(id string, token uint64) (p *stored, fail *Result) {
	p = s.lookup(id)
	if p == nil {
		return nil, &resultNotFound
	}
	if p.LeaseToken() == 0 || (p.LeaseToken() != token && !(mutant.TokenZeroPasses && token == 0)) {
		if p.Status() == StatusCancelled {
			return p, &resultLeaseCancelled
		}
		return p, &resultLeaseLost
	}
	return p, nil
}

// suspendedLast is SuspendedBy without the try count (a mutation's).
func suspendedLast(p *stored, token uint64) bool {
	v := p.Value()
	return v.LeaseToken == 0 && v.LastToken == token && v.Status == StatusSuspended
}

func (s *State) renew(c *Command, now int64, dry bool) Result {
	p, fail := s.current(c.ExecutionID, c.Token)
	if fail != nil {
		return *fail
	}
	if dry {
		return mutates
	}
	e := p.Value()
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
	if p.Exhausted() {
		// The last allowed attempt ended without an outcome.
		var r Result
		s.end(p, exhaustedOutcome(p.MaxAttempts(), c.Cause), now, &r)
		return r
	}
	e := p.Value()
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
		if p != nil && (p.Terminal() || c.Outcome.Status == StatusSuspended && (p.SuspendedBy(c.Token) || mutant.SuspensionReplayIgnoresTries && suspendedLast(p, c.Token))) {
			// Outcomes are immutable: a late or repeated acknowledgement gets
			// the recorded outcome. A repeat of the suspension that ended
			// its own lease, with nothing since, gets the record as it is:
			// the caller (Store) tells a replay from a late one.
			return Result{Exec: p.Value().WithoutPositions(), Priority: s.keptPriority(p.ID()), Deadline: s.DeadlineOf(p.ID()), ConcurrencyKey: s.keyOf(p.ID()), Unchanged: true}
		}
		return *fail
	}
	if dry {
		return mutates
	}
	e := p.Value()
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
		e.Tries = 0 // the delivery ended with an outcome: the next run has every attempt again
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
	r.Exec, r.Priority, r.Deadline, r.ConcurrencyKey = e.WithoutPositions(), s.keptPriority(e.ID), s.DeadlineOf(e.ID), s.keyOf(e.ID)
	if e.Terminal() {
		if e.WatchCount > 0 {
			s.dropWatches(e.ID)
			r.Exec, _ = s.Get(e.ID) // the watch count changed
		}
		if parent := e.Parent; parent != nil && s.startedBy(parent, e.ID) && s.requestWake(parent.ExecutionID, now, now) {
			r.Woken = []string{parent.ExecutionID}
			r.Became.Due = true
		}
	}
	if s.roomFreed {
		// Here, not only in run: each acknowledgement of a batch says so.
		s.roomFreed = false
		r.Became.Due = true
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
	var r Result
	if dry {
		r.Acks = make([]Result, len(acks))
	} else {
		r.Acks = s.ackBuf(len(acks))
	}
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
	if _, saved := s.steps.Get(stepEntry{ExecutionID: p.ID(), Key: c.Key}); saved {
		return Result{Unchanged: true} // the first saved value wins
	}
	if p.StepCount() >= MaxStepsPerExecution {
		return Result{Code: CodeLimitExceeded}
	}
	if dry {
		return mutates
	}
	s.steps.Set(stepEntry{ExecutionID: p.ID(), Key: c.Key, Value: c.Value})
	e := p.Value()
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
	if prev, ok := s.starts.Get(startEntry{Caller: caller.ID(), Key: c.Key}); ok {
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
		Context:    caller.Context(),
		Parent:     &Parent{ExecutionID: caller.ID(), StepKey: c.Key},
		Status:     StatusAdmitted,
		AdmittedAt: now,
		UpdatedAt:  now,
		DueAt:      now,

		MaxAttempts: caller.MaxAttempts(), // a child runs under its parent's bound
		// A child is in its own workflow's queue, as an admission is, unless
		// the start names one: its parent's workers may not run it.
		Queue: ownQueue(c.Queue, c.WorkflowID),
	}
	s.setPriority(id, s.priorityOf(caller.ID())) // a child runs at its parent's priority
	s.setDeadline(id, c.Deadline)
	s.setConcurrencyKey(id, c.ConcurrencyKey) // conckeys.go: the start's, never the parent's
	s.put(nil, &child)
	s.starts.Set(startEntry{
		Caller:     caller.ID(),
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
	case p.WatchCount() >= MaxWatchesPerExecution:
		return Result{Code: CodeLimitExceeded}
	case dry:
		return mutates
	}
	e := p.Value()
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
func (s *State) hasWatch(e *stored, keys []string) bool {
	if e.WatchCount() == 0 {
		return false
	}
	found := false
	s.wexecs.Ascend(execWatch{ExecutionID: e.ID()}, func(w execWatch) bool {
		if w.ExecutionID != e.ID() {
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
		e := p.Value()
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

// ---- Cancellation and bounded attempts ----------------------------------------

// FailLimit is how many executions whose last allowed attempt expired a claim
// of the given limit fails, at most, besides the limit it leases: they take
// no place among its leases, and the work of one claim stays bounded.
func FailLimit(limit int) int { return max(limit, 64) }

// cancel ends a non-terminal execution with StatusCancelled, and in the same
// command every non-terminal execution it started, recursively, each with
// the same outcome. A cancelled execution ends as a terminal
// acknowledgement would end it: no lease (its holder's next fenced write is
// refused), no wake, no watch; its parent, if it has one and is not
// terminal, is woken. Cancelling a terminal execution changes nothing and
// returns its record, as a late acknowledgement does.
func (s *State) cancel(c *Command, now int64, dry bool) Result {
	p := s.lookup(c.ExecutionID)
	switch {
	case p == nil:
		return resultNotFound
	case p.Terminal():
		if dry && mutant.CancelOfTerminalWrites {
			return mutates // logged, and then applied as the no-op it is
		}
		return Result{Exec: p.Value().WithoutPositions(), Priority: s.keptPriority(p.ID()), ConcurrencyKey: s.keyOf(p.ID())}
	case dry:
		return mutates
	}
	out := &Outcome{Status: StatusCancelled, Error: &ErrorInfo{Name: NameCancelled, Message: c.Reason, Code: CodeCancelled}}
	var r Result
	s.endTree(p, out, out, now, &r) // deadline.go
	r.Exec, _ = s.Get(c.ExecutionID)
	r.Priority, r.ConcurrencyKey = s.keptPriority(c.ExecutionID), s.keyOf(c.ExecutionID)
	return r
}

// end records a terminal outcome for a stored, non-terminal execution that no
// acknowledgement gave it (a cancellation, exhausted attempts): it clears the
// lease and the wakes, drops the watches, wakes the parent, and notes in r
// what became terminal or due.
func (s *State) end(p *stored, out *Outcome, now int64, r *Result) {
	e := p.Value()
	e.Status, e.Outcome = out.Status, out
	e.DueAt, e.CoveredAt, e.LeaseToken, e.LeaseExpiresAt = 0, 0, 0, 0
	e.UpdatedAt = now
	s.meta.Terminal++
	if s.trackEnded {
		s.ended.Load(dueKey{At: now, ID: e.ID})
	}
	s.put(p, &e)
	if e.WatchCount > 0 {
		s.dropWatches(e.ID)
	}
	r.Became.Terminal = true
	if parent := e.Parent; parent != nil && s.startedBy(parent, e.ID) && s.requestWake(parent.ExecutionID, now, now) {
		r.Woken = append(r.Woken, parent.ExecutionID)
		r.Became.Due = true
	}
}

// exhaustedOutcome is the failure of an execution whose last allowed attempt
// ended without an outcome: the release's cause, or else a lease-expired
// error, wrapped in an ATTEMPTS_EXHAUSTED error. The chain is cut to
// MaxErrorDepth levels.
func exhaustedOutcome(maxAttempts uint16, cause *ErrorInfo) *Outcome {
	if cause == nil {
		cause = &ErrorInfo{Name: NameLeaseExpired, Message: "the lease of the last attempt expired"}
	}
	top := &ErrorInfo{
		Name:    NameAttemptsExhausted,
		Message: "no attempt of " + itoa(uint64(maxAttempts)) + " ended with an outcome",
		Code:    CodeAttemptsExhausted,
		Cause:   cutChain(cause, MaxErrorDepth-1),
	}
	return &Outcome{Status: StatusFailed, Error: top}
}

// cutChain returns an error chain of at most depth levels: e itself when it
// is short enough, else a copy of its first levels. Recorded chains are never
// changed, so a short one is shared.
func cutChain(e *ErrorInfo, depth int) *ErrorInfo {
	n := 0
	for x := e; x != nil; x = x.Cause {
		n++
	}
	if n <= depth {
		return e
	}
	var head *ErrorInfo
	link := &head
	for x := e; x != nil && depth > 0; x, depth = x.Cause, depth-1 {
		c := &ErrorInfo{Name: x.Name, Message: x.Message, Code: x.Code}
		*link = c
		link = &c.Cause
	}
	return head
}
