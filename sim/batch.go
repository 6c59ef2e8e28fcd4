package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/execstore/execstore"
)

// Batches of several commands. The workload's other steps make one call at
// a time, so each batch the writer takes holds one command. Here the writer is
// held inside the log's write of a first command (a commit) while the
// planned operations are queued one by one, each waiting until the store
// says it is queued (Stats.Queued) or has answered (refused before queueing);
// released, the writer takes them as one batch: merged acknowledgements,
// admissions with duplicates, claims, acknowledgements, wakes and starts
// sharing it, and commands deferred after it. The queue order is fixed by the
// seed, so the batch is too. Then the batch may be followed by a snapshot
// (asked for, or taken by the store on its own), a crash, or a clean restart,
// each compared with the model and each open checking the writer's indexes.

// batchEntry is one kind of operation a batch may hold, with its weight.
// New kinds are one more entry.
type batchEntry struct {
	name   string
	weight int
	gen    func(w *world, b *batchPlan) *op
}

// batchPlan is what the batch planned so far, for duplicates.
type batchPlan struct {
	admitted []string          // IDs of admissions in the batch
	acked    []execstore.Lease // leases acknowledged in the batch
}

var batchEntries = []batchEntry{
	{"ack-current", 30, (*world).genCurrentAck},
	{"ack-again", 6, func(w *world, b *batchPlan) *op {
		if len(b.acked) == 0 {
			return w.genAck()
		}
		return &op{kind: opAck, lease: b.acked[w.pick(len(b.acked))], out: w.pickOutcome()}
	}},
	{"admit-duplicate", 12, func(w *world, b *batchPlan) *op {
		o := w.genAdmit()
		// A deadline already past at the store's time (the clock went back)
		// fires at the writer's next round, which may come between the
		// batch's logged commands and those it answers after them: the model
		// cannot tell which, so a batch's admission has a deadline still to
		// come. Admissions alone cover one already past.
		if o.admit.deadline != 0 && o.admit.deadline <= w.model.last {
			o.admit.deadline = w.model.last + int64(time.Second)
		}
		if len(b.admitted) > 0 && w.chance(60) {
			o.admit.id = b.admitted[w.pick(len(b.admitted))]
		}
		if o.admit.id != "" {
			b.admitted = append(b.admitted, o.admit.id)
		}
		return o
	}},
	{"claim", 12, func(w *world, _ *batchPlan) *op { return w.genClaim() }},
	{"wake", 8, func(w *world, _ *batchPlan) *op { return w.genWake() }},
	{"renew", 5, func(w *world, _ *batchPlan) *op { return w.genRenew() }},
	{"release", 5, func(w *world, _ *batchPlan) *op { return w.genRelease() }},
	{"save-step", 5, func(w *world, _ *batchPlan) *op { return w.genSaveStep() }},
	{"start", 5, func(w *world, _ *batchPlan) *op { return w.genStart() }},
	{"commit", 4, func(w *world, _ *batchPlan) *op { return w.genCommit() }},
	{"watch", 4, func(w *world, _ *batchPlan) *op { return w.genWatch() }},
	{"ack-batch", 4, func(w *world, _ *batchPlan) *op { return w.genAckBatch() }},
}

var batchTotal = func() int {
	n := 0
	for _, e := range batchEntries {
		n += e.weight
	}
	return n
}()

// genCurrentAck acknowledges a current lease not yet acknowledged in the
// batch: consecutive ones are merged into one log entry.
func (w *world) genCurrentAck(b *batchPlan) *op {
	var current []execstore.Lease
	for _, id := range w.model.order {
		if e := w.model.execs[id]; e.token != 0 {
			l := execstore.Lease{ExecutionID: id, Token: e.token, ExpiresAt: timeOf(e.expires)}
			if !containsLease(b.acked, l) {
				current = append(current, l)
			}
		}
	}
	if len(current) == 0 {
		return w.genAck()
	}
	l := current[w.pick(len(current))]
	b.acked = append(b.acked, l)
	return &op{kind: opAck, lease: l, out: w.pickOutcome()}
}

func containsLease(ls []execstore.Lease, l execstore.Lease) bool {
	for _, x := range ls {
		if x.ExecutionID == l.ExecutionID && x.Token == l.Token {
			return true
		}
	}
	return false
}

// afterBatch is what may follow a batch, with its weight. New kinds are one
// more entry.
var afterBatch = []struct {
	name   string
	weight int
	run    func(w *world) error
}{
	{"nothing", 30, func(*world) error { return nil }},
	{"snapshot", 20, (*world).snapshot},
	{"crash-in-snapshot", 15, (*world).snapshotCrash},
	{"snapshot-close", 10, func(w *world) error {
		if err := w.snapshot(); err != nil {
			return err
		}
		return w.cleanRestart()
	}},
	{"crash", 15, func(w *world) error { return w.crashNow("idle, after a batch") }},
	{"close", 10, (*world).cleanRestart},
}

// batch runs a planned batch and what follows it. With auto, the store is
// reopened so that it snapshots on its own after the batch.
func (w *world) batch() error {
	auto := w.chance(20)
	if auto {
		saved := w.opts
		// The commit that holds the writer logs less than this; the batch
		// after it usually more, and the store snapshots on its own.
		w.opts.SnapshotEntries = 1 << 40
		w.opts.SnapshotWALBytes = autoSnapshotBytes
		err := w.cleanRestart()
		w.opts = saved
		if err != nil {
			return err
		}
	}
	if err := w.runBatch(); err != nil {
		return err
	}
	if auto {
		// Wait for the store's own snapshot (a request is answered after the
		// one in flight), then reopen with the usual options: restart or crash.
		w.barrier()
		if err := w.store.Snapshot(context.Background()); err != nil {
			return violationf("Snapshot after an automatic one: %v", err)
		}
		w.tr.line("%d automatic snapshot, then another", w.ops)
		w.cover("batch", "then", "automatic snapshot")
		if err := w.afterSnapshot(); err != nil {
			return err
		}
		if w.chance(50) {
			return w.crashNow("idle, after an automatic snapshot")
		}
		return w.cleanRestart()
	}
	r := w.pick(100)
	for _, a := range afterBatch {
		if r < a.weight {
			w.cover("batch", "then", a.name)
			return a.run(w)
		}
		r -= a.weight
	}
	return nil
}

// autoSnapshotBytes is the log a store reopened for an automatic snapshot
// takes one after.
const autoSnapshotBytes = 200

// runBatch holds the writer in a commit's write, queues the planned
// operations in order, releases the writer, and compares the answers with
// the model.
func (w *world) runBatch() error {
	w.barrier()
	var plan batchPlan
	ops := make([]*op, 2+w.pick(4))
	for i := range ops {
		r := w.pick(batchTotal)
		for _, e := range batchEntries {
			if r < e.weight {
				ops[i] = e.gen(w, &plan)
				break
			}
			r -= e.weight
		}
	}
	holder := &op{kind: opCommit, writes: []write{{key: w.kvKeys[w.pick(len(w.kvKeys))], value: valueCatalog[w.pick(4)]}}}
	holderClock := w.clock.nanos()
	g := w.storage.holdNext()
	holderDone := make(chan result, 1)
	go func() { holderDone <- holder.call(w.store) }()
	select {
	case <-g.held:
	case got := <-holderDone:
		close(g.release)
		return violationf("the commit meant to hold the writer returned %s without writing", got.describe(w.tr))
	}
	results := make([]result, len(ops))
	dones := make([]chan struct{}, len(ops))
	queued := 0
	for i, o := range ops {
		w.prepare(o)
		dones[i] = make(chan struct{})
		go func() {
			results[i] = o.call(w.store)
			close(dones[i])
		}()
		n, err := w.waitQueued(queued, dones[i])
		if err != nil {
			close(g.release)
			return err
		}
		queued = n
	}
	close(g.release)
	got := <-holderDone
	for _, d := range dones {
		<-d
	}
	w.tr.line("%d %s -> %s (holding the writer)", w.ops, holder.describe(w.tr), got.describe(w.tr))
	if err := w.compare(holder, holderClock, got); err != nil {
		return err
	}
	return w.settleBatch(ops, w.clock.nanos(), results)
}

// waitQueued waits until the store has more commands queued than before, or
// the call has returned (refused before queueing), and returns the queue's
// length. The bound only keeps a wrong store from hanging the run.
func (w *world) waitQueued(before int, done <-chan struct{}) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-done:
			return before, nil
		default:
		}
		st, err := w.store.Stats(context.Background())
		if err != nil {
			return 0, err
		}
		if st.Queued > before {
			return st.Queued, nil
		}
		if time.Now().After(deadline) {
			return 0, violationf("an operation was neither queued nor answered within 30s")
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// settleBatch compares a batch's answers with the model. The operations were
// concurrent: the store linearizes the logged ones in queue order and the
// deferred ones after the batch. The model tries the queue order first, then
// every other order (deterministically), and takes the first that gives every
// answer the store gave, its records and its change feed.
func (w *world) settleBatch(ops []*op, clock int64, got []result) error {
	descs := make([]string, len(ops))
	for i, o := range ops {
		descs[i] = fmt.Sprintf("%s -> %s", o.describe(w.tr), got[i].describe(w.tr))
	}
	w.tr.line("%d batch: %s", w.ops, strings.Join(descs, " | "))
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	var firstDiff string
	before := w.model.touched // the holder's
	for {
		m := w.model.clone()
		touched := slices.Clone(before)
		ok := true
		for _, i := range order {
			m.touched = nil
			exp := ops[i].apply(m, clock, generatedID(ops[i], got[i]))
			touched = append(touched, m.touched...)
			if !equalResults(exp, got[i]) {
				if firstDiff == "" {
					firstDiff = fmt.Sprintf("%s: (-model +store):\n%s", ops[i].describe(w.tr), diffResults(exp, got[i]))
				}
				ok = false
				break
			}
		}
		if ok {
			// The answers alone may fit more than one order (a wake merged
			// into a pending one that a claim in the batch then covers): the
			// records the batch touched must be the store's too.
			saved := w.model
			w.model = m
			err := w.matchTouched(touched)
			if err == nil {
				// The order of the batch's changes of status is the
				// order of their positions in the change feed.
				err = w.checkFeed(w.store, "after a batch")
			}
			if err != nil {
				w.model = saved
				if firstDiff == "" {
					firstDiff = err.Error()
				}
				ok = false
			}
		}
		if ok {
			w.model.touched = touched
			for i, o := range ops { // before noteLeases, which tells a keyed claim's repeat by what came before
				w.coverResult(o, got[i])
				if i > 0 && o.kind == opAck && ops[i-1].kind == opAck && got[i].Code == "" && got[i-1].Code == "" {
					w.cover("batch", "merged acknowledgements")
				}
			}
			for _, i := range order {
				if err := w.noteLeases(ops[i], got[i]); err != nil {
					return err
				}
			}
			if !sortedInts(order) {
				w.tr.line("%d batch linearized as %v", w.ops, order)
				w.cover("batch", "out of queue order")
			}
			return w.checkAfter()
		}
		if !nextPermutation(order) {
			return violationf("a batch's answers fit no order of its operations; in queue order, %s", firstDiff)
		}
	}
}

// matchTouched compares the records ids name with the model's, and the
// store's summary.
func (w *world) matchTouched(ids []string) error {
	for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) {
		exp := w.model.get(id)
		got := recordResult(w.store.Get(context.Background(), id))
		if diff := diffResults(exp, got); diff != "" {
			return violationf("record %s differs from the model (-model +store):\n%s", w.tr.alias(id), diff)
		}
	}
	return w.checkSummary(w.store)
}

func sortedInts(a []int) bool {
	for i := 1; i < len(a); i++ {
		if a[i] < a[i-1] {
			return false
		}
	}
	return true
}

// nextPermutation advances a to the next permutation in lexicographic order;
// false after the last.
func nextPermutation(a []int) bool {
	i := len(a) - 2
	for i >= 0 && a[i] >= a[i+1] {
		i--
	}
	if i < 0 {
		return false
	}
	j := len(a) - 1
	for a[j] <= a[i] {
		j--
	}
	a[i], a[j] = a[j], a[i]
	for l, r := i+1, len(a)-1; l < r; l, r = l+1, r-1 {
		a[l], a[r] = a[r], a[l]
	}
	return true
}
