package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
	"github.com/execstore/execstore/dispatcher/dispatchertest"
)

// The layer above the store. CheckDispatch runs dispatchers against a real
// store under one manual clock (the store's and the dispatchers' timers),
// with invokers that succeed, fail, return an error, panic, exit, hang past
// the abort grace period, or stop when their context is cancelled, and
// renewals that fail so that a lease expires and another claim takes it over.
// The clock moves by ticks and by jumps past a lease. It checks that every
// execution's terminal outcome is published exactly once, as recorded (a
// delivery whose lease was taken over without its knowing acknowledges too,
// and gets the recorded outcome back, not applied: it must not publish it),
// that no delivery acknowledges or releases after its renewal found the lease
// lost, that no slot leaks, that every execution is delivered until it
// ends, and that every lease a dispatcher claimed is invoked: a claimed
// lease that is never delivered leaves its execution leased for nothing and
// spends one of its attempts, so a third of the seeds admit the executions
// with attempt bounds (MaxAttempts from 1 to two more than the attempts
// planned to fail), under which one that failed for having exhausted them
// must have been invoked as many times. The seed fixes each
// execution's behaviour per attempt and the clock's moves; the interleaving
// is the scheduler's, so the check is of properties, not of a trace.

// DispatchConfig sets up one dispatcher check.
type DispatchConfig struct {
	Seed uint64
	// Dir holds the store. Default: the system's temporary directory.
	Dir string
	// Executions admitted at the start. Default 30.
	Executions int
	// Bounded admits them with attempt bounds. Default: a third of the
	// seeds (those divisible by 3).
	Bounded *bool
}

// DispatchReport is what a dispatcher check saw.
type DispatchReport struct {
	Executions, Deliveries, LostLeases, Rounds int
	// Bounded says the executions had attempt bounds; Exhausted counts those
	// that failed for having spent them.
	Bounded   bool
	Exhausted int
	// LateAcks counts acknowledgements that found the execution ended under
	// another delivery's lease (not applied): each is a chance for a
	// dispatcher to publish an outcome twice.
	LateAcks  int
	Violation error // nil when every check held
}

// behaviour is what an invoker does on one delivery.
type behaviour int

const (
	succeed     behaviour = iota // returns a completed outcome
	failOutcome                  // returns a failed outcome
	retryError                   // returns an error: released with a retry delay
	panics                       // panics: released like an error
	exits                        // ErrWorkerExited: the lease is left to expire
	hangs                        // its renewals fail; it hangs past the grace period once the lease is lost
	stopsOnLoss                  // its renewals fail; it returns an outcome as soon as it is cancelled
	// outlives: every renewal fails, so the dispatcher never learns that the
	// lease was taken over; it returns an outcome once another claim took the
	// lease, and the acknowledgement is refused (the lease lost) or finds
	// the execution ended: a round whose acknowledgement fails while it
	// claims the next execution for the slot.
	outlives
	// cancelled: the execution is cancelled while it runs (the invoker
	// cancels it, as an operator would) and the invoker returns an outcome
	// before a renewal sees it: the acknowledgement is refused, in a round
	// that claims the next execution for the slot while others are due.
	cancelled
	// lostBeforeAck: the invoker returns an outcome, and the lease is
	// released (by the check, as by an operator) just before the
	// acknowledgement, which is refused: the execution is due again, and the
	// round claims it or another one for the slot.
	lostBeforeAck
	behaviourKinds
)

var behaviourNames = [...]string{"succeed", "fail", "error", "panic", "exit", "hang", "stop-on-loss", "outlive", "cancelled", "lost-before-ack"}

// maxStuck bounds the deliveries planned to hold their slot until their lease
// is taken over, below the dispatchers' slots (two of four).
const maxStuck = 4

// maxOutliving bounds the deliveries planned to outlive their lease, which
// hold their slot until another claim takes it over too: with maxStuck, six
// of the eight slots at the most.
const maxOutliving = 2

// dispatchLease is the lease duration the dispatchers take; the clock's jumps
// go past it.
const dispatchLease = 10 * time.Second

// dispatchWorld is one dispatcher check's shared state.
type dispatchWorld struct {
	store *execstore.Store
	clock *dispatchertest.Clock
	plan  map[string][]behaviour // per execution, per attempt (from 1); later attempts succeed
	hang  chan struct{}          // closed at the end: hung invokers return

	mu         sync.Mutex
	violation  error
	byLease    map[leaseKey]behaviour // the behaviour each claimed lease's delivery follows
	invokes    map[string]int         // invoked deliveries by execution
	published  map[string][]execstore.Record
	deliveries int

	fence *leaseFence
}

type leaseKey struct {
	id    string
	token uint64
}

// leaseFence is what a check of the layers above the store keeps about
// leases, and its part of the store they see: the leases a renewal found
// lost, so that a delivery that acknowledges or releases under one is
// flagged, and the acknowledgements that found their execution ended under
// another lease (each a chance to publish an outcome twice).
type leaseFence struct {
	store *execstore.Store
	fail  func(format string, args ...any)

	mu       sync.Mutex
	lost     map[leaseKey]bool
	lateAcks int
	handed   map[leaseKey]bool // leases claimed and handed to a dispatcher
	invoked  map[leaseKey]bool // leases whose delivery reached the invoker
}

func newLeaseFence(s *execstore.Store, fail func(format string, args ...any)) *leaseFence {
	return &leaseFence{store: s, fail: fail, lost: map[leaseKey]bool{}, handed: map[leaseKey]bool{}, invoked: map[leaseKey]bool{}}
}

// hand notes leases a claim returned: every one is the dispatcher's now,
// whatever else failed, and must reach the invoker.
func (lf *leaseFence) hand(leases []execstore.Lease) {
	lf.mu.Lock()
	for _, l := range leases {
		lf.handed[leaseKey{l.ExecutionID, l.Token}] = true
	}
	lf.mu.Unlock()
}

// invoke notes that a delivery under l reached the invoker, and flags a
// second one under the same lease.
func (lf *leaseFence) invoke(l execstore.Lease) {
	k := leaseKey{l.ExecutionID, l.Token}
	lf.mu.Lock()
	twice := lf.invoked[k]
	lf.invoked[k] = true
	lf.mu.Unlock()
	if twice {
		lf.fail("%s was invoked twice under lease %d", l.ExecutionID, l.Token)
	}
}

// neverInvoked returns a lease handed to a dispatcher that never reached the
// invoker, the least in (ID, token) order, skipping those excused says may
// not (an execution ended before its delivery read it).
func (lf *leaseFence) neverInvoked(excused func(id string) bool) (leaseKey, bool) {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	var out []leaseKey
	for k := range lf.handed {
		if !lf.invoked[k] && (excused == nil || !excused(k.id)) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return leaseKey{}, false
	}
	return slices.MinFunc(out, func(a, b leaseKey) int {
		return cmp.Or(strings.Compare(a.id, b.id), cmp.Compare(a.token, b.token))
	}), true
}

// markLost records that a renewal found the lease lost.
func (lf *leaseFence) markLost(k leaseKey) {
	lf.mu.Lock()
	lf.lost[k] = true
	lf.mu.Unlock()
}

func (lf *leaseFence) checkNotLost(what string, l execstore.Lease) {
	lf.mu.Lock()
	lost := lf.lost[leaseKey{l.ExecutionID, l.Token}]
	lf.mu.Unlock()
	if lost {
		lf.fail("a delivery of %s called %s with lease %d after its renewal found the lease lost", l.ExecutionID, what, l.Token)
	}
}

func (lf *leaseFence) Release(ctx context.Context, l execstore.Lease, d time.Duration) error {
	lf.checkNotLost("Release", l)
	return lf.store.Release(ctx, l, d)
}

func (lf *leaseFence) AcknowledgeBatch(ctx context.Context, acks []execstore.Ack) ([]execstore.AckResult, error) {
	res, _, err := lf.acknowledgeAndClaim(ctx, acks, 0, 0)
	return res, err
}

// acknowledgeAndClaim acknowledges acks, fenced, and with limit > 0 claims
// up to limit executions in the same call (AcknowledgeAndClaim).
func (lf *leaseFence) acknowledgeAndClaim(ctx context.Context, acks []execstore.Ack, limit int, d time.Duration) ([]execstore.AckResult, []execstore.Lease, error) {
	for _, a := range acks {
		lf.checkNotLost("Acknowledge", a.Lease)
	}
	var res []execstore.AckResult
	var leases []execstore.Lease
	var err error
	if limit > 0 {
		res, leases, err = lf.store.AcknowledgeAndClaim(ctx, acks, limit, d)
	} else {
		res, err = lf.store.AcknowledgeBatch(ctx, acks)
	}
	for _, r := range res {
		if r.Err == nil && !r.Applied {
			lf.mu.Lock()
			lf.lateAcks++
			lf.mu.Unlock()
		}
	}
	return res, leases, err
}

// acknowledgeAndPlan is acknowledgeAndClaim with the claimed leases passed
// through plan, as a wrapper's ClaimDue passes its own.
func (lf *leaseFence) acknowledgeAndPlan(ctx context.Context, acks []execstore.Ack, limit int, d time.Duration,
	plan func(context.Context, []execstore.Lease, error) ([]execstore.Lease, error)) ([]execstore.AckResult, []execstore.Lease, error) {
	res, leases, err := lf.acknowledgeAndClaim(ctx, acks, limit, d)
	planned, perr := plan(ctx, leases, err)
	if perr != nil && err == nil {
		// The acknowledgements' answers stand; the leases, unplanned, are
		// not delivered (they expire, as ClaimDue's would).
		return res, nil, perr
	}
	return res, planned, err
}

func (dw *dispatchWorld) fail(format string, args ...any) {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	if dw.violation == nil {
		dw.violation = violationf(format, args...)
	}
}

// fencedStore is the store as the dispatchers see it: it assigns each claimed
// lease its planned behaviour, fails the renewals the behaviour asks to fail,
// and flags an acknowledgement or release of a lease a renewal found lost.
type fencedStore struct {
	dw *dispatchWorld
	*leaseFence
}

var errRenewInjected = errors.New("sim: injected renewal failure")

func (f fencedStore) ClaimDue(ctx context.Context, limit int, d time.Duration) ([]execstore.Lease, error) {
	leases, err := f.dw.store.ClaimDue(ctx, limit, d)
	return f.plan(ctx, leases, err)
}

// AcknowledgeAndClaim is a delivery's acknowledgement that claims the next
// execution for its slot: fenced as AcknowledgeBatch, its leases planned as
// ClaimDue's.
func (f fencedStore) AcknowledgeAndClaim(ctx context.Context, acks []execstore.Ack, limit int, d time.Duration) ([]execstore.AckResult, []execstore.Lease, error) {
	f.loseBeforeAck(ctx, acks)
	return f.acknowledgeAndPlan(ctx, acks, limit, d, f.plan)
}

// AcknowledgeBatch is the fence's, after the releases loseBeforeAck makes.
func (f fencedStore) AcknowledgeBatch(ctx context.Context, acks []execstore.Ack) ([]execstore.AckResult, error) {
	f.loseBeforeAck(ctx, acks)
	return f.leaseFence.AcknowledgeBatch(ctx, acks)
}

// loseBeforeAck releases the lease of every acknowledgement whose delivery
// is planned to lose it just before it acknowledges.
func (f fencedStore) loseBeforeAck(ctx context.Context, acks []execstore.Ack) {
	for _, a := range acks {
		f.dw.mu.Lock()
		b := f.dw.byLease[leaseKey{a.Lease.ExecutionID, a.Lease.Token}]
		f.dw.mu.Unlock()
		if b != lostBeforeAck {
			continue
		}
		if err := f.dw.store.Release(ctx, a.Lease, 0); err != nil && !errors.Is(err, execstore.ErrLeaseLost) {
			f.dw.fail("releasing %s's lease before its acknowledgement: %v", a.Lease.ExecutionID, err)
		}
	}
}

// plan assigns each claimed lease its planned behaviour.
func (f fencedStore) plan(ctx context.Context, leases []execstore.Lease, err error) ([]execstore.Lease, error) {
	for _, l := range leases {
		rec, gerr := f.dw.store.Get(ctx, l.ExecutionID)
		if gerr != nil {
			return nil, gerr
		}
		b := succeed
		if p := f.dw.plan[l.ExecutionID]; rec.Attempts >= 1 && rec.Attempts <= len(p) {
			b = p[rec.Attempts-1]
		}
		f.dw.mu.Lock()
		f.dw.byLease[leaseKey{l.ExecutionID, l.Token}] = b
		f.dw.deliveries++
		f.dw.mu.Unlock()
	}
	f.hand(leases)
	return leases, err
}

func (f fencedStore) Get(ctx context.Context, id string) (execstore.Record, error) {
	return f.dw.store.Get(ctx, id)
}

func (f fencedStore) Renew(ctx context.Context, l execstore.Lease, d time.Duration) (execstore.Lease, error) {
	k := leaseKey{l.ExecutionID, l.Token}
	f.dw.mu.Lock()
	b := f.dw.byLease[k]
	f.dw.mu.Unlock()
	if b == outlives {
		return execstore.Lease{}, errRenewInjected
	}
	if b == hangs || b == stopsOnLoss {
		// The renewal fails without saying the lease is lost: the dispatcher
		// keeps trying, the lease expires, another claim takes it over, and
		// the next renewal finds it lost.
		cur, err := f.dw.store.Get(ctx, l.ExecutionID)
		if err == nil && (cur.Lease == nil || cur.Lease.Token == l.Token) {
			return execstore.Lease{}, errRenewInjected
		}
	}
	nl, err := f.dw.store.Renew(ctx, l, d)
	if errors.Is(err, execstore.ErrLeaseLost) {
		f.markLost(k)
	}
	return nl, err
}

func (f fencedStore) Stats(ctx context.Context) (execstore.Stats, error) {
	return f.dw.store.Stats(ctx)
}
func (f fencedStore) DueChanged() <-chan struct{} { return f.dw.store.DueChanged() }

// invoke runs a delivery as its lease's planned behaviour says.
func (dw *dispatchWorld) invoke(ctx context.Context, d dispatcher.Delivery) (execstore.RunOutcome, error) {
	dw.fence.invoke(d.Lease)
	dw.mu.Lock()
	b := dw.byLease[leaseKey{d.ExecutionID, d.Lease.Token}]
	dw.invokes[d.ExecutionID]++
	dw.mu.Unlock()
	switch b {
	case failOutcome:
		return execstore.Failed(errors.New("declined")), nil
	case retryError:
		return execstore.RunOutcome{}, errors.New("try again")
	case panics:
		panic("invoker panic")
	case exits:
		return execstore.RunOutcome{}, dispatcher.ErrWorkerExited
	case hangs:
		<-dw.hang
		return execstore.Completed(nil), nil
	case stopsOnLoss:
		select {
		case <-ctx.Done():
		case <-dw.hang:
		}
		return execstore.Completed(nil), nil
	case cancelled:
		if _, err := dw.store.Cancel(context.Background(), d.ExecutionID, "cancelled mid-delivery"); err != nil {
			dw.fail("cancelling %s: %v", d.ExecutionID, err)
		}
		return execstore.Completed(nil), nil
	case outlives:
		// It looks at the record, as a worker cut off from the renewals
		// would not: it is how the check makes the acknowledgement come
		// after the takeover.
		for {
			rec, err := dw.store.Get(context.Background(), d.ExecutionID)
			if err != nil || rec.Lease == nil || rec.Lease.Token != d.Lease.Token {
				return execstore.Completed(nil), nil
			}
			select {
			case <-dw.hang:
				return execstore.Completed(nil), nil
			case <-time.After(time.Millisecond):
			}
		}
	}
	return execstore.Completed(nil), nil
}

// CheckDispatch runs one dispatcher check.
func CheckDispatch(cfg DispatchConfig) (DispatchReport, error) {
	if cfg.Executions <= 0 {
		cfg.Executions = 30
	}
	parent := cfg.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "execstore-dispatch-")
	if err != nil {
		return DispatchReport{}, err
	}
	defer os.RemoveAll(dir)

	rng := rand.New(rand.NewPCG(cfg.Seed, 0xd15a))
	dw := &dispatchWorld{
		clock:     dispatchertest.NewClock(simEpoch),
		plan:      map[string][]behaviour{},
		hang:      make(chan struct{}),
		byLease:   map[leaseKey]behaviour{},
		invokes:   map[string]int{},
		published: map[string][]execstore.Record{},
	}
	bounded := cfg.Seed%3 == 0
	if cfg.Bounded != nil {
		bounded = *cfg.Bounded
	}
	bounds := map[string]int{}
	opts := execstore.Options{Now: dw.clock.Now, NoSync: true}
	small(&opts)
	s, err := execstore.Open(filepath.Join(dir, "store"), opts)
	if err != nil {
		return DispatchReport{}, err
	}
	dw.store = s
	dw.fence = newLeaseFence(s, dw.fail)
	defer s.Close()
	ctx := context.Background()
	stuck := 0     // deliveries that hold a slot until their lease is taken over
	outliving := 0 // the same, and their renewals never learn it
	total := 0     // executions admitted
	admit := func(n int) error {
		for range n {
			id := fmt.Sprintf("d-%02d", total)
			total++
			attempts := rng.IntN(4)
			for range attempts {
				b := behaviour(rng.IntN(int(behaviourKinds)))
				switch {
				case b == hangs || b == stopsOnLoss:
					// Fewer than the slots: a free slot must be left to
					// take their leases over.
					if stuck >= maxStuck {
						b = retryError
					} else {
						stuck++
					}
				case b == outlives:
					if outliving >= maxOutliving {
						b = retryError
					} else {
						outliving++
					}
				}
				dw.plan[id] = append(dw.plan[id], b)
			}
			if bounded {
				bounds[id] = 1 + rng.IntN(attempts+2)
			}
			if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "wf", MaxAttempts: bounds[id]}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := admit(cfg.Executions); err != nil {
		return DispatchReport{}, err
	}
	var ds []*dispatcher.Dispatcher
	for range 2 {
		d, err := dispatcher.New(fencedStore{dw, dw.fence}, dispatcher.InvokerFunc(dw.invoke), dispatcher.Options{
			Concurrency:    4,
			LeaseDuration:  dispatchLease,
			RetryBaseDelay: time.Second,
			RetryMaxDelay:  4 * time.Second,
			Clock:          dw.clock,
			OnOutcome: func(rec execstore.Record) {
				dw.mu.Lock()
				prev := dw.published[rec.ExecutionID]
				dw.published[rec.ExecutionID] = append(prev, rec)
				dw.mu.Unlock()
				if !rec.Status.Terminal() {
					dw.fail("%s was published as %s, not terminal", rec.ExecutionID, rec.Status)
				} else if len(prev) > 0 {
					dw.fail("the terminal outcome of %s was published twice (%s, then %s)", rec.ExecutionID, prev[0].Status, rec.Status)
				}
			},
		})
		if err != nil {
			return DispatchReport{}, err
		}
		ds = append(ds, d)
		d.Start()
	}
	rep := DispatchReport{Executions: cfg.Executions, Bounded: bounded}
	const rounds = 600
	for rep.Rounds = 0; rep.Rounds < rounds; rep.Rounds++ {
		settle(dw.store, dw.clock, ds)
		st, err := s.Stats(ctx)
		if err != nil {
			return rep, err
		}
		if st.Terminal == total {
			break
		}
		switch r := rng.IntN(10); {
		case r == 0:
			dw.clock.Advance(dispatchLease + time.Second) // past every lease
		case r < 4:
			dw.clock.Advance(100 * time.Millisecond)
		default:
			dw.clock.Advance(time.Second)
		}
	}
	// Hung invokers return now: every delivery can settle, and a slot still
	// held after Stop is a leak.
	close(dw.hang)
	for _, d := range ds {
		stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := d.Stop(stopCtx)
		cancel()
		if err != nil {
			dw.fail("a dispatcher did not stop: %v (%d deliveries active)", err, d.ActiveDeliveries())
		}
		if n := d.ActiveDeliveries(); n != 0 {
			dw.fail("a stopped dispatcher still holds %d slots", n)
		}
	}
	dw.mu.Lock()
	defer dw.mu.Unlock()
	rep.Deliveries, rep.LostLeases, rep.LateAcks, rep.Violation = dw.deliveries, len(dw.fence.lost), dw.fence.lateAcks, dw.violation
	if rep.Violation != nil {
		return rep, nil
	}
	if k, ok := dw.fence.neverInvoked(nil); ok {
		rep.Violation = violationf("a dispatcher claimed %s under lease %d and never invoked it (plan %v)", k.id, k.token, names(dw.plan[k.id]))
		return rep, nil
	}
	rep.Executions = total
	for i := range total {
		id := fmt.Sprintf("d-%02d", i)
		rec, err := s.Get(ctx, id)
		switch {
		case err != nil:
			return rep, err
		case !rec.Status.Terminal():
			rep.Violation = violationf("%s is still %s after %d rounds of the clock (plan %v)", id, rec.Status, rounds, names(dw.plan[id]))
		case exhausted(rec) && dw.invokes[id] < bounds[id]:
			rep.Violation = violationf("%s failed with its %d attempts exhausted, invoked %d times", id, bounds[id], dw.invokes[id])
		case exhausted(rec) && len(dw.published[id]) > 0:
			// A claim or a release recorded it, not an acknowledgement: no
			// dispatcher ended it, so none publishes it (Options.OnOutcome).
			rep.Violation = violationf("%s failed with its attempts exhausted, and a dispatcher published it", id)
		case exhausted(rec):
		case rec.Status == execstore.StatusCancelled && len(dw.published[id]) > 0:
			rep.Violation = violationf("%s was cancelled, and a dispatcher published it", id)
		case rec.Status == execstore.StatusCancelled:
		case len(dw.published[id]) == 0:
			rep.Violation = violationf("the terminal outcome of %s was never published", id)
		case !equalRecords(dw.published[id][0], rec):
			rep.Violation = violationf("the published outcome of %s is not the recorded one", id)
		}
		if exhausted(rec) {
			rep.Exhausted++
		}
		if rep.Violation != nil {
			return rep, nil
		}
	}
	return rep, nil
}

// exhausted reports a record that failed for having spent its attempts.
func exhausted(rec execstore.Record) bool {
	return rec.Outcome != nil && rec.Outcome.Error != nil && rec.Outcome.Error.Code == execstore.ErrorCode(execstore.ErrAttemptsExhausted)
}

func names(bs []behaviour) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = behaviourNames[b]
	}
	return out
}

// settle waits, in real time and within a bound, until the dispatchers are
// quiet: the log, the deliveries held and the timers set stay the same for a
// few milliseconds. It only paces the check; the properties do not depend on
// it.
func settle(s *execstore.Store, clock *dispatchertest.Clock, ds []*dispatcher.Dispatcher) {
	type mark struct {
		last           uint64
		active, timers int
	}
	now := func() mark {
		m := mark{timers: clock.Timers()}
		if st, err := s.Stats(context.Background()); err == nil {
			m.last = st.WALLastIndex
		}
		for _, d := range ds {
			m.active += d.ActiveDeliveries()
		}
		return m
	}
	deadline := time.Now().Add(time.Second)
	prev, still := now(), 0
	for still < 10 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Microsecond)
		if m := now(); m == prev {
			still++
		} else {
			prev, still = m, 0
		}
	}
}
