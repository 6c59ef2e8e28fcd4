package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
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
	{"put-schedule", 14, func(w *world) error { return w.plain(w.genPutSchedule()) }},
	{"delete-schedule", 6, func(w *world) error { return w.plain(w.genDeleteSchedule()) }},
	{"get-schedule", 6, func(w *world) error { return w.plain(w.genGetSchedule()) }},
	{"tick", 100, (*world).tick},
	{"leap", 30, (*world).leap},
	{"clock-back", 6, (*world).clockBack},
	{"snapshot", 6, (*world).snapshot},
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
	(*world).genWatch, (*world).genPutSchedule, (*world).genDeleteSchedule,
}

// crashInOp crashes at a hook inside an operation's write (before the write,
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

// fault injects a storage error at a hook inside an operation's write.
func (w *world) fault() error {
	o := writerOps[w.rng.IntN(len(writerOps))](w)
	_, err := w.runArmed(o, &plan{at: w.pickEvent()})
	return err
}

// pickEvent picks the hook event to act at. A write's events are: before
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
	return nil
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
	case r < 70 && len(current) > 0:
		return current[w.pick(len(current))]
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
	if next := w.occurrenceIDs(); len(next) > 0 && w.chance(4) {
		a.id = next[w.pick(len(next))] // a caller takes an occurrence's ID first
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
	return o
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
	return o
}

func (w *world) genAck() *op {
	return &op{kind: opAck, lease: w.pickLease(), out: w.pickOutcome()}
}

// genAckBatch acknowledges several executions at once (one batch, one
// fsync): distinct executions, some of the leases stale.
func (w *world) genAckBatch() *op {
	o := &op{kind: opAckBatch}
	seen := map[string]bool{}
	for range 2 + w.pick(4) {
		l := w.pickLease()
		if seen[l.ExecutionID] {
			continue
		}
		seen[l.ExecutionID] = true
		o.acks = append(o.acks, ackArg{lease: l, out: w.pickOutcome()})
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

// snapshotStep rebuilds a crash image at a step of the snapshot recipe from
// the directory before and after a snapshot: the temporary file cut short or
// whole, renamed into place, older snapshots pruned (the log not yet
// truncated), or everything done.
func snapshotStep(rng interface{ IntN(int) int }, before, after *crashImage) (*crashImage, string) {
	snap := func(im *crashImage) map[string][]byte {
		out := map[string][]byte{}
		for _, f := range im.files {
			if name, ok := strings.CutPrefix(f.rel, "snapshots/"); ok {
				out[name] = f.data
			}
		}
		return out
	}
	was, now := snap(before), snap(after)
	var name string
	var data []byte
	for _, n := range slices.Sorted(maps.Keys(now)) {
		if string(was[n]) != string(now[n]) {
			name, data = n, now[n]
		}
	}
	build := func(snaps map[string][]byte) *crashImage {
		im := &crashImage{}
		for _, f := range before.files {
			if !strings.HasPrefix(f.rel, "snapshots/") {
				im.files = append(im.files, f)
			}
		}
		for _, n := range slices.Sorted(maps.Keys(snaps)) {
			im.files = append(im.files, file{rel: "snapshots/" + n, data: snaps[n]})
		}
		return im
	}
	step := rng.IntN(5)
	if name == "" {
		step = 4
	}
	with := func(n string, d []byte) map[string][]byte {
		m := map[string][]byte{}
		for k, v := range was {
			m[k] = v
		}
		m[n] = d
		return m
	}
	switch step {
	case 0:
		cut := rng.IntN(len(data) + 1)
		return build(with(name+".tmp", data[:cut])), fmt.Sprintf("snapshot %s written to %d of %d bytes", name, cut, len(data))
	case 1:
		return build(with(name+".tmp", data)), "snapshot " + name + " synced, not renamed"
	case 2:
		return build(with(name, data)), "snapshot " + name + " renamed, older ones not pruned"
	case 3:
		return build(now), "snapshots pruned, log not truncated"
	}
	return after, "snapshot and log compaction done"
}
