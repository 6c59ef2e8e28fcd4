package dispatcher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
	"github.com/execstore/execstore/dispatcher/dispatchertest"
)

// t0 is the manual clock's start: every test's times are relative to it.
var t0 = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

// patience bounds every wait for the dispatcher to do something, so that a
// broken dispatcher fails the test instead of hanging it. It is never an
// expectation about how long anything takes.
const patience = 10 * time.Second

var bg = context.Background()

// errInjected is the failure faultStore injects.
var errInjected = errors.New("injected storage failure")

// faultStore is a store whose calls can be made to fail, and which counts
// them.
type faultStore struct {
	*execstore.Store
	clock   *dispatchertest.Clock
	mu      sync.Mutex
	fail    map[string]int // method → how many more calls fail
	calls   map[string]int
	claims  []int        // the limit of every ClaimDue that returned leases
	claimed []claimEntry // every ClaimDue that returned, in order
	extra   []execstore.Lease
	renewed chan error    // every Renew's result
	changed chan struct{} // closed and replaced at every call and every claim's return
	rounds  []int         // the acknowledgements of every AcknowledgeAndClaim, in order
	hold    chan struct{} // when set, each AcknowledgeAndClaim waits for a value from it
}

// claimEntry is one ClaimDue that returned.
type claimEntry struct {
	began  time.Time // the clock when it was called
	leases []execstore.Lease
	err    error
}

func (f *faultStore) enter(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	f.changedLocked()
	if f.fail[method] > 0 {
		f.fail[method]--
		return errInjected
	}
	return nil
}

// changedLocked wakes everyone waiting for a call. f.mu must be held.
func (f *faultStore) changedLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// failNext makes the next n calls of method fail with errInjected.
func (f *faultStore) failNext(method string, n int) {
	f.mu.Lock()
	f.fail[method] = n
	f.mu.Unlock()
}

// waitCalls waits until method has been called n times.
func (f *faultStore) waitCalls(t *testing.T, method string, n int) {
	t.Helper()
	timeout := time.After(patience)
	for {
		f.mu.Lock()
		done, ch := f.calls[method] >= n, f.changed
		f.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("%s was not called %d times", method, n)
		}
	}
}

// resetCount forgets the calls of method so far.
func (f *faultStore) resetCount(method string) {
	f.mu.Lock()
	f.calls[method] = 0
	f.mu.Unlock()
}

func (f *faultStore) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// inject makes the next ClaimDue return lease as well.
func (f *faultStore) inject(lease execstore.Lease) {
	f.mu.Lock()
	f.extra = append(f.extra, lease)
	f.mu.Unlock()
}

func (f *faultStore) ClaimDue(ctx context.Context, limit int, d time.Duration) ([]execstore.Lease, error) {
	began := f.clock.Now()
	if err := f.enter("ClaimDue"); err != nil {
		f.logClaim(claimEntry{began: began, err: err})
		return nil, err
	}
	leases, err := f.Store.ClaimDue(ctx, limit, d)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.extra) > 0 && len(leases) < limit {
		leases = append(leases, f.extra[0])
		f.extra = f.extra[1:]
	}
	if len(leases) > 0 {
		f.claims = append(f.claims, limit)
	}
	f.claimed = append(f.claimed, claimEntry{began: began, leases: leases, err: err})
	f.changedLocked()
	return leases, err
}

func (f *faultStore) logClaim(c claimEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claimed = append(f.claimed, c)
	f.changedLocked()
}

// claimFrom waits until a ClaimDue called with the clock at or after at has
// returned, and returns what it claimed. The store stamps a claim with its
// clock when it runs, so that claim saw the store at time at or later.
func (f *faultStore) claimFrom(t *testing.T, at time.Time) []execstore.Lease {
	t.Helper()
	timeout := time.After(patience)
	for {
		f.mu.Lock()
		ch := f.changed
		for _, c := range f.claimed {
			if !c.began.Before(at) && c.err == nil {
				f.mu.Unlock()
				return c.leases
			}
		}
		f.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("no claim was made at %v or later", at)
		}
	}
}

func (f *faultStore) Stats(ctx context.Context) (execstore.Stats, error) {
	if err := f.enter("Stats"); err != nil {
		return execstore.Stats{}, err
	}
	return f.Store.Stats(ctx)
}

func (f *faultStore) NextDue(ctx context.Context) (time.Time, error) {
	if err := f.enter("NextDue"); err != nil {
		return time.Time{}, err
	}
	return f.Store.NextDue(ctx)
}

// statsOnly hides every method of its store but dispatcher.Store's (no
// NextDue, no ReleaseWithCause).
type statsOnly struct{ dispatcher.Store }

func (f *faultStore) Get(ctx context.Context, id string) (execstore.Record, error) {
	if err := f.enter("Get"); err != nil {
		return execstore.Record{}, err
	}
	return f.Store.Get(ctx, id)
}

func (f *faultStore) Renew(ctx context.Context, l execstore.Lease, d time.Duration) (execstore.Lease, error) {
	l, err := f.renew(ctx, l, d)
	f.renewed <- err
	return l, err
}

func (f *faultStore) renew(ctx context.Context, l execstore.Lease, d time.Duration) (execstore.Lease, error) {
	if err := f.enter("Renew"); err != nil {
		return execstore.Lease{}, err
	}
	return f.Store.Renew(ctx, l, d)
}

func (f *faultStore) Release(ctx context.Context, l execstore.Lease, retry time.Duration) error {
	if err := f.enter("Release"); err != nil {
		return err
	}
	return f.Store.Release(ctx, l, retry)
}

func (f *faultStore) ReleaseWithCause(ctx context.Context, l execstore.Lease, retry time.Duration, cause error) error {
	if err := f.enter("Release"); err != nil {
		return err
	}
	return f.Store.ReleaseWithCause(ctx, l, retry, cause)
}

// AcknowledgeBatch is the dispatcher's acknowledgement; its faults are
// named "Acknowledge".
func (f *faultStore) AcknowledgeBatch(ctx context.Context, acks []execstore.Ack) ([]execstore.AckResult, error) {
	if err := f.enter("Acknowledge"); err != nil {
		return nil, err
	}
	return f.Store.AcknowledgeBatch(ctx, acks)
}

// AcknowledgeAndClaim is a delivery's acknowledgement that claims the next
// execution for its slot: the wrapper's AcknowledgeBatch, then its ClaimDue,
// so that their faults and records cover it too. Its own faults are named
// "AcknowledgeAndClaim".
func (f *faultStore) AcknowledgeAndClaim(ctx context.Context, acks []execstore.Ack, limit int, d time.Duration) ([]execstore.AckResult, []execstore.Lease, error) {
	if err := f.enter("AcknowledgeAndClaim"); err != nil {
		return nil, nil, err
	}
	f.mu.Lock()
	f.rounds = append(f.rounds, len(acks))
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	results, err := f.AcknowledgeBatch(ctx, acks)
	if err != nil {
		return nil, nil, err
	}
	leases, err := f.ClaimDue(ctx, limit, d)
	return results, leases, err
}

// call is one delivery waiting for the test to decide how it ends.
type call struct {
	ctx   context.Context
	d     dispatcher.Delivery
	reply chan reply
}

type reply struct {
	outcome execstore.RunOutcome
	err     error
}

func (c *call) finish(o execstore.RunOutcome) { c.reply <- reply{outcome: o} }
func (c *call) fail(err error)                { c.reply <- reply{err: err} }

// scripted is an invoker that hands each delivery to the test and returns
// what the test replies. It does not watch ctx: a test that wants a
// cooperative delivery waits on call.ctx itself.
type scripted struct {
	calls  chan *call
	closed chan struct{}
}

func (s *scripted) Invoke(ctx context.Context, d dispatcher.Delivery) (execstore.RunOutcome, error) {
	c := &call{ctx: ctx, d: d, reply: make(chan reply, 1)}
	select {
	case s.calls <- c:
	case <-s.closed:
		return execstore.RunOutcome{}, errors.New("test over")
	}
	select {
	case r := <-c.reply:
		return r.outcome, r.err
	case <-s.closed:
		return execstore.RunOutcome{}, errors.New("test over")
	}
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// fixture is a dispatcher on a store on a temporary directory, with a manual
// clock shared by both, a fault-injecting store wrapper and a scripted
// invoker.
type fixture struct {
	t        *testing.T
	clock    *dispatchertest.Clock
	store    *execstore.Store
	faults   *faultStore
	inv      *scripted
	outcomes chan execstore.Record
	logs     *logBuffer
	d        *dispatcher.Dispatcher
}

// newFixture starts a dispatcher with opts and the scripted invoker; the
// fixture fills in the clock, logger and outcome hook.
func newFixture(t *testing.T, opts dispatcher.Options) *fixture {
	t.Helper()
	return newFixtureWith(t, opts, nil)
}

// newFixtureWith is newFixture with another invoker (nil: the scripted one).
func newFixtureWith(t *testing.T, opts dispatcher.Options, inv dispatcher.Invoker) *fixture {
	t.Helper()
	return newFixtureWrapped(t, opts, inv, nil)
}

// newFixtureWrapped is newFixtureWith with the store the dispatcher sees
// wrapped by wrap (nil: the fault store itself).
func newFixtureWrapped(t *testing.T, opts dispatcher.Options, inv dispatcher.Invoker, wrap func(dispatcher.Store) dispatcher.Store) *fixture {
	t.Helper()
	return newFixtureLimited(t, opts, inv, wrap, execstore.Limits{})
}

// newFixtureLimited is newFixtureWrapped on a store with limits.
func newFixtureLimited(t *testing.T, opts dispatcher.Options, inv dispatcher.Invoker, wrap func(dispatcher.Store) dispatcher.Store, limits execstore.Limits) *fixture {
	t.Helper()
	f := &fixture{
		t:        t,
		clock:    dispatchertest.NewClock(t0),
		inv:      &scripted{calls: make(chan *call, 100), closed: make(chan struct{})},
		outcomes: make(chan execstore.Record, 100),
		logs:     &logBuffer{},
	}
	store, err := execstore.Open(t.TempDir(), execstore.Options{Now: f.clock.Now, NoSync: true, Limits: limits})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	f.store = store
	f.faults = &faultStore{Store: store, clock: f.clock, fail: map[string]int{}, calls: map[string]int{}, renewed: make(chan error, 1000), changed: make(chan struct{})}
	opts.Clock = f.clock
	opts.Logger = slog.New(slog.NewTextHandler(f.logs, nil))
	opts.OnOutcome = func(r execstore.Record) { f.outcomes <- r }
	if inv == nil {
		inv = f.inv
	}
	var ds dispatcher.Store = f.faults
	if wrap != nil {
		ds = wrap(ds)
	}
	f.d, err = dispatcher.New(ds, inv, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		close(f.inv.closed)
		ctx, cancel := context.WithTimeout(bg, patience)
		defer cancel()
		if err := f.d.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		store.Close()
	})
	f.d.Start()
	return f
}

func (f *fixture) admit(id string, params string) {
	f.t.Helper()
	f.admitRequest(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"}, params)
}

func (f *fixture) admitRequest(req execstore.AdmitRequest, params string) {
	f.t.Helper()
	id := req.ExecutionID
	if params != "" {
		req.Params = json.RawMessage(params)
	}
	if _, err := f.store.Admit(bg, req); err != nil {
		f.t.Fatalf("Admit(%q): %v", id, err)
	}
}

func (f *fixture) get(id string) execstore.Record {
	f.t.Helper()
	rec, err := f.store.Get(bg, id)
	if err != nil {
		f.t.Fatalf("Get(%q): %v", id, err)
	}
	return rec
}

// next waits for the next delivery.
func (f *fixture) next() *call {
	f.t.Helper()
	select {
	case c := <-f.inv.calls:
		return c
	case <-time.After(patience):
		f.t.Fatal("no delivery arrived")
		return nil
	}
}

// drainWithoutDelivery waits until no delivery is active, and fails if any
// delivery reached the invoker without the test taking it. The scripted
// invoker hands every call to the test and holds its slot until the test
// answers, so such a delivery keeps Drain from returning until the test sees
// its call: one of the two must happen. (An abandoned delivery frees its slot
// without an answer; this is not for tests that abandon one.)
func (f *fixture) drainWithoutDelivery() {
	f.t.Helper()
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, patience)
		defer cancel()
		drained <- f.d.Drain(ctx)
	}()
	select {
	case c := <-f.inv.calls:
		f.t.Fatalf("unexpected delivery of %q", c.d.ExecutionID)
	case err := <-drained:
		if err != nil {
			f.t.Fatalf("Drain: %v", err)
		}
	}
	select { // when both were ready, select chose at random
	case c := <-f.inv.calls:
		f.t.Fatalf("unexpected delivery of %q", c.d.ExecutionID)
	default:
	}
}

// outcome waits for the next published outcome.
func (f *fixture) outcome() execstore.Record {
	f.t.Helper()
	select {
	case r := <-f.outcomes:
		return r
	case <-time.After(patience):
		f.t.Fatal("no outcome was published")
		return execstore.Record{}
	}
}

// noMoreOutcomes fails if an outcome was published that the test did not
// take. Call it once every delivery has settled (drain): publication happens
// before a delivery frees its slot.
func (f *fixture) noMoreOutcomes() {
	f.t.Helper()
	select {
	case r := <-f.outcomes:
		f.t.Fatalf("%q's outcome was published again (%s)", r.ExecutionID, r.Status)
	default:
	}
}

// renewal waits for the next renewal's result.
func (f *fixture) renewal() error {
	f.t.Helper()
	select {
	case err := <-f.faults.renewed:
		return err
	case <-time.After(patience):
		f.t.Fatal("no renewal happened")
		return nil
	}
}

// drain waits until no delivery is active.
func (f *fixture) drain() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(bg, patience)
	defer cancel()
	if err := f.d.Drain(ctx); err != nil {
		f.t.Fatalf("Drain: %v", err)
	}
}

// waitDone waits until ch is closed.
func waitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("timed out waiting for %s", what)
	}
}
