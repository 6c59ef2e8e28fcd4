package sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/execstore/execstore"
)

// action is one kind of step of the workload, with its weight out of the
// total.
type action struct {
	name   string
	weight int
	run    func(w *world) error
}

// actions is the workload's mix. Crashes come to about eight per thousand
// operations, as the CI budget asks.
var actions = []action{
	{"admit", 120, func(w *world) error { return w.plain(w.genAdmit()) }},
	{"wake", 70, func(w *world) error { return w.plain(w.genWake()) }},
	{"claim", 110, func(w *world) error { return w.plain(w.genClaim()) }},
	{"renew", 35, func(w *world) error { return w.plain(w.genRenew()) }},
	{"release", 35, func(w *world) error { return w.plain(w.genRelease()) }},
	{"ack", 100, func(w *world) error { return w.plain(w.genAck()) }},
	{"ack-batch", 20, func(w *world) error { return w.plain(w.genAckBatch()) }},
	{"save-step", 55, func(w *world) error { return w.plain(w.genSaveStep()) }},
	{"step", 20, func(w *world) error { return w.plain(w.genStep()) }},
	{"start", 50, func(w *world) error { return w.plain(w.genStart()) }},
	{"commit", 50, func(w *world) error { return w.plain(w.genCommit()) }},
	{"read", 12, func(w *world) error { return w.plain(w.genRead()) }},
	{"watch", 45, func(w *world) error { return w.plain(w.genWatch()) }},
	{"get", 30, func(w *world) error { return w.plain(w.genGet()) }},
	{"await", 12, func(w *world) error { return w.plain(w.genAwait()) }},
	{"cancel", 20, func(w *world) error { return w.plain(w.genCancel()) }},
	{"put-schedule", 14, func(w *world) error { return w.plain(w.genPutSchedule()) }},
	{"delete-schedule", 6, func(w *world) error { return w.plain(w.genDeleteSchedule()) }},
	{"get-schedule", 6, func(w *world) error { return w.plain(w.genGetSchedule()) }},
	{"put-queue", 12, func(w *world) error { return w.plain(w.genPutQueue()) }},
	{"delete-queue", 4, func(w *world) error { return w.plain(w.genDeleteQueue()) }},
	{"tick", 100, (*world).tick},
	{"leap", 30, (*world).leap},
	{"clock-back", 6, (*world).clockBack},
	{"exact-time", 8, (*world).exactTime},
	{"snapshot", 6, (*world).snapshot},
	{"batch", 10, (*world).batch},
	{"close", 3, (*world).cleanRestart},
	{"fault", 4, (*world).fault},
	{"crash-in-op", 5, (*world).crashInOp},
	{"crash", 2, func(w *world) error { return w.crashNow("idle") }},
	{"crash-in-snapshot", 1, (*world).snapshotCrash},
	{"fault-in-snapshot", 1, (*world).snapshotFault},
	{"rot", 2, (*world).rot},
	{"snapshot-rot", 1, (*world).snapshotRot},
}

var actionTotal = func() int {
	n := 0
	for _, a := range actions {
		n += a.weight
	}
	return n
}()

// step runs one action chosen by the seed.
func (w *world) step() error {
	r := w.rng.IntN(actionTotal)
	for _, a := range actions {
		if r < a.weight {
			return a.run(w)
		}
		r -= a.weight
	}
	panic("unreachable")
}

func (w *world) plain(o *op) error {
	_, err := w.do(o)
	return err
}

// writerOps are the operations that can log a command, for crashes and faults
// in the middle of one.
var writerOps = []func(w *world) *op{
	(*world).genAdmit, (*world).genWake, (*world).genClaim, (*world).genRenew, (*world).genRelease,
	(*world).genAck, (*world).genAckBatch, (*world).genSaveStep, (*world).genStart, (*world).genCommit,
	(*world).genWatch, (*world).genCancel,
	(*world).genWatch, (*world).genPutSchedule, (*world).genDeleteSchedule,
	(*world).genPutQueue,
}

// crashInOp crashes at a crash point inside an operation's write (before the write,
// before or after an fsync); if the operation writes nothing, the store
// crashes idle after it.
func (w *world) crashInOp() error {
	o := writerOps[w.rng.IntN(len(writerOps))](w)
	fired, err := w.runArmed(o, &plan{at: w.pickEvent(), crash: true})
	if err != nil || fired {
		return err
	}
	return w.crashNow("idle, after an operation that wrote nothing")
}

// fault injects a storage error at a crash point inside an operation's write.
func (w *world) fault() error {
	o := writerOps[w.rng.IntN(len(writerOps))](w)
	_, err := w.runArmed(o, &plan{at: w.pickEvent()})
	return err
}

// pickEvent picks the crash point to act at. A write's are: before
// the write, before the segment's fsync, after it, and when the write created
// a segment, before and after the directory's fsync. Before the segment's
// fsync is the richest moment (the batch is written and not durable), so it
// is picked most often.
func (w *world) pickEvent() int {
	switch r := w.pick(100); {
	case r < 20:
		return 1
	case r < 60:
		return 2
	}
	return 3 + w.pick(3)
}

// snapshot takes a snapshot; it must not change what the store answers.
func (w *world) snapshot() error {
	w.barrier()
	if err := w.store.Snapshot(context.Background()); err != nil {
		return violationf("Snapshot: %v", err)
	}
	w.tr.line("%d snapshot", w.ops)
	return w.afterSnapshot()
}

// ---- The clock ---------------------------------------------------------------

func (w *world) tick() error {
	w.clock.set(w.clock.nanos() + int64(1+w.rng.IntN(2000))*int64(time.Millisecond))
	return nil
}

// leap moves the clock far enough for leases to expire.
func (w *world) leap() error {
	w.clock.set(w.clock.nanos() + int64(5+w.rng.IntN(90))*int64(time.Second))
	w.tr.line("%d clock +leap to %s", w.ops, simTime(w.clock.Now()))
	return nil
}

// exactTime moves the clock to exactly a time an execution becomes
// claimable (a pending wake's, or a lease's expiry) and claims: a boundary is
// inclusive.
func (w *world) exactTime() error {
	if w.model.retention > 0 && w.chance(40) {
		return w.retentionEdge()
	}
	if w.chance(40) {
		if done, err := w.rateEdge(); done || err != nil {
			return err
		}
	}
	var times []int64
	for _, id := range w.model.order {
		if at, ok := w.model.execs[id].claimable(); ok && at >= w.clock.nanos() {
			times = append(times, at)
		}
	}
	if len(times) == 0 {
		return nil
	}
	w.clock.set(times[w.pick(len(times))])
	w.tr.line("%d clock to exactly %s", w.ops, simTime(w.clock.Now()))
	w.cover("boundary", "claim at exactly a claimable time")
	return w.plain(w.genClaim())
}

// clockBack steps the clock backwards, as a clock correction would: the
// store's time must not follow.
func (w *world) clockBack() error {
	w.clock.set(w.clock.nanos() - int64(1+w.rng.IntN(5000))*int64(time.Millisecond))
	w.tr.line("%d clock back to %s", w.ops, simTime(w.clock.Now()))
	return nil
}

// ---- Choosing arguments ------------------------------------------------------

func (w *world) pick(n int) int { return w.rng.IntN(n) }

func (w *world) chance(percent int) bool { return w.rng.IntN(100) < percent }

// pickExec picks an execution ID: mostly a known one (any status), sometimes
// a user ID that may not exist yet, or one that never will.
func (w *world) pickExec() string {
	switch r := w.pick(100); {
	case r < 78 && len(w.model.order) > 0:
		return w.model.order[w.pick(len(w.model.order))]
	case r < 93:
		return w.userIDs[w.pick(len(w.userIDs))]
	default:
		return fmt.Sprintf("y-unknown-%d", w.pick(3))
	}
}

// pickLease picks a lease: mostly a current one, else one seen before (stale
// or current), else a made-up one.
func (w *world) pickLease() execstore.Lease {
	var current []execstore.Lease
	for _, id := range w.model.order {
		if e := w.model.execs[id]; e.token != 0 {
			current = append(current, execstore.Lease{ExecutionID: id, Token: e.token, ExpiresAt: timeOf(e.expires)})
		}
	}
	switch r := w.pick(100); {
	case r < 66 && len(current) > 0:
		return current[w.pick(len(current))]
	case r < 72 && len(current) > 0:
		// Forged against a current lease: token 0, or one more than issued.
		l := current[w.pick(len(current))]
		w.cover("boundary", "forged token")
		if w.chance(50) {
			l.Token = 0
		} else {
			l.Token++
		}
		return l
	case r < 92 && len(w.leases) > 0:
		return w.leases[w.pick(len(w.leases))]
	case r < 97:
		return execstore.Lease{ExecutionID: w.pickExec(), Token: uint64(1 + w.pick(4))}
	}
	return execstore.Lease{ExecutionID: "", Token: 1}
}

var invalidIDs = []string{strings.Repeat("i", execstore.IDBytes+1), "bad\xffid", "ctl\x01id", "tab\tid"}

func (w *world) pickWorkflow() string {
	if w.chance(4) {
		return []string{"", strings.Repeat("w", execstore.IDBytes+1), "wf\x7f"}[w.pick(3)]
	}
	return []string{"wf-a", "wf-b", "wf-c"}[w.pick(3)]
}

// pickParams picks params, valid ones most of the time.
func (w *world) pickParams() params {
	var valid, invalid []int
	for i, p := range paramsCatalog {
		if p.valid {
			valid = append(valid, i)
		} else {
			invalid = append(invalid, i)
		}
	}
	if w.chance(3) {
		p := boundaryParams[w.pick(len(boundaryParams))]
		w.cover("boundary", "params "+p.name)
		return p
	}
	if w.chance(12) {
		return paramsCatalog[invalid[w.pick(len(invalid))]]
	}
	return paramsCatalog[valid[w.pick(len(valid))]]
}

func (w *world) pickContext() ctxArg {
	if w.chance(10) {
		return contextCatalog[5+w.pick(len(contextCatalog)-5)]
	}
	return contextCatalog[w.pick(5)]
}

func (w *world) pickValue() value {
	if w.chance(3) {
		v := boundaryValues[w.pick(len(boundaryValues))]
		w.cover("boundary", "value "+v.name)
		return v
	}
	if w.chance(10) {
		return valueCatalog[5+w.pick(len(valueCatalog)-5)]
	}
	return valueCatalog[w.pick(5)]
}

// pickKey picks a store or step key from keys, or now and then an invalid one.
func (w *world) pickKey(keys []string) string {
	if w.chance(4) {
		return []string{"", strings.Repeat("k", simKeyBytes+1), "k\xff"}[w.pick(3)]
	}
	return keys[w.pick(len(keys))]
}

func (w *world) pickDuration(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)+1))
}

func (w *world) pickOutcome() outcome {
	switch r := w.pick(100); {
	case r < 40:
		return outcomeCatalog[0]
	case r < 65:
		return outcomeCatalog[1+w.pick(3)]
	case r < 71:
		return outcomeCatalog[4+w.pick(2)]
	case r < 95:
		return outcomeCatalog[6+w.pick(2)]
	}
	return outcomeCatalog[8+w.pick(2)]
}

// ---- Operations ----------------------------------------------------------------

func (w *world) genAdmit() *op {
	a := admitArgs{workflow: w.pickWorkflow(), params: w.pickParams(), context: w.pickContext()}
	switch r := w.pick(100); {
	case r < 55:
		a.id = w.userIDs[w.pick(len(w.userIDs))]
	case r < 95:
		a.id = ""
	default:
		a.id = invalidIDs[w.pick(len(invalidIDs))]
	}
	switch r := w.pick(100); {
	case r < 25:
		a.maxAttempts = 1 + w.pick(3)
	case r < 27:
		a.maxAttempts = []int{-1, execstore.MaxAttemptsLimit + 1}[w.pick(2)]
	}
	if next := w.occurrenceIDs(); len(next) > 0 && w.chance(4) {
		a.id = next[w.pick(len(next))] // a caller takes an occurrence's ID first
	}
	// A fifth of the admissions name a queue: a shared one, at times the
	// workflow's own by name (the default), rarely one that is no ID.
	if w.chance(5) {
		a.queue = w.pickQueue(a.workflow)
	}
	// An eighth have a deadline, from a second to half a minute away.
	if w.chance(12) {
		a.deadline = w.clock.nanos() + int64(1+w.pick(30))*int64(time.Second)
	}
	// A fifth have a priority, rarely one out of range.
	switch r := w.pick(100); {
	case r < 20:
		a.priority = 1 + w.pick(execstore.PriorityLast)
	case r < 21:
		a.priority = []int{-1, execstore.PriorityLast + 1}[w.pick(2)]
	}
	// A third have a concurrency key, of a few customers, rarely one the
	// store refuses.
	switch r := w.pick(100); {
	case r < 33:
		a.ckey = simKeys[w.pick(len(simKeys))]
	case r < 34:
		a.ckey = []string{strings.Repeat("k", execstore.MaxConcurrencyKeyBytes+1), "\xff"}[w.pick(2)]
	}
	return &op{kind: opAdmit, admit: a}
}

func (w *world) genWake() *op {
	o := &op{kind: opWake, id: w.pickExec()}
	now := w.clock.Now()
	switch r := w.pick(100); {
	case r < 30:
		o.at = now.Add(-w.pickDuration(0, 5*time.Second))
	case r < 45:
		o.at = now
	case r < 50:
		// Exactly at the pending wake: it merges.
		if e := w.model.execs[o.id]; e != nil && e.due != 0 {
			o.at = timeOf(e.due)
			w.cover("boundary", "wake at exactly the pending time")
		} else {
			o.at = now
		}
	case r < 92:
		o.at = now.Add(w.pickDuration(time.Millisecond, 40*time.Second))
	case r < 95:
		o.at = time.Unix(-10, 0) // before the epoch: in the past
	case r < 97:
		o.at = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) // not representable
	default:
		o.id = ""
		o.at = now
	}
	return o
}

func (w *world) genClaim() *op {
	o := &op{kind: opClaim, limit: 1 + w.pick(6), dur: w.pickDuration(10*time.Millisecond, 20*time.Second)}
	switch r := w.pick(100); {
	case r < 2:
		o.limit = []int{0, -1, simClaimLimit + 1}[w.pick(3)]
	case r < 4:
		o.dur = []time.Duration{0, -time.Millisecond, simLeaseDuration + 1}[w.pick(3)]
	case r < 10:
		o.limit = simClaimLimit
	}
	// A third of the claims carry a request key: a new one, or the latest
	// one (a worker retrying a claim whose answer it lost), mostly with its
	// arguments, at times with others (refused).
	if w.pick(3) == 0 {
		if w.lastClaim != nil && w.pick(2) == 0 {
			o.key = w.lastClaim.key
			if w.pick(5) > 0 {
				o.limit, o.dur = w.lastClaim.limit, w.lastClaim.dur
			}
		} else {
			w.claimKeys++
			o.key = fmt.Sprintf("claim-%d", w.claimKeys)
			if w.pick(50) == 0 {
				o.key = strings.Repeat("k", execstore.MaxRequestKeyLen+1)
			}
		}
		w.lastClaim = o
	}
	// A third name the queues they serve: a few of the workflows' own and
	// the shared ones, at times one nothing is in, rarely one that is no ID.
	if w.chance(3) {
		for _, q := range simQueues {
			if w.chance(3) {
				o.queues = append(o.queues, q)
			}
		}
		if len(o.queues) == 0 {
			o.queues = []string{simQueues[w.pick(len(simQueues))]}
		}
		if w.pick(50) == 0 {
			o.queues = append(o.queues, invalidQueues[w.pick(len(invalidQueues))])
		}
	}
	return o
}

// simQueues are the queues claims name: the workflows' own, the shared
// ones admissions name, and one nothing is ever admitted to.
var simQueues = []string{"q-none", "q-x", "q-y", "wf-a", "wf-b", "wf-c"}

// invalidQueues are queue names the store refuses.
var invalidQueues = []string{"", "q\x00", "\xff"}

// pickQueue picks an admission's queue for workflow.
func (w *world) pickQueue(workflow string) string {
	switch r := w.pick(100); {
	case r < 80:
		return []string{"q-x", "q-y"}[w.pick(2)]
	case r < 97:
		return workflow // its own queue, by name
	}
	return invalidQueues[1+w.pick(2)]
}

func (w *world) genRenew() *op {
	o := &op{kind: opRenew, lease: w.pickLease(), dur: w.pickDuration(10*time.Millisecond, 20*time.Second)}
	if w.chance(3) {
		o.dur = []time.Duration{0, -time.Second, simLeaseDuration + 1}[w.pick(3)]
	}
	return o
}

func (w *world) genRelease() *op {
	o := &op{kind: opRelease, lease: w.pickLease(), dur: w.pickDuration(0, 5*time.Second)}
	switch r := w.pick(100); {
	case r < 20:
		o.dur = 0
	case r < 23:
		o.dur = []time.Duration{-time.Millisecond, simRetryAfter + 1}[w.pick(2)]
	}
	if w.chance(50) {
		o.cause = outcomeCatalog[6+w.pick(2)].err
	}
	w.released = &o.lease
	return o
}

// genCancel cancels an execution, mostly a known one, now and then with a
// reason the store must refuse. Half the time it cancels the root of a live
// tree (an execution with a child that has not ended), so that the cascade
// and its order are exercised about as often as a lone cancellation.
func (w *world) genCancel() *op {
	o := &op{kind: opCancel, id: w.pickExec(), reason: cancelReasons[w.pick(3)]}
	if w.chance(5) {
		o.reason = cancelReasons[3+w.pick(2)]
	}
	if w.chance(50) {
		if roots := w.treeRoots(); len(roots) > 0 {
			o.id = roots[w.pick(len(roots))]
		}
	}
	return o
}

// treeRoots are the executions that have not ended with a child that has
// not either, in admission order.
func (w *world) treeRoots() []string {
	var out []string
	for _, id := range w.model.order {
		e := w.model.execs[id]
		if e.terminal() {
			continue
		}
		for _, st := range e.starts {
			if c := w.model.execs[st.child]; c != nil && !c.terminal() {
				out = append(out, id)
				break
			}
		}
	}
	return out
}

func (w *world) genAck() *op {
	o := &op{kind: opAck, lease: w.pickLease(), out: w.pickOutcome()}
	if w.released != nil && w.chance(20) {
		// A worker that released its lease and then acknowledges a
		// suspension with it, late: not a replay, even when the execution
		// is still suspended from before.
		o.lease, o.out = *w.released, outcomeCatalog[0]
	}
	w.lastAck = &ackArg{lease: o.lease, out: o.out}
	return o
}

// genAckBatch acknowledges several executions at once (one batch, one
// fsync): distinct executions, some of the leases stale. A quarter of the
// batches first repeat the latest acknowledgement generated, lease and
// outcome, as a worker retries one whose answer it lost: a replay if it
// recorded the outcome, or suspended the execution with no claim since.
func (w *world) genAckBatch() *op {
	o := &op{kind: opAckBatch}
	seen := map[string]bool{}
	if w.lastAck != nil && w.pick(4) == 0 {
		o.acks = append(o.acks, *w.lastAck)
		seen[w.lastAck.lease.ExecutionID] = true
	}
	for range 2 + w.pick(4) {
		l := w.pickLease()
		if seen[l.ExecutionID] {
			continue
		}
		seen[l.ExecutionID] = true
		o.acks = append(o.acks, ackArg{lease: l, out: w.pickOutcome()})
		w.lastAck = &o.acks[len(o.acks)-1]
	}
	return o
}

func (w *world) genSaveStep() *op {
	return &op{kind: opSaveStep, lease: w.pickLease(), key: w.pickKey(w.stepKeys[:3]), val: w.pickValue()}
}

func (w *world) genStep() *op {
	return &op{kind: opStep, id: w.pickExec(), key: w.stepKeys[w.pick(len(w.stepKeys))]}
}

// genStart starts a child: repeats of a step key with the same or different
// workflow and params are common.
func (w *world) genStart() *op {
	o := &op{kind: opStart, lease: w.pickLease(), key: w.pickKey(w.stepKeys[3:]), params: w.pickParams()}
	o.wf = []string{"wf-child", "wf-child", "wf-other"}[w.pick(3)]
	if w.chance(3) {
		o.wf = w.pickWorkflow()
	}
	return o
}

func (w *world) genCommit() *op {
	o := &op{kind: opCommit}
	n := w.pick(4)
	if w.chance(3) {
		n = simWritesCommit + 1
	}
	for range n {
		wr := write{key: w.pickKey(w.kvKeys), value: w.pickValue()}
		wr.del = w.chance(25)
		o.writes = append(o.writes, wr)
	}
	return o
}

func (w *world) genRead() *op {
	return &op{kind: opRead, key: w.kvKeys[w.pick(len(w.kvKeys))]}
}

func (w *world) genWatch() *op {
	o := &op{kind: opWatch, id: w.pickExec()}
	n := 1 + w.pick(3)
	switch r := w.pick(100); {
	case r < 2:
		n = 0
	case r < 4:
		n = simKeysPerWatch + 1
	}
	for range n {
		o.keys = append(o.keys, w.pickKey(w.kvKeys))
	}
	return o
}

func (w *world) genGet() *op {
	return &op{kind: opGet, id: w.pickExec()}
}

func (w *world) genAwait() *op {
	o := &op{kind: opAwait, id: w.pickExec()}
	if e := w.model.execs[o.id]; e != nil && !e.terminal() {
		o.cancel = true
	}
	return o
}
