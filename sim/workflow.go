package sim

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
	"github.com/execstore/execstore/dispatcher/dispatchertest"
	"github.com/execstore/execstore/workflow"
)

// The workflow package above the dispatchers. CheckWorkflow runs two
// dispatchers whose invoker is a workflow.Worker against a real store under
// one manual clock, as CheckDispatch does, with workflows whose plans (their
// params, drawn from the seed) use every operation: steps that succeed, take
// time, fail, fail and are retried, or panic; sleeps shorter and longer than
// a lease; children that complete, fail, or are cancelled (waiting for a key,
// or blocked in a step); keys the check commits. Deliveries go wrong on
// plan: the invoker discards the worker's outcome and exits, returns an
// error or panics; renewals fail until another claim takes the lease over,
// while a step function stalls until the loss is seen or hangs past the
// grace period; the clock jumps past the lease in the middle of slow steps.
//
// It checks, as properties (the interleaving is the scheduler's): every
// execution ends with the outcome its plan determines; no step function runs
// under a lease after that lease or an earlier one saved its step (repeats
// before the save are counted); no step is saved, and no acknowledgement or
// release is made, under a lease a renewal found lost; each outcome a
// dispatcher records is published once, and a cancelled one never; Await
// returns the child's recorded outcome; Sleep saves the store's time plus
// its duration and wakes by the store's time; every execution ends within
// the rounds; no slot stays held after Stop.

// WorkflowConfig sets up one workflow check.
type WorkflowConfig struct {
	Seed uint64
	// Dir holds the store. Default: the system's temporary directory.
	Dir string
	// Executions admitted at the start; each may start children. Default 12.
	Executions int
}

// WorkflowReport is what a workflow check saw.
type WorkflowReport struct {
	Executions int // admitted by the check
	Children   int // started by the workflows
	Cancelled  int // children the check cancelled
	Deliveries int
	// Suspensions counts runs the worker ended suspended (sleeps, awaits,
	// keys and retries waiting).
	Suspensions int
	LostLeases  int
	// StepRuns counts step function invocations; StepRepeats those that ran
	// an attempt of a step again, after a delivery that ran it lost its lease
	// or its outcome before saving it.
	StepRuns, StepRepeats int
	LateAcks              int // acknowledgements that found the execution ended by another lease
	Rounds                int
	Violation             error // nil when every check held
}

// wfDelivery is how one delivery of a parent goes.
type wfDelivery int

const (
	wfNormal        wfDelivery = iota // the worker's outcome is acknowledged
	wfExitAfterRun                    // the worker ran; the invoker reports ErrWorkerExited: the lease is left to expire
	wfErrAfterRun                     // the worker ran; the invoker returns an error instead: released
	wfPanicAfterRun                   // the worker ran; the invoker panics: released
	wfStallOnLoss                     // renewals fail; the first step function it runs blocks until the lease is lost
	wfHangOnLoss                      // renewals fail; the first step function it runs blocks past the grace period
	wfDeliveryKinds
)

var wfDeliveryNames = [...]string{"normal", "exit", "error", "panic", "stall", "hang"}

func (d wfDelivery) String() string { return wfDeliveryNames[d] }

// wfWorld is one workflow check's shared state.
type wfWorld struct {
	store    *execstore.Store
	clock    *dispatchertest.Clock
	worker   *workflow.Worker
	plans    map[string]wfPlan       // parents by ID
	delivery map[string][]wfDelivery // per parent, per attempt (from 1); later attempts are normal
	hang     chan struct{}           // closed at the end: stalled and hung step functions return

	mu          sync.Mutex
	violation   error
	byLease     map[leaseKey]wfDelivery
	stalled     map[leaseKey]bool
	lostSteps   map[leaseKey]map[string]bool // the steps saved when a renewal found the lease lost
	published   map[string][]execstore.Record
	children    map[string]wfOp   // child ID → the operation that started it
	childOf     map[string]string // parent ID + "/" + key → child ID
	cancelled   map[string]bool   // children the check cancelled
	runs        map[wfStepRun]int
	invoking    int // invocations of the worker that have not returned
	deliveries  int
	suspensions int
	stepRuns    int
	stepRepeats int

	fence *leaseFence
}

// wfStepRun names one attempt of one step.
type wfStepRun struct {
	id, key string
	attempt int
}

func (ww *wfWorld) fail(format string, args ...any) {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	if ww.violation == nil {
		ww.violation = violationf(format, args...)
	}
}

func (ww *wfWorld) noteChild(parent string, op wfOp, id string) {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	ww.children[id] = op
	ww.childOf[parent+"/"+op.Key] = id
}

// invoke runs a delivery on the worker, with the lease's token in the
// context for the step functions, and then does what the delivery's plan
// says with the worker's answer.
func (ww *wfWorld) invoke(ctx context.Context, d dispatcher.Delivery) (execstore.RunOutcome, error) {
	ww.fence.invoke(d.Lease)
	ww.mu.Lock()
	kind := ww.byLease[leaseKey{d.ExecutionID, d.Lease.Token}]
	ww.invoking++
	ww.mu.Unlock()
	defer func() {
		ww.mu.Lock()
		ww.invoking--
		ww.mu.Unlock()
	}()
	out, err := ww.worker.Invoke(context.WithValue(ctx, wfTokenKey{}, d.Lease.Token), d)
	if err != nil {
		return out, err
	}
	switch kind {
	case wfExitAfterRun:
		return execstore.RunOutcome{}, dispatcher.ErrWorkerExited
	case wfErrAfterRun:
		return execstore.RunOutcome{}, errors.New("sim: the invoker failed after the run")
	case wfPanicAfterRun:
		panic("sim: the invoker panicked after the run")
	}
	if out.Status == execstore.StatusSuspended {
		ww.mu.Lock()
		ww.suspensions++
		ww.mu.Unlock()
	}
	return out, nil
}

// wfStore is the store as the dispatchers see it: it assigns each claimed
// lease its planned delivery, fails the renewals a stalling delivery asks to
// fail, notes the steps saved when a renewal finds its lease lost, and flags
// an acknowledgement or release of a lease a renewal found lost.
type wfStore struct {
	ww *wfWorld
	*leaseFence
}

func (f wfStore) ClaimDue(ctx context.Context, limit int, d time.Duration) ([]execstore.Lease, error) {
	leases, err := f.ww.store.ClaimDue(ctx, limit, d)
	return f.plan(ctx, leases, err)
}

// AcknowledgeAndClaim is a delivery's acknowledgement that claims the next
// execution for its slot: fenced as AcknowledgeBatch, its leases planned as
// ClaimDue's.
func (f wfStore) AcknowledgeAndClaim(ctx context.Context, acks []execstore.Ack, limit int, d time.Duration) ([]execstore.AckResult, []execstore.Lease, error) {
	return f.acknowledgeAndPlan(ctx, acks, limit, d, f.plan)
}

// plan assigns each claimed lease its planned kind of delivery.
func (f wfStore) plan(ctx context.Context, leases []execstore.Lease, err error) ([]execstore.Lease, error) {
	for _, l := range leases {
		rec, gerr := f.ww.store.Get(ctx, l.ExecutionID)
		if gerr != nil {
			return nil, gerr
		}
		kind := wfNormal
		if p := f.ww.delivery[l.ExecutionID]; rec.Attempts >= 1 && rec.Attempts <= len(p) {
			kind = p[rec.Attempts-1]
		}
		f.ww.mu.Lock()
		f.ww.byLease[leaseKey{l.ExecutionID, l.Token}] = kind
		f.ww.deliveries++
		f.ww.mu.Unlock()
	}
	f.hand(leases)
	return leases, err
}

func (f wfStore) Get(ctx context.Context, id string) (execstore.Record, error) {
	return f.ww.store.Get(ctx, id)
}

func (f wfStore) Renew(ctx context.Context, l execstore.Lease, d time.Duration) (execstore.Lease, error) {
	k := leaseKey{l.ExecutionID, l.Token}
	f.ww.mu.Lock()
	kind := f.ww.byLease[k]
	f.ww.mu.Unlock()
	if kind == wfStallOnLoss || kind == wfHangOnLoss {
		// As in CheckDispatch: the renewal fails while the lease is current,
		// until another claim takes it over and the next one finds it lost.
		cur, err := f.ww.store.Get(ctx, l.ExecutionID)
		if err == nil && (cur.Lease == nil || cur.Lease.Token == l.Token) && !cur.Status.Terminal() {
			return execstore.Lease{}, errRenewInjected
		}
	}
	nl, err := f.ww.store.Renew(ctx, l, d)
	if errors.Is(err, execstore.ErrLeaseLost) {
		// Every step saved under the lease is saved by now: the store fences
		// the lease's later saves out.
		steps, serr := f.ww.stepKeys(l.ExecutionID)
		if serr != nil {
			f.ww.fail("listing the steps of %s: %v", l.ExecutionID, serr)
		}
		f.ww.mu.Lock()
		f.ww.lostSteps[k] = steps
		f.ww.mu.Unlock()
		f.markLost(k)
	}
	return nl, err
}

func (f wfStore) Stats(ctx context.Context) (execstore.Stats, error) { return f.ww.store.Stats(ctx) }
func (f wfStore) DueChanged() <-chan struct{}                        { return f.ww.store.DueChanged() }

// stepKeys returns the keys of an execution's saved steps.
func (ww *wfWorld) stepKeys(id string) (map[string]bool, error) {
	steps, err := ww.steps(id)
	keys := map[string]bool{}
	for _, s := range steps {
		keys[s.Key] = true
	}
	return keys, err
}

// steps returns an execution's saved steps.
func (ww *wfWorld) steps(id string) ([]execstore.SavedStep, error) {
	var all []execstore.SavedStep
	after := ""
	for {
		steps, more, err := ww.store.ListSteps(context.Background(), id, after, 100, 0)
		if err != nil {
			return all, err
		}
		all = append(all, steps...)
		if !more || len(steps) == 0 {
			return all, nil
		}
		after = steps[len(steps)-1].Key
	}
}

// CheckWorkflow runs one workflow check.
func CheckWorkflow(cfg WorkflowConfig) (WorkflowReport, error) {
	if cfg.Executions <= 0 {
		cfg.Executions = 12
	}
	parent := cfg.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "execstore-workflow-")
	if err != nil {
		return WorkflowReport{}, err
	}
	defer os.RemoveAll(dir)

	rng := rand.New(rand.NewPCG(cfg.Seed, 0xf10e))
	ww := newWFWorld()
	opts := execstore.Options{Now: ww.clock.Now, NoSync: true}
	small(&opts)
	s, err := execstore.Open(filepath.Join(dir, "store"), opts)
	if err != nil {
		return WorkflowReport{}, err
	}
	defer s.Close()
	ww.store = s
	ww.fence = newLeaseFence(s, ww.fail)
	ww.worker = workflow.NewWorker(s, workflow.Options{})
	workflow.Register(ww.worker, "sim-parent", ww.runParent)
	workflow.Register(ww.worker, "sim-child", ww.runChild)
	if err := ww.admit(rng, cfg.Executions); err != nil {
		return WorkflowReport{}, err
	}
	rep := WorkflowReport{Executions: cfg.Executions}
	ds, err := ww.startDispatchers()
	if err == nil {
		rep.Rounds, err = ww.drive(rng, ds)
	}
	ww.stop(ds)
	if err != nil {
		return rep, err
	}
	ww.mu.Lock()
	rep.Children, rep.Cancelled, rep.Deliveries, rep.Suspensions = len(ww.children), len(ww.cancelled), ww.deliveries, ww.suspensions
	rep.LostLeases, rep.StepRuns, rep.StepRepeats, rep.LateAcks = len(ww.fence.lost), ww.stepRuns, ww.stepRepeats, ww.fence.lateAcks
	rep.Violation = ww.violation
	ww.mu.Unlock()
	if rep.Violation == nil {
		rep.Violation, err = ww.finalChecks(rep.Rounds)
	}
	return rep, err
}

func newWFWorld() *wfWorld {
	return &wfWorld{
		clock:     dispatchertest.NewClock(simEpoch),
		plans:     map[string]wfPlan{},
		delivery:  map[string][]wfDelivery{},
		hang:      make(chan struct{}),
		byLease:   map[leaseKey]wfDelivery{},
		stalled:   map[leaseKey]bool{},
		lostSteps: map[leaseKey]map[string]bool{},
		published: map[string][]execstore.Record{},
		children:  map[string]wfOp{},
		childOf:   map[string]string{},
		cancelled: map[string]bool{},
		runs:      map[wfStepRun]int{},
	}
}

// admit draws n parents' plans and admits them.
func (ww *wfWorld) admit(rng *rand.Rand, n int) error {
	pl := &wfPlanner{rng: rng}
	for i := range n {
		id := fmt.Sprintf("w-%02d", i)
		ww.plans[id] = pl.plan()
		ww.delivery[id] = pl.deliveries()
		params, err := json.Marshal(ww.plans[id])
		if err != nil {
			return err
		}
		if _, err := ww.store.Admit(context.Background(), execstore.AdmitRequest{ExecutionID: id, WorkflowID: "sim-parent", Params: params}); err != nil {
			return err
		}
	}
	return nil
}

// startDispatchers starts two dispatchers on the worker; on an error it
// returns those it started.
func (ww *wfWorld) startDispatchers() ([]*dispatcher.Dispatcher, error) {
	var ds []*dispatcher.Dispatcher
	for range 2 {
		d, err := dispatcher.New(wfStore{ww, ww.fence}, dispatcher.InvokerFunc(ww.invoke), dispatcher.Options{
			Concurrency:    4,
			LeaseDuration:  dispatchLease,
			RetryBaseDelay: time.Second,
			RetryMaxDelay:  4 * time.Second,
			Clock:          ww.clock,
			OnOutcome:      ww.published1,
		})
		if err != nil {
			return ds, err
		}
		ds = append(ds, d)
		d.Start()
	}
	return ds, nil
}

// published1 is the dispatchers' OnOutcome: an outcome is published once.
func (ww *wfWorld) published1(rec execstore.Record) {
	ww.mu.Lock()
	prev := ww.published[rec.ExecutionID]
	ww.published[rec.ExecutionID] = append(prev, rec)
	ww.mu.Unlock()
	if !rec.Status.Terminal() {
		ww.fail("%s was published as %s, not terminal", rec.ExecutionID, rec.Status)
	} else if len(prev) > 0 {
		ww.fail("the terminal outcome of %s was published twice (%s, then %s)", rec.ExecutionID, prev[0].Status, rec.Status)
	}
}

// wfRounds bounds the clock's moves: every execution must end within them.
const wfRounds = 600

// drive moves the clock round by round, committing the planned keys and
// cancelling the planned children, until every parent has ended or the
// rounds run out. It returns the rounds it took.
func (ww *wfWorld) drive(rng *rand.Rand, ds []*dispatcher.Dispatcher) (int, error) {
	ctx := context.Background()
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range ww.plans {
			if !yield(id) {
				return
			}
		}
	})
	for round := range wfRounds {
		settle(ww.store, ww.clock, ds)
		ended := 0
		for _, id := range ids {
			rec, err := ww.store.Get(ctx, id)
			if err != nil {
				return round, err
			}
			if rec.Status.Terminal() {
				ended++
			}
			if err := ww.act(ctx, id, round); err != nil {
				return round, err
			}
		}
		if ended == len(ids) {
			return round, nil
		}
		switch r := rng.IntN(10); {
		case r == 0:
			ww.clock.Advance(dispatchLease + time.Second) // past every lease
		case r < 4:
			ww.clock.Advance(100 * time.Millisecond)
		default:
			ww.clock.Advance(time.Second)
		}
	}
	return wfRounds, nil
}

// act does what parent id's plan asks of the check at round: commit a key's
// value, cancel a child that exists.
func (ww *wfWorld) act(ctx context.Context, id string, round int) error {
	for _, op := range ww.plans[id].Ops {
		switch {
		case op.Kind == wfKey && op.At == round:
			v, _ := json.Marshal(wfStepValue{V: op.V})
			if err := ww.store.Commit(ctx, execstore.Write{Key: wfStoreKey(id, op.Key), Value: v}); err != nil {
				return err
			}
		case op.Kind == wfChild && (op.Child == wfChildWaits || op.Child == wfChildBlock) && op.At <= round:
			ww.mu.Lock()
			child := ww.childOf[id+"/"+op.Key]
			due := child != "" && !ww.cancelled[child]
			if due {
				ww.cancelled[child] = true
			}
			ww.mu.Unlock()
			if !due {
				continue
			}
			if _, err := ww.store.Cancel(ctx, child, "sim: cancelled as planned"); err != nil {
				return err
			}
		}
	}
	return nil
}

// stop lets stalled step functions return, stops the dispatchers (a slot
// still held after Stop is a leak), and waits for every invocation of the
// worker, abandoned ones too, so that nothing writes during the final
// checks.
func (ww *wfWorld) stop(ds []*dispatcher.Dispatcher) {
	close(ww.hang)
	for _, d := range ds {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := d.Stop(stopCtx)
		cancel()
		if err != nil {
			ww.fail("a dispatcher did not stop: %v (%d deliveries active)", err, d.ActiveDeliveries())
		}
		if n := d.ActiveDeliveries(); n != 0 {
			ww.fail("a stopped dispatcher still holds %d slots", n)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ww.mu.Lock()
		n := ww.invoking
		ww.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			ww.fail("%d invocations of the worker did not return within 30 s of the end", n)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// finalChecks checks the store after the end: every execution ended as its
// plan says and was published once (a cancelled one never), no other
// execution exists, and no step was saved under a lease after a renewal
// found it lost.
func (ww *wfWorld) finalChecks(rounds int) (violation, err error) {
	ctx := context.Background()
	ww.mu.Lock()
	defer ww.mu.Unlock()
	// Every lease a dispatcher claimed reached the worker, but one whose
	// execution the check cancelled first: its delivery finds it ended.
	if k, ok := ww.fence.neverInvoked(func(id string) bool { return ww.cancelled[id] }); ok {
		return violationf("a dispatcher claimed %s under lease %d and never invoked it", k.id, k.token), nil
	}
	want := map[string]wfWant{}
	planned := 0
	for id, p := range ww.plans {
		want[id] = wfExpect(p)
		for _, op := range p.Ops {
			if op.Kind == wfChild {
				planned++
			}
		}
	}
	for id, op := range ww.children {
		want[id] = wfExpectChild(op.Child, op.V)
	}
	st, err := ww.store.Stats(ctx)
	if err != nil {
		return nil, err
	}
	if len(ww.children) != planned || st.Executions != len(want) {
		return violationf("the plans start %d children; the workflows started %d, and the store holds %d executions for %d",
			planned, len(ww.children), st.Executions, len(want)), nil
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		rec, err := ww.store.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if v := ww.checkEnded(rec, want[id], rounds); v != nil {
			return v, nil
		}
	}
	return ww.checkLostLeases()
}

// checkEnded checks one execution's end and its publication.
func (ww *wfWorld) checkEnded(rec execstore.Record, want wfWant, rounds int) error {
	id, pub := rec.ExecutionID, ww.published[rec.ExecutionID]
	switch {
	case !rec.Status.Terminal():
		return violationf("%s is still %s after %d rounds of the clock (plan %+v, deliveries %v)", id, rec.Status, rounds, ww.plans[id], ww.delivery[id])
	case rec.Status == execstore.StatusCancelled && len(pub) > 0:
		return violationf("the cancelled %s was published as %s", id, pub[0].Status)
	case rec.Status != execstore.StatusCancelled && len(pub) == 0:
		return violationf("the terminal outcome of %s was never published", id)
	case len(pub) > 0 && !equalRecords(pub[0], rec):
		return violationf("the published outcome of %s is not the recorded one", id)
	}
	return want.check(rec)
}

// checkLostLeases checks that every step saved under a lease that a renewal
// found lost was saved before the renewal.
func (ww *wfWorld) checkLostLeases() (violation, err error) {
	for _, k := range slices.SortedFunc(maps.Keys(ww.fence.lost), func(a, b leaseKey) int {
		return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.token, b.token))
	}) {
		steps, err := ww.steps(k.id)
		if err != nil {
			return nil, err
		}
		for _, s := range steps {
			if tok, ok := wfSavedBy(s.Value); ok && tok == k.token && !ww.lostSteps[k][s.Key] {
				return violationf("step %q of %s was saved under lease %d after a renewal found the lease lost", s.Key, k.id, k.token), nil
			}
		}
	}
	return nil, nil
}
