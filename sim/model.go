package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/jsonv"
)

// model is the reference: API.md's semantics in plain maps and slices, written
// from the contract and not from the state machine. The simulator applies
// every acknowledged operation to it and compares the store with it.
//
// Times are nanoseconds since the Unix epoch; 0 means none.
type model struct {
	lim execstore.Limits

	last    int64 // the latest time the store stamped (the store's clock never goes back)
	execs   map[string]*mexec
	order   []string // execution IDs in admission order, to choose from deterministically
	kv      map[string]string
	watches []*mwatch // in registration order
	touched []string  // executions the latest operation may have changed
	seq     uint64    // the change feed's latest position (feed.go)

	// quiet: the contract promises that the latest operation writes nothing
	// (a refusal, a lost lease, a no-op such as cancelling a terminal
	// execution; see nothing). writerLogs: a stamp of the latest operation
	// made the writer log commands of its own first (it retired an
	// execution or reached a schedule's occurrence), so the log moves even
	// under a quiet request. Both are reset before each operation (compare).
	quiet, writerLogs bool
	// cancelled: how many executions the latest cancel ended, its tree's
	// live part (coverage).
	cancelled int

	scheds map[string]*msched // schedules.go
	// qsettings: each queue's settings (queue_settings.go).
	qsettings map[string]execstore.QueueSettings
	// granted: the time of every lease granted of each queue with a rate
	// limit since its rate was put, oldest first (queue_settings.go).
	granted map[string][]int64
	// rateHeld: the latest claim left an execution its queue's rate held
	// back; prioritized: it leased an execution before an earlier one of a
	// lower priority (coverage); keyHeld: it left an execution waiting for a
	// slot of its concurrency key (coverage).
	rateHeld, prioritized, keyHeld bool
	// expired: the writer ended executions at their deadlines before the
	// latest operation; expiredTree: and an execution one of them started
	// (coverage).
	expired, expiredTree bool

	retention time.Duration // Options.Retention; 0: off (retire.go)
	archive   bool          // Options.Archive: retired records are read back Archived
	// forgetAfter is Options.ForgetAfter; 0: off (retire.go). forgotten
	// holds every ID forgotten (coverage: one admitted again), forgot how
	// many the latest operation's stamp forgot, readmitted whether it
	// admitted a forgotten ID again.
	forgetAfter time.Duration
	forgotten   map[string]bool
	forgot      int
	readmitted  bool

	// grants: what each keyed claim leased, by request key, kept for its
	// lease duration (ClaimRequest.RequestKey). Expired ones stay here, as
	// a lookup checks the expiry; the workload stays far below the store's
	// bound on the leases kept, so nothing is ever evicted (claim checks).
	grants      map[string]*mgrant
	grantLeases int
}

// mgrant is one keyed claim's grant.
type mgrant struct {
	expires int64
	limit   int
	dur     time.Duration
	leases  []execstore.Lease // as granted; ExpiresAt as at the claim
}

// mexec is one execution in the model.
type mexec struct {
	id, workflow string
	queue        string            // the queue named at admission; "": the workflow's own (and once retired)
	prio         int               // 1 (claimed first) to 5; 0 once retired
	ckey         string            // its concurrency key; "": none (and once retired)
	deadline     int64             // when it fails unless it has ended; 0: none
	params       []byte            // nil: no params
	context      map[string]string // nil: no context
	status       execstore.Status
	outcome      *execstore.Outcome
	parent       *execstore.Parent
	admittedAt   int64
	updatedAt    int64

	due       int64  // earliest pending wake not covered by the current lease
	covered   int64  // earliest pending wake the current lease covers
	token     uint64 // the current lease's token; 0: no current lease
	expires   int64  // the current lease's expiry
	lastToken uint64 // the highest token issued
	attempts  int    // deliveries claimed

	// Bounded attempts: the admission's bound (0: none), and the deliveries
	// claimed since the latest suspended acknowledgement (counted only under
	// a bound).
	maxAttempts, tries int

	steps  map[string]string
	starts map[string]mstart // by step key

	admitSeq, changeSeq uint64 // feed positions of its admission and latest change (feed.go)
	changeAt            int64  // the time of its latest change

	retired bool // retention dropped its params, context, steps and starts (retire.go)

	// recordedBy is the acknowledgement's outcome that made it terminal;
	// nil while it is live, or when a cancellation or exhausted attempts
	// ended it. A repeat of it under the last lease is a replay.
	recordedBy *outcome
	// suspendedBy is the token of the lease whose acknowledgement last
	// suspended it (0: none). A suspension repeated under it while no lease
	// is current and no claim came after is a replay.
	suspendedBy uint64
}

// mstart is a recorded child start: a repeat must match workflow and params
// (params compared by their class, which the workload's catalog assigns so
// that the same object written differently has the same class).
type mstart struct {
	child, workflow, class string
}

type mwatch struct {
	exec string
	keys []string
}

func newModel(lim execstore.Limits) *model {
	return &model{lim: lim, execs: map[string]*mexec{}, kv: map[string]string{}, grants: map[string]*mgrant{}}
}

// clone returns an independent copy, for the candidates of an unacknowledged
// operation.
func (m *model) clone() *model {
	c := *m
	c.execs = make(map[string]*mexec, len(m.execs))
	for id, e := range m.execs {
		ce := *e
		ce.steps = maps.Clone(e.steps)
		ce.starts = maps.Clone(e.starts)
		c.execs[id] = &ce
	}
	c.order = slices.Clone(m.order)
	c.forgotten = maps.Clone(m.forgotten)
	c.kv = maps.Clone(m.kv)
	c.watches = slices.Clone(m.watches)
	c.touched = nil
	c.quiet, c.writerLogs = false, false
	c.scheds = make(map[string]*msched, len(m.scheds))
	for id, s := range m.scheds {
		cs := *s
		c.scheds[id] = &cs
	}
	c.grants = maps.Clone(m.grants) // a grant is never changed once made
	c.qsettings = maps.Clone(m.qsettings)
	c.granted = make(map[string][]int64, len(m.granted))
	for q, g := range m.granted {
		c.granted[q] = slices.Clone(g)
	}
	return &c
}

// stamp is the time of a command that reaches the store's writer: never
// earlier than any earlier command's. The writer reaches the schedules'
// occurrences due at that time first (schedules.go), after it retires the
// terminal executions the retention has passed (retire.go) and ends those
// whose deadlines have come (expireDeadlines); when it does any, it logs
// commands of its own, and writerLogs says so.
func (m *model) stamp(clock int64) int64 {
	m.last = max(m.last, clock)
	retired := m.retire(m.last)
	forgot := m.forget(m.last)
	expired := m.expireDeadlines(m.last)
	reached := m.reachOccurrences(m.last)
	m.writerLogs = m.writerLogs || retired || forgot || expired || reached
	return m.last
}

// nothing marks the latest operation as one the contract promises writes
// nothing, and returns its answer r. Only the contract's promises are
// marked: a request refused before it reaches the writer (an invalid
// argument, a limit), an unknown execution or schedule, an ID in use, a
// lease that is not current (but for what it answers), a wake that merges
// into a pending one or finds the execution terminal, a claim that finds
// nothing due, a repeated step save or child start, a watch of a terminal
// execution, a cancel of a terminal execution, a put of the schedule
// stored, and every read.
func (m *model) nothing(r result) result {
	m.quiet = true
	return r
}

func (m *model) touch(ids ...string) { m.touched = append(m.touched, ids...) }

func (e *mexec) terminal() bool { return e.status.Terminal() }

// claimable is when the execution can next be claimed: its lease's expiry
// while a lease is current, else its earliest pending wake.
func (e *mexec) claimable() (int64, bool) {
	switch {
	case e.terminal():
		return 0, false
	case e.token != 0:
		return e.expires, true
	case e.due != 0:
		return e.due, true
	}
	return 0, false
}

// wakeAt requests a wake as RequestWake does; it reports whether the due time
// moved.
func (e *mexec) wakeAt(at, now int64) bool {
	if e.due == 0 || at < e.due {
		e.due = at
		e.updatedAt = now
		return true
	}
	return false
}

func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

func addClamped(a int64, d time.Duration) int64 {
	if d > 0 && a > maxNanos-int64(d) {
		return maxNanos
	}
	return a + int64(d)
}

const maxNanos = int64(^uint64(0) >> 1)

// result is what an operation returned, in a form both the model and the store
// produce and go-cmp can diff.
type result struct {
	Code   string // execstore.ErrorCode of the error, "" without one
	ID     string
	Wake   execstore.WakeResult
	Leases []execstore.Lease
	Lease  *execstore.Lease
	Record *execstore.Record
	Value  json.RawMessage
	Found  bool
	Batch  []result
	// An acknowledgement's in a batch (AckResult): whether the outcome
	// recorded is its own, and whether it repeats the acknowledgement that
	// recorded it.
	Applied, Replayed bool

	Records   []execstore.Record     // list: every page's records, in order
	Feed      *execstore.ChangesPage // changes
	Schedule  *execstore.Schedule
	Schedules []execstore.Schedule
	Queue     *execstore.QueueSettings // put-queue
}

func fail(code string) result { return result{Code: code} }

const (
	codeInvalidEvent  = "INVALID_EXECUTION_EVENT"
	codeInvalidArg    = "INVALID_ARGUMENT"
	codeConflict      = "EXECUTION_ID_CONFLICT"
	codeNotFound      = "EXECUTION_NOT_FOUND"
	codeLeaseLost     = "LEASE_LOST"
	codeMismatch      = "START_REQUEST_MISMATCH"
	codeStorage       = "STORAGE_FAILED"
	codeCanceled      = "CANCELED"
	codeLimit         = "LIMIT_EXCEEDED"
	codeSchedNotFound = "SCHEDULE_NOT_FOUND"
	// codeBadGenerated is the model's answer when the store generated an ID
	// that is invalid or already used; the store never answers it.
	codeBadGenerated = "GENERATED_ID_NOT_NEW"
)

// ---- Validation, from API.md and the configured limits ---------------------

// validID is the rule for execution and workflow IDs.
func validID(id string) bool {
	if id == "" || len(id) > execstore.IDBytes || !utf8Valid(id) {
		return false
	}
	return !strings.ContainsFunc(id, isControl)
}

func (m *model) validKey(k string) bool {
	return k != "" && len(k) <= m.lim.KeyBytes && utf8Valid(k)
}

func (m *model) validValue(v value) bool {
	return v.json && len(v.data) <= m.lim.ValueBytes
}

// ---- Operations ------------------------------------------------------------

func (m *model) admit(a admitArgs, clock int64, generated string) result {
	if (a.id != "" && !validID(a.id)) || !validID(a.workflow) || !a.params.valid || !a.context.valid ||
		len(a.params.data)+a.context.size() > m.lim.EventBytes || a.maxAttempts < 0 || a.maxAttempts > execstore.MaxAttemptsLimit ||
		(a.queue != "" && !validID(a.queue)) || a.priority < 0 || a.priority > execstore.PriorityLast ||
		len(a.ckey) > execstore.MaxConcurrencyKeyBytes || !utf8Valid(a.ckey) {
		return m.nothing(fail(codeInvalidEvent))
	}
	now := m.stamp(clock)
	id := a.id
	if id == "" {
		if !m.fresh(generated) {
			return fail(codeBadGenerated)
		}
		id = generated
	} else if m.execs[id] != nil {
		return m.nothing(fail(codeConflict))
	}
	m.readmitted = m.readmitted || m.forgotten[id]
	m.create(&mexec{
		id: id, workflow: a.workflow, params: a.params.bytes(), context: a.context.copy(),
		status: execstore.StatusAdmitted, admittedAt: now, updatedAt: now, due: now, maxAttempts: a.maxAttempts,
		queue: map[bool]string{true: "", false: a.queue}[a.queue == a.workflow], prio: a.priority, deadline: a.deadline,
		ckey: a.ckey,
	})
	return result{ID: id}
}

// fresh reports whether id can be an ID the store generated: valid, and
// never used.
func (m *model) fresh(id string) bool {
	return validID(id) && m.execs[id] == nil
}

func (m *model) create(e *mexec) {
	if e.prio == 0 {
		e.prio = execstore.PriorityDefault
	}
	e.steps, e.starts = map[string]string{}, map[string]mstart{}
	m.changeAt(e, e.admittedAt)
	m.execs[e.id] = e
	m.order = append(m.order, e.id)
	m.touch(e.id)
}

func (m *model) wake(id string, at time.Time, clock int64) result {
	if at.After(time.Unix(0, maxNanos)) {
		return m.nothing(fail(codeInvalidArg))
	}
	if !validID(id) {
		return m.nothing(fail(codeNotFound))
	}
	now := m.stamp(clock)
	e := m.execs[id]
	switch {
	case e == nil:
		return m.nothing(fail(codeNotFound))
	case e.terminal():
		return m.nothing(result{Wake: execstore.WakeIgnored})
	}
	ns := int64(1) // a time before the epoch is in the past
	if at.After(time.Unix(0, 1)) {
		ns = at.UnixNano()
	}
	m.touch(id)
	if !e.wakeAt(ns, now) {
		return m.nothing(result{Wake: execstore.WakeRequested}) // merged into the pending wake
	}
	return result{Wake: execstore.WakeRequested}
}

func (m *model) claim(limit int, d time.Duration, key string, queues []string, clock int64) result {
	if limit < 1 || limit > m.lim.ClaimLimit || d <= 0 || d > m.lim.LeaseDuration || len(key) > execstore.MaxRequestKeyLen ||
		len(queues) > execstore.MaxClaimQueues || slices.ContainsFunc(queues, func(q string) bool { return !validID(q) }) {
		return m.nothing(fail(codeInvalidArg))
	}
	now := m.stamp(clock)
	if g := m.grants[key]; key != "" && g != nil && g.expires > now {
		// A repeat of a keyed claim within its lease duration: the leases
		// it granted that are still current, as they are now; nothing new.
		if g.limit != limit || g.dur != d {
			return m.nothing(fail(codeInvalidArg))
		}
		leases := []execstore.Lease{}
		for _, l := range g.leases {
			if e := m.execs[l.ExecutionID]; e != nil && e.token == l.Token {
				leases = append(leases, execstore.Lease{ExecutionID: l.ExecutionID, Token: l.Token, ExpiresAt: timeOf(e.expires)})
			}
		}
		return m.nothing(result{Leases: leases})
	}
	r := m.claimDue(limit, d, queues, now)
	if key != "" && len(r.Leases) > 0 {
		m.grants[key] = &mgrant{expires: addClamped(now, d), limit: limit, dur: d, leases: r.Leases}
		if m.grantLeases += len(r.Leases); m.grantLeases > 131072/2 { // ClaimRequest.RequestKey: 131,072 leases kept
			panic("sim: the workload's keyed claims come near the store's bound on the leases it keeps")
		}
	}
	return r
}

// claimDue is a claim without a request key, at now, of the named queues
// (every queue when none is named).
func (m *model) claimDue(limit int, d time.Duration, queues []string, now int64) result {
	type cand struct {
		prio int
		at   int64
		id   string
	}
	var due []cand
	m.rateHeld, m.prioritized, m.keyHeld = false, false, false
	parked := m.keyParked()  // waiting for a slot of their key: no claim takes them (conckeys.go)
	room := map[string]int{} // each queue's room at the claim (queue_settings.go)
	// rate: each rate-limited queue's rate room at the claim; once its
	// leases are granted, the claim takes nothing more of the queue, not
	// even an expired lease to fail.
	rate, taken := map[string]int{}, map[string]int{}
	for _, id := range m.order {
		e := m.execs[id]
		if len(queues) > 0 && !slices.Contains(queues, e.queueName()) {
			continue
		}
		if _, ok := room[e.queueName()]; !ok {
			room[e.queueName()] = m.room(e.queueName(), limit)
			rate[e.queueName()] = m.rateRoom(e.queueName(), now)
		}
		// A paused queue gives nothing; a queue without room, none of its
		// due executions (its expired leases are superseded, not added).
		if r := room[e.queueName()]; r < 0 || (r == 0 && e.token == 0) {
			continue
		}
		if at, ok := m.execs[id].claimable(); ok && at <= now {
			if parked[id] {
				m.keyHeld = true
				continue
			}
			due = append(due, cand{e.prio, at, id})
		}
	}
	// In (priority, time, ID) order.
	slices.SortFunc(due, func(a, b cand) int {
		if a.prio != b.prio {
			return a.prio - b.prio
		}
		if a.at != b.at {
			return compare(a.at, b.at)
		}
		return strings.Compare(a.id, b.id)
	})
	// In that order, the claim leases up to limit of them; an expired lease
	// of the last allowed attempt is not leased but failed, and takes no
	// place among the leases (at most max(limit, 64) such, and the claim
	// stops there too). The leasing comes first: a failure's parent woken
	// by it is then woken during its delivery.
	if len(due) == 0 {
		return m.nothing(result{Leases: []execstore.Lease{}})
	}
	leases := []execstore.Lease{}
	var exhausted []*mexec
	for _, c := range due {
		if len(leases) == limit || len(exhausted) == max(limit, 64) {
			break
		}
		e := m.execs[c.id]
		if r := rate[e.queueName()]; r >= 0 && taken[e.queueName()] == r {
			m.rateHeld = true
			continue
		}
		if e.exhausted() {
			exhausted = append(exhausted, e)
			continue
		}
		if e.token == 0 { // a due execution takes a place of its queue's room
			if room[e.queueName()] == 0 {
				continue
			}
			room[e.queueName()]--
		}
		e.covered = earliest(e.covered, e.due)
		e.due = 0
		e.lastToken++
		e.attempts++
		if e.maxAttempts > 0 {
			e.tries++
		}
		e.token = e.lastToken
		e.expires = addClamped(now, d)
		e.updatedAt = now
		m.touch(e.id)
		leases = append(leases, execstore.Lease{ExecutionID: e.id, Token: e.token, ExpiresAt: timeOf(e.expires)})
		taken[e.queueName()]++
		m.prioritized = m.prioritized || slices.ContainsFunc(due, func(d cand) bool { return d.prio > c.prio && d.at < c.at })
		if _, ok := m.granted[e.queueName()]; ok {
			m.granted[e.queueName()] = append(m.granted[e.queueName()], now)
		}
	}
	for _, e := range exhausted {
		m.end(e, exhaustedOutcome(nil), now)
	}
	return result{Leases: leases}
}

// dueOutside reports whether an execution outside the named queues is
// claimable at the model's time: a claim of those queues must leave it.
func (m *model) dueOutside(queues []string) bool {
	for _, id := range m.order {
		e := m.execs[id]
		if at, ok := e.claimable(); ok && at <= m.last && !slices.Contains(queues, e.queueName()) {
			return true
		}
	}
	return false
}

// queueName is the queue e is claimed from: the one named at its
// admission, else its workflow's own.
func (e *mexec) queueName() string {
	if e.queue != "" {
		return e.queue
	}
	return e.workflow
}

// exhausted reports whether e's current lease is the last delivery its bound
// allows.
func (e *mexec) exhausted() bool {
	return e.token != 0 && e.maxAttempts > 0 && e.tries >= e.maxAttempts
}

// exhaustedOutcome is the failure of an execution whose last allowed attempt
// expired (cause nil) or was released with cause. API.md leaves the name and
// message of this error to the implementation (see normalize); its code and
// cause are the contract.
func exhaustedOutcome(cause *execstore.WorkflowError) *execstore.Outcome {
	if cause == nil {
		cause = &execstore.WorkflowError{Name: "LeaseExpiredError"}
	}
	return &execstore.Outcome{Status: execstore.StatusFailed, Error: &execstore.WorkflowError{Code: "ATTEMPTS_EXHAUSTED", Cause: cause}}
}

// end records a terminal outcome no acknowledgement gave (a cancellation,
// exhausted attempts): no lease, no wake, no watch; the parent is woken.
// startedBy returns the caller a child's parent link names if it started
// the child (its start request under the link's key names it), else nil: a
// caller retired (its starts dropped) or forgotten, its ID admitted again
// as another execution (Options.ForgetAfter), started no child.
func (m *model) startedBy(parent *execstore.Parent, child string) *mexec {
	if parent == nil {
		return nil
	}
	if p := m.execs[parent.ExecutionID]; p != nil && p.starts[parent.StepKey].child == child {
		return p
	}
	return nil
}

func (m *model) end(e *mexec, out *execstore.Outcome, now int64) {
	e.status, e.outcome = out.Status, out
	e.due, e.covered, e.token, e.expires = 0, 0, 0, 0
	e.updatedAt = now
	m.changeAt(e, now)
	m.touch(e.id)
	m.watches = slices.DeleteFunc(m.watches, func(w *mwatch) bool { return w.exec == e.id })
	if e.parent != nil {
		if p := m.startedBy(e.parent, e.id); p != nil && !p.terminal() {
			p.wakeAt(now, now)
			m.touch(p.id)
		}
	}
}

// endTree ends a non-terminal execution with out and, depth first in
// step-key order, every non-terminal execution it started with descendants.
func (m *model) endTree(e *mexec, out, descendants *execstore.Outcome, now int64) {
	var tree func(e *mexec, out *execstore.Outcome)
	tree = func(e *mexec, out *execstore.Outcome) {
		if e.terminal() {
			return
		}
		m.cancelled++
		m.end(e, out, now)
		for _, key := range slices.Sorted(maps.Keys(e.starts)) {
			// A child forgotten and its ID admitted again is
			// another execution (Options.ForgetAfter).
			if c := m.execs[e.starts[key].child]; c != nil && m.startedBy(c.parent, c.id) == e {
				tree(c, descendants)
			}
		}
	}
	tree(e, out)
}

// The outcomes of a deadline: the execution's, and those of the
// executions it started.
var (
	deadlineOutcome = &execstore.Outcome{Status: execstore.StatusFailed, Error: &execstore.WorkflowError{
		Name: "DeadlineExceededError", Message: "the execution's deadline passed before it ended", Code: "DEADLINE_EXCEEDED"}}
	cancelledByDeadline = &execstore.Outcome{Status: execstore.StatusCancelled, Error: &execstore.WorkflowError{
		Name: "CancelledError", Message: "an execution that started it passed its deadline", Code: "CANCELLED"}}
)

// expireDeadlines is what the writer does before a command at now: it ends
// every execution whose deadline has come, in (deadline, ID) order, as a
// cancel would, with DEADLINE_EXCEEDED. It reports whether it ended any.
func (m *model) expireDeadlines(now int64) bool {
	var due []*mexec
	for _, id := range m.order {
		if e := m.execs[id]; e.deadline != 0 && e.deadline <= now && !e.terminal() {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b *mexec) int {
		if c := compare(a.deadline, b.deadline); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	cancelled := m.cancelled // a cancel's count, not a deadline's
	for _, e := range due {
		m.cancelled = 0
		m.endTree(e, deadlineOutcome, cancelledByDeadline, now)
		m.expiredTree = m.expiredTree || m.cancelled > 1
	}
	m.cancelled = cancelled
	m.expired = m.expired || len(due) > 0
	return len(due) > 0
}

// cancel ends a non-terminal execution and, depth first in step-key order,
// every non-terminal execution it started, all with the same outcome.
func (m *model) cancel(id, reason string, clock int64) result {
	if len(reason) > m.lim.CancelReasonBytes || !utf8Valid(reason) {
		return m.nothing(fail(codeInvalidArg))
	}
	if !validID(id) {
		return m.nothing(fail(codeNotFound))
	}
	now := m.stamp(clock)
	e := m.execs[id]
	switch {
	case e == nil:
		return m.nothing(fail(codeNotFound))
	case !e.terminal():
		out := &execstore.Outcome{Status: execstore.StatusCancelled,
			Error: &execstore.WorkflowError{Name: "CancelledError", Message: reason, Code: "CANCELLED"}}
		m.endTree(e, out, out, now)
		rec := m.record(e)
		return result{Record: &rec}
	}
	rec := m.record(e)
	return m.nothing(result{Record: &rec}) // terminal already
}

func compare(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// current looks up a lease's execution; code is "" when the lease is current.
func (m *model) current(l execstore.Lease) (*mexec, string) {
	e := m.execs[l.ExecutionID]
	switch {
	case e == nil:
		return nil, codeNotFound
	case e.token == 0 || e.token != l.Token:
		return e, codeLeaseLost
	}
	return e, ""
}

func (m *model) renew(l execstore.Lease, d time.Duration, clock int64) result {
	if !validID(l.ExecutionID) {
		return m.nothing(fail(codeNotFound))
	}
	if d <= 0 || d > m.lim.LeaseDuration {
		return m.nothing(fail(codeInvalidArg))
	}
	now := m.stamp(clock)
	e, code := m.current(l)
	if code != "" {
		return m.nothing(fail(code))
	}
	e.expires = addClamped(now, d)
	e.updatedAt = now
	m.touch(e.id)
	return result{Lease: &execstore.Lease{ExecutionID: e.id, Token: e.token, ExpiresAt: timeOf(e.expires)}}
}

func (m *model) release(l execstore.Lease, retry time.Duration, cause *workflowFailed, clock int64) result {
	if !validID(l.ExecutionID) {
		return m.nothing(fail(codeNotFound))
	}
	if retry < 0 || retry > m.lim.RetryAfter {
		return m.nothing(fail(codeInvalidArg))
	}
	now := m.stamp(clock)
	e, code := m.current(l)
	if code != "" {
		return m.nothing(fail(code))
	}
	if e.exhausted() {
		var recorded *execstore.WorkflowError
		if cause != nil {
			recorded = cause.recorded()
		}
		m.end(e, exhaustedOutcome(recorded), now)
		return result{}
	}
	e.due = max(earliest(e.covered, e.due), addClamped(now, retry))
	e.covered, e.token, e.expires = 0, 0, 0
	e.updatedAt = now
	m.touch(e.id)
	return result{}
}

func (m *model) acknowledge(l execstore.Lease, o outcome, clock int64) result {
	if !validID(l.ExecutionID) {
		return m.nothing(fail(codeNotFound))
	}
	if !o.valid() {
		return m.nothing(fail(codeInvalidArg))
	}
	now := m.stamp(clock)
	e, code := m.current(l)
	switch {
	case code != "" && e != nil && e.terminal():
		// Terminal already: the recorded outcome, this acknowledgement's
		// own only when it repeats the one that recorded it.
		rec := m.record(e)
		replay := e.recordedBy != nil && e.lastToken == l.Token && o.status != execstore.StatusSuspended && m.sameRecorded(*e.recordedBy, o)
		return m.nothing(result{Record: &rec, Applied: replay, Replayed: replay})
	case code != "" && e != nil && o.status == execstore.StatusSuspended && e.token == 0 && e.suspendedBy == l.Token && e.lastToken == l.Token:
		// The suspension its own lease recorded, repeated with no claim
		// since: a replay, answered with the record as it is now.
		rec := m.record(e)
		return m.nothing(result{Record: &rec, Applied: true, Replayed: true})
	case code != "":
		return m.nothing(fail(code))
	}
	e.covered, e.token, e.expires = 0, 0, 0
	e.updatedAt = now
	m.touch(e.id)
	if was := e.status; o.status == execstore.StatusSuspended {
		e.status = execstore.StatusSuspended
		if was != e.status {
			m.changeAt(e, now)
		}
		e.tries = 0
		e.suspendedBy = l.Token
	} else {
		out := o.recorded(m.lim)
		e.status, e.outcome, e.due = out.Status, out, 0
		e.recordedBy = &o
		m.changeAt(e, now)
		m.watches = slices.DeleteFunc(m.watches, func(w *mwatch) bool { return w.exec == e.id })
		if e.parent != nil {
			if p := m.startedBy(e.parent, e.id); p != nil && !p.terminal() {
				p.wakeAt(now, now)
				m.touch(p.id)
			}
		}
	}
	rec := m.record(e)
	return result{Record: &rec, Applied: true}
}

// sameRecorded reports whether acknowledging a and b records the same
// outcome, as the store compares them for a replay. A completed result the
// store cannot keep is recorded as a failure whose message gives the reason
// (API.md fixes only its code, so recorded leaves the message out): two such
// results record the same failure when their reasons are the same, the size
// of one over the limit or the fault of one that is not JSON.
func (m *model) sameRecorded(a, b outcome) bool {
	ra, rb := a.recorded(m.lim), b.recorded(m.lim)
	if !sameOutcome(ra, rb) {
		return false
	}
	if a.status == execstore.StatusCompleted && ra.Status == execstore.StatusFailed {
		return unstorable(a.result.data, m.lim) == unstorable(b.result.data, m.lim)
	}
	return true
}

// unstorable is why the store cannot keep a completed result: its size
// over the limit, or what is wrong with it as JSON.
func unstorable(data []byte, lim execstore.Limits) string {
	if len(data) > lim.ValueBytes {
		return fmt.Sprintf("%d bytes", len(data))
	}
	if err := jsonv.Validate(data); err != nil {
		return err.Error()
	}
	return ""
}

// sameOutcome reports whether two recorded outcomes are the same: status,
// result in canonical form (API.md: key order and whitespace aside), error
// with its causes.
func sameOutcome(a, b *execstore.Outcome) bool {
	if a == nil || b == nil || a.Status != b.Status || (a.Result == nil) != (b.Result == nil) {
		return false
	}
	if a.Result != nil {
		x, errx := jsonv.Canonical(nil, a.Result)
		y, erry := jsonv.Canonical(nil, b.Result)
		if errx != nil || erry != nil || !bytes.Equal(x, y) {
			return false
		}
	}
	x, y := a.Error, b.Error
	for ; x != nil && y != nil; x, y = x.Cause, y.Cause {
		if x.Name != y.Name || x.Message != y.Message || x.Code != y.Code {
			return false
		}
	}
	return x == nil && y == nil
}

func (m *model) saveStep(l execstore.Lease, key string, v value, clock int64) result {
	if !validID(l.ExecutionID) {
		return m.nothing(fail(codeNotFound))
	}
	if !m.validKey(key) || !m.validValue(v) {
		return m.nothing(fail(codeInvalidArg))
	}
	m.stamp(clock)
	e, code := m.current(l)
	if code != "" {
		return m.nothing(fail(code))
	}
	if _, saved := e.steps[key]; saved {
		return m.nothing(result{}) // the first saved value wins
	}
	e.steps[key] = string(v.data)
	return result{}
}

func (m *model) step(id, key string) result {
	e := m.execs[id]
	if e == nil {
		return fail(codeNotFound)
	}
	v, ok := e.steps[key]
	if !ok {
		return result{}
	}
	return result{Value: json.RawMessage(v), Found: true}
}

func (m *model) start(l execstore.Lease, key, workflow string, p params, clock int64, generated string) result {
	if !validID(l.ExecutionID) {
		return m.nothing(fail(codeNotFound))
	}
	if !m.validKey(key) {
		return m.nothing(fail(codeInvalidArg))
	}
	if !validID(workflow) || !p.valid || len(p.data) > m.lim.EventBytes {
		return m.nothing(fail(codeInvalidEvent))
	}
	now := m.stamp(clock)
	caller, code := m.current(l)
	if code != "" {
		return m.nothing(fail(code))
	}
	if prev, ok := caller.starts[key]; ok {
		if prev.workflow == workflow && prev.class == p.class {
			return m.nothing(result{ID: prev.child})
		}
		return m.nothing(fail(codeMismatch))
	}
	if !m.fresh(generated) {
		return fail(codeBadGenerated)
	}
	caller.starts[key] = mstart{child: generated, workflow: workflow, class: p.class}
	m.create(&mexec{
		id: generated, workflow: workflow, params: p.bytes(), context: maps.Clone(caller.context),
		parent: &execstore.Parent{ExecutionID: caller.id, StepKey: key},
		status: execstore.StatusAdmitted, admittedAt: now, updatedAt: now, due: now,
		maxAttempts: caller.maxAttempts, // a child runs under its parent's bound
		prio:        caller.prio,        // and at its parent's priority
	})
	return result{ID: generated}
}

func (m *model) commit(writes []write, clock int64) result {
	if len(writes) > m.lim.WritesPerCommit {
		return m.nothing(fail(codeInvalidArg))
	}
	for _, w := range writes {
		if !m.validKey(w.key) || (!w.del && !m.validValue(w.value)) {
			return m.nothing(fail(codeInvalidArg))
		}
	}
	now := m.stamp(clock)
	written := map[string]bool{}
	for _, w := range writes {
		if w.del {
			delete(m.kv, w.key)
		} else {
			m.kv[w.key] = string(w.value.data)
		}
		written[w.key] = true
	}
	var fired []*mwatch
	m.watches = slices.DeleteFunc(m.watches, func(w *mwatch) bool {
		if slices.ContainsFunc(w.keys, func(k string) bool { return written[k] }) {
			fired = append(fired, w)
			return true
		}
		return false
	})
	for _, w := range fired {
		if e := m.execs[w.exec]; e != nil && !e.terminal() {
			e.wakeAt(now, now)
			m.touch(e.id)
		}
	}
	return result{}
}

func (m *model) read(key string) result {
	v, ok := m.kv[key]
	if !ok {
		return result{}
	}
	return result{Value: json.RawMessage(v), Found: true}
}

func (m *model) watch(id string, keys []string, clock int64) result {
	if len(keys) == 0 || len(keys) > m.lim.KeysPerWatch || slices.ContainsFunc(keys, func(k string) bool { return !m.validKey(k) }) {
		return m.nothing(fail(codeInvalidArg))
	}
	if !validID(id) {
		return m.nothing(fail(codeNotFound))
	}
	m.stamp(clock)
	e := m.execs[id]
	switch {
	case e == nil:
		return m.nothing(fail(codeNotFound))
	case e.terminal():
		return m.nothing(result{Wake: execstore.WakeIgnored})
	}
	m.watches = append(m.watches, &mwatch{exec: id, keys: slices.Clone(keys)})
	return result{Wake: execstore.WakeRequested}
}

func (m *model) get(id string) result {
	e := m.execs[id]
	if e == nil {
		return fail(codeNotFound)
	}
	rec := m.record(e)
	return result{Record: &rec}
}

// await answers at once for a terminal or unknown execution; the simulator
// awaits a running one with a cancelled context.
func (m *model) await(id string) result {
	e := m.execs[id]
	switch {
	case e == nil:
		return fail(codeNotFound)
	case !e.terminal():
		return fail(codeCanceled)
	}
	rec := m.record(e)
	return result{Record: &rec}
}

// record is the execution as Get returns it.
func (m *model) record(e *mexec) execstore.Record {
	r := execstore.Record{
		ExecutionID: e.id,
		WorkflowID:  e.workflow,
		Params:      json.RawMessage(slices.Clone(e.params)),
		Context:     maps.Clone(e.context),
		Status:      e.status,
		Outcome:     e.outcome,
		Parent:      e.parent,
		AdmittedAt:  timeOf(e.admittedAt),
		UpdatedAt:   timeOf(e.updatedAt),
		DueAt:       timeOf(e.due),
		Attempts:    e.attempts,
		MaxAttempts: e.maxAttempts,
		Queue:       e.queue,
		Priority:    map[bool]int{true: 0, false: e.prio}[e.prio == execstore.PriorityDefault],

		ConcurrencyKey: e.ckey,
	}
	if !e.terminal() {
		r.Deadline = timeOf(e.deadline)
	}
	if e.params == nil {
		r.Params = nil
	}
	r.Archived = e.retired && m.archive
	if e.token != 0 {
		r.Lease = &execstore.Lease{ExecutionID: e.id, Token: e.token, ExpiresAt: timeOf(e.expires)}
	}
	return r
}

// timeOf is how the store reports a time: UTC, the zero time for none.
func timeOf(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// summary is what Stats reports about the state, for the cheap check after
// every operation.
type summary struct {
	Executions, Terminal, Pending, Retired int
	NextDue                                time.Time
}

func (m *model) summary() summary {
	var s summary
	next := int64(0)
	parked := m.keyParked()
	for _, id := range m.order {
		e := m.execs[id]
		s.Executions++
		if e.terminal() {
			s.Terminal++
		}
		if e.retired {
			s.Retired++
		}
		if at, ok := e.claimable(); ok {
			s.Pending++
			if !m.heldBack(e) && !parked[id] {
				next = earliest(next, max(at, m.rateRelease(e.queueName())))
			}
		}
	}
	s.NextDue = timeOf(next)
	return s
}

// nextClaimable is the earliest time any execution can be claimed.
func (m *model) nextClaimable() (int64, bool) {
	s := m.summary()
	if s.NextDue.IsZero() {
		return 0, false
	}
	return s.NextDue.UnixNano(), true
}

// maxUpdated is the latest time any record was changed at: the store's time
// can be no earlier.
func (m *model) maxUpdated() int64 {
	t := int64(0)
	for _, e := range m.execs {
		t = max(t, e.updatedAt)
	}
	return t
}
