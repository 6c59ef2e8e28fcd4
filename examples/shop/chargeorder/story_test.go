package chargeorder

// The shop's story from RFC 001: the card is charged exactly once, whatever
// happens to the triggers, the wakes, the workers and the process.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
	"github.com/execstore/execstore/dispatcher/dispatchertest"
	"github.com/execstore/execstore/workflow"
	"github.com/google/go-cmp/cmp"
)

// t0 is 12:00, when order 42 is placed; the wait ends at 12:10.
var t0 = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

const (
	wait     = 10 * time.Minute
	lease    = 30 * time.Second
	patience = 10 * time.Second // bounds every wait; never an expectation
)

var bg = context.Background()

// story is the shop and one process: a store on a directory that survives
// restarts, with the same manual clock throughout.
type story struct {
	t          *testing.T
	dir        string
	clock      *dispatchertest.Clock
	shop       *Shop
	store      *execstore.Store
	client     *workflow.Client
	deliveries atomic.Int64 // deliveries of order-42 to any worker
}

func newStory(t *testing.T) *story {
	t.Helper()
	s := &story{t: t, dir: t.TempDir(), clock: dispatchertest.NewClock(t0), shop: NewShop()}
	s.shop.PlaceOrder(42, "ada", Item{Name: "book", Cents: 1800}, Item{Name: "pen", Cents: 700})
	s.open()
	t.Cleanup(func() { s.store.Close() })
	return s
}

// open opens the store: the process starts.
func (s *story) open() {
	s.t.Helper()
	store, err := execstore.Open(s.dir, execstore.Options{Now: s.clock.Now, NoSync: true})
	if err != nil {
		s.t.Fatalf("Open: %v", err)
	}
	s.store, s.client = store, workflow.NewClient(store)
	if _, err := store.PutQueue(bg, QueueSettings); err != nil {
		s.t.Fatalf("PutQueue: %v", err)
	}
}

// restart closes the store and opens it again from its files.
func (s *story) restart() {
	s.t.Helper()
	if err := s.store.Close(); err != nil {
		s.t.Fatalf("Close: %v", err)
	}
	s.open()
}

// worker is a worker with charge-order behind its own dispatcher, on the
// current store (optionally wrapped). Its logs are kept.
type worker struct {
	d    *dispatcher.Dispatcher
	logs *syncBuffer
	seen chan dispatcher.Delivery // every delivery it got
}

func (s *story) worker(opts dispatcher.Options, wrap func(dispatcher.Store) dispatcher.Store) *worker {
	s.t.Helper()
	w := &worker{logs: &syncBuffer{}, seen: make(chan dispatcher.Delivery, 100)}
	inner := workflow.NewWorker(s.store, workflow.Options{})
	Register(inner, s.shop, Config{Wait: wait})
	RegisterSettlement(inner, s.shop, Config{})
	inv := dispatcher.InvokerFunc(func(ctx context.Context, d dispatcher.Delivery) (execstore.RunOutcome, error) {
		if d.ExecutionID == "order-42" {
			s.deliveries.Add(1)
		}
		w.seen <- d
		return inner.Invoke(ctx, d)
	})
	var store dispatcher.Store = s.store
	if wrap != nil {
		store = wrap(store)
	}
	opts.Clock = s.clock
	opts.LeaseDuration = lease
	opts.PollInterval = time.Hour
	opts.Logger = slog.New(slog.NewTextHandler(w.logs, nil))
	d, err := dispatcher.New(store, inv, opts)
	if err != nil {
		s.t.Fatalf("dispatcher.New: %v", err)
	}
	w.d = d
	d.Start()
	s.t.Cleanup(func() { w.stop(s.t) })
	return w
}

func (w *worker) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(bg, patience)
	defer cancel()
	if err := w.d.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

func (w *worker) next(t *testing.T) dispatcher.Delivery {
	t.Helper()
	select {
	case d := <-w.seen:
		return d
	case <-time.After(patience):
		t.Fatal("no delivery arrived")
		return dispatcher.Delivery{}
	}
}

func (s *story) trigger(id string) error {
	_, err := Trigger(bg, s.client, s.shop, id, 42)
	return err
}

// waitFor waits until id's record has status st (or one of also).
func (s *story) waitFor(id string, st execstore.Status, also ...execstore.Status) execstore.Record {
	s.t.Helper()
	timeout := time.After(patience)
	for {
		changed := s.store.DueChanged()
		if rec, err := s.store.Get(bg, id); err == nil && (rec.Status == st || slices.Contains(also, rec.Status)) {
			return rec
		}
		select {
		case <-changed:
		case <-timeout:
			s.t.Fatalf("%s never became %s", id, st)
		}
	}
}

// outcome waits for id's outcome, which must be a charge.
func (s *story) outcome(id string) Result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(bg, patience)
	defer cancel()
	rec, err := s.client.Wait(ctx, id)
	if err != nil {
		s.t.Fatalf("Wait(%q): %v", id, err)
	}
	res, err := workflow.Result[Result](rec)
	if err != nil {
		s.t.Fatalf("%s failed: %v", id, err)
	}
	return res
}

// chargedOnce checks the card statement: one charge per execution ID given,
// for the given amounts.
func (s *story) chargedOnce(want ...Charge) {
	s.t.Helper()
	if diff := cmp.Diff(want, s.shop.Statement()); diff != "" {
		s.t.Fatalf("card statement (-want +got):\n%s", diff)
	}
}

var firstCharge = Charge{Key: "order-42/charge", Order: 42, Cents: 2500, Receipt: "r-1"}

// "If the shop ever sends the same trigger twice ... the shop expects
// Yieldstar to treat them as one execution."
func TestARepeatedTriggerIsAConflictAndQueuesNothing(t *testing.T) {
	s := newStory(t)
	w := s.worker(dispatcher.Options{}, nil)
	if err := s.trigger("order-42"); err != nil {
		t.Fatal(err)
	}
	w.next(t)
	before := s.waitFor("order-42", execstore.StatusSuspended)
	if err := s.trigger("order-42"); !errors.Is(err, execstore.ErrExecutionIDConflict) {
		t.Fatalf("repeated trigger = %v, want ErrExecutionIDConflict", err)
	}
	after, _ := s.store.Get(bg, "order-42")
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("the repeated trigger changed the record (-before +after):\n%s", diff)
	}
	if st, _ := s.store.Stats(bg); st.Executions != 1 || st.NextDue != t0.Add(wait) {
		t.Fatalf("stats = %+v, want one execution due at the end of its wait", st)
	}
	s.clock.Advance(wait)
	if got := s.outcome("order-42"); got != (Result{Status: "charged", Receipt: "r-1", Cents: 2500}) {
		t.Fatalf("outcome = %+v", got)
	}
	s.chargedOnce(firstCharge)
	s.claimedTimes("order-42", 2)
	w.drain(t)
	if n := s.deliveries.Load(); n != 2 {
		t.Fatalf("%d deliveries, want 2 (the admission's and the wake's)", n)
	}
}

// "At 12:10 both fire, and the queue holds two tasks. Say two workers take
// them at the same moment." Here both timers' wakes merge into one due time,
// and two workers polling at the same instant get one delivery between them.
func TestTwoWakesAtOnceWithTwoWorkersChargeOnce(t *testing.T) {
	s := newStory(t)
	a := s.worker(dispatcher.Options{}, nil)
	b := s.worker(dispatcher.Options{}, nil)
	if err := s.trigger("order-42"); err != nil {
		t.Fatal(err)
	}
	s.waitFor("order-42", execstore.StatusSuspended)
	for range 2 { // two timers for the same time
		if _, err := s.store.RequestWake(bg, "order-42", t0.Add(wait)); err != nil {
			t.Fatal(err)
		}
	}
	s.clock.Advance(wait) // both workers' timers fire together
	s.outcome("order-42")
	s.chargedOnce(firstCharge)
	s.claimedTimes("order-42", 2)
	a.drain(t)
	b.drain(t)
	if n := s.deliveries.Load(); n != 2 {
		t.Fatalf("%d deliveries, want 2", n)
	}
}

// claimedTimes checks that id, which has ended, was claimed n times in all:
// the record counts every claim, and an ended execution is never claimed
// again, so no claim can still be on its way.
func (s *story) claimedTimes(id string, n int) {
	s.t.Helper()
	rec, err := s.store.Get(bg, id)
	if err != nil || !rec.Status.Terminal() || rec.Attempts != n {
		s.t.Fatalf("%s: %s after %d claims, %v; want ended after %d", id, rec.Status, rec.Attempts, err, n)
	}
}

// drain waits until none of the worker's deliveries is active.
func (w *worker) drain(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, patience)
	defer cancel()
	if err := w.d.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
}

// partitioned is a store whose lease renewals fail, as when the worker is cut
// off from it: the worker keeps running but cannot keep its lease.
type partitioned struct{ dispatcher.Store }

func (partitioned) Renew(context.Context, execstore.Lease, time.Duration) (execstore.Lease, error) {
	return execstore.Lease{}, errors.New("network unreachable")
}

// "Yieldstar will not hand order-42 to another worker until the first one
// reports back, or takes too long." Worker A stalls in the load step past its
// lease; B takes over, loads the order (now with an added item) and charges
// it. When A resumes, its step save is refused, and so is everything after.
func TestAWorkerThatStallsPastItsLeaseIsFencedOut(t *testing.T) {
	s := newStory(t)
	stalled, resume := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	s.shop.afterLoad = func(context.Context) {
		if first.CompareAndSwap(false, true) { // only A's load stalls
			close(stalled)
			<-resume
		}
	}
	a := s.worker(dispatcher.Options{Concurrency: 1}, func(st dispatcher.Store) dispatcher.Store { return partitioned{st} })
	if err := s.trigger("order-42"); err != nil {
		t.Fatal(err)
	}
	a.next(t)
	s.waitFor("order-42", execstore.StatusSuspended)
	s.clock.Advance(wait)
	aLease := a.next(t).Lease
	<-stalled // A has read the order (25.00 due) and hangs
	s.shop.AddItem(42, Item{Name: "socks", Cents: 700})
	s.clock.Advance(lease) // A's renewals fail; its lease expires
	b := s.worker(dispatcher.Options{}, nil)
	if got := s.outcome("order-42"); got.Cents != 3200 {
		t.Fatalf("B charged %+v, want the whole order as B loaded it", got)
	}
	if bLease := b.next(t).Lease; bLease.Token <= aLease.Token {
		t.Fatalf("B's token %d is not above A's %d", bLease.Token, aLease.Token)
	}
	close(resume)
	a.drain(t)
	// A's step save was refused: the saved load is B's, and A stopped there.
	if !strings.Contains(a.logs.String(), `workflow: Run(\"load\"): execstore: lease lost`) {
		t.Fatalf("A's save was not refused with a lost lease:\n%s", a.logs)
	}
	if v, _, _ := s.store.Step(bg, "order-42", "load"); !strings.Contains(string(v), "socks") {
		t.Fatalf("saved load = %s, want B's", v)
	}
	// So are A's writes after it, and its acknowledgement changes nothing.
	if err := s.store.SaveStep(bg, aLease, "charge", []byte(`{"id":"r-stale"}`)); !errors.Is(err, execstore.ErrLeaseLost) {
		t.Fatalf("A's SaveStep = %v, want ErrLeaseLost", err)
	}
	rec, err := s.store.Acknowledge(bg, aLease, execstore.Completed([]byte(`{"status":"stale"}`)))
	if err != nil || string(rec.Outcome.Result) != `{"status":"charged","receipt":"r-1","cents":3200}` {
		t.Fatalf("A's Acknowledge = %s, %v; want B's outcome unchanged", rec.Outcome.Result, err)
	}
	s.chargedOnce(Charge{Key: "order-42/charge", Order: 42, Cents: 3200, Receipt: "r-1"})
}

// "If the process restarts, Yieldstar runs the workflow again from the top."
// The wake survives the restart, and the workflow resumes after its wait.
func TestARestartMidWaitChargesOnce(t *testing.T) {
	s := newStory(t)
	w := s.worker(dispatcher.Options{}, nil)
	if err := s.trigger("order-42"); err != nil {
		t.Fatal(err)
	}
	s.waitFor("order-42", execstore.StatusSuspended)
	waiting := make(chan error, 1)
	client := s.client
	go func() { _, err := client.Wait(bg, "order-42"); waiting <- err }()
	w.stop(t)
	s.restart()
	if err := <-waiting; !errors.Is(err, execstore.ErrClosed) {
		t.Fatalf("the old process's Wait = %v, want ErrClosed", err)
	}
	s.worker(dispatcher.Options{}, nil)
	s.clock.Advance(wait)
	s.outcome("order-42") // the new process waits on the durable record
	s.chargedOnce(firstCharge)
}

// The process dies after the gateway charged the card but before the charge
// step's receipt was saved. The rerun charges again with the same
// idempotency key, and the gateway returns the first receipt.
func TestARestartMidChargeChargesOnce(t *testing.T) {
	s := newStory(t)
	charged, resume := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	s.shop.afterCharge = func(context.Context) {
		if first.CompareAndSwap(false, true) { // only the first charge's reply is lost
			close(charged)
			<-resume
		}
	}
	w := s.worker(dispatcher.Options{}, nil)
	if err := s.trigger("order-42"); err != nil {
		t.Fatal(err)
	}
	s.waitFor("order-42", execstore.StatusSuspended)
	s.clock.Advance(wait)
	<-charged
	// The process goes down: its store closes under the charge in flight,
	// whose receipt then cannot be saved.
	if err := s.store.Close(); err != nil {
		t.Fatal(err)
	}
	close(resume)
	w.stop(t)
	s.open()
	s.worker(dispatcher.Options{}, nil)
	s.clock.Advance(lease) // the dead process's lease expires
	if got := s.outcome("order-42"); got.Receipt != "r-1" {
		t.Fatalf("outcome = %+v, want the first charge's receipt", got)
	}
	s.chargedOnce(firstCharge)
	if n := s.shop.GatewayCalls(); n != 2 {
		t.Fatalf("%d gateway requests, want 2 (the lost reply and the rerun)", n)
	}
}

// "Say the customer adds an item to order 42 ... The shop triggers
// charge-order again ... "order-42"." The reuse is refused, so the shop
// learns to use order-42-2, which charges the new item.
func TestAReusedIDIsAConflictAndANewIDChargesTheNewItem(t *testing.T) {
	s := newStory(t)
	s.worker(dispatcher.Options{}, nil)
	if err := s.trigger("order-42"); err != nil {
		t.Fatal(err)
	}
	s.waitFor("order-42", execstore.StatusSuspended)
	s.clock.Advance(wait)
	first := s.outcome("order-42")
	s.shop.AddItem(42, Item{Name: "socks", Cents: 700})
	if err := s.trigger("order-42"); !errors.Is(err, execstore.ErrExecutionIDConflict) {
		t.Fatalf("reused ID = %v, want ErrExecutionIDConflict", err)
	}
	if again := s.outcome("order-42"); again != first {
		t.Fatalf("order-42's outcome changed to %+v", again)
	}
	if err := s.trigger("order-42-2"); err != nil {
		t.Fatal(err)
	}
	s.waitFor("order-42-2", execstore.StatusSuspended)
	s.clock.Advance(wait)
	if got := s.outcome("order-42-2"); got != (Result{Status: "charged", Receipt: "r-2", Cents: 700}) {
		t.Fatalf("order-42-2 = %+v", got)
	}
	s.chargedOnce(firstCharge, Charge{Key: "order-42-2/charge", Order: 42, Cents: 700, Receipt: "r-2"})
}

// "Then it loads the order, and if the order is still open, it charges the
// card."
func TestAnOrderCancelledDuringTheWaitIsNotCharged(t *testing.T) {
	s := newStory(t)
	s.worker(dispatcher.Options{}, nil)
	if err := s.trigger("order-42"); err != nil {
		t.Fatal(err)
	}
	s.waitFor("order-42", execstore.StatusSuspended)
	s.shop.Cancel(42)
	s.clock.Advance(wait)
	if got := s.outcome("order-42"); got.Status != "skipped" {
		t.Fatalf("outcome = %+v, want skipped", got)
	}
	s.chargedOnce()
}

// "The workflow waits ten minutes, in case the customer cancels." The
// customer cancels at 12:05: the execution is cancelled at once, with the
// reason in its record; it is never delivered again, and the card is never
// charged, not even asked to be.
func TestACustomerWhoCancelsWithinTheTenMinutesIsNeverCharged(t *testing.T) {
	s := newStory(t)
	w := s.worker(dispatcher.Options{}, nil)
	if err := s.trigger("order-42"); err != nil {
		t.Fatal(err)
	}
	s.waitFor("order-42", execstore.StatusSuspended)
	w.next(t) // the first delivery, which began the wait
	s.clock.Advance(wait / 2)
	rec, err := CancelOrder(bg, s.store, s.shop, 42, "order-42")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != execstore.StatusCancelled || rec.Outcome.Error.Message != "the customer cancelled order 42" {
		t.Fatalf("record after the cancellation: %s %+v", rec.Status, rec.Outcome)
	}
	s.clock.Advance(wait) // well past 12:10, when the wait would have ended
	w.drain(t)
	s.claimedTimes("order-42", 1) // and, being terminal, it is never claimed again
	if n := s.deliveries.Load(); n != 1 {
		t.Fatalf("order-42 was delivered %d times, want only the first", n)
	}
	if _, err := workflow.Result[Result](s.waitFor("order-42", execstore.StatusCancelled)); !errors.Is(err, execstore.ErrCancelled) {
		t.Fatalf("the outcome reads as %v, want ErrCancelled", err)
	}
	s.chargedOnce() // nothing at all
	if n := s.shop.GatewayCalls(); n != 0 {
		t.Fatalf("the gateway got %d charge requests, want none", n)
	}
}

// syncBuffer is a log buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The story on a cluster of three replicated nodes whose leader stops while
// order 42 waits: the new leader's dispatcher charges the card once, and
// the rest of the story is the single store's.
func TestTheStoryOnAClusterWhoseLeaderStopsChargesOnce(t *testing.T) {
	var out bytes.Buffer
	err := RunDemo(context.Background(), DemoOptions{
		Dir: t.TempDir(), Out: &out, Replicas: 3,
		Clock: dispatchertest.NewClock(time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		t.Fatalf("RunDemo: %v\n%s", err, out.String())
	}
	story := out.String()
	for _, want := range []string{
		"trigger order-42: refused with EXECUTION_ID_CONFLICT",
		"stops. The other nodes elect node-",
		"order-42: completed, charged 25.00 (receipt r-1)",
		"order-42-2: completed, charged 7.00 (receipt r-2)",
		"charged 2 times, 32.00 in all, 2 gateway requests\n",
	} {
		if !strings.Contains(story, want) {
			t.Fatalf("the story lacks %q:\n%s", want, story)
		}
	}
}

// "One customer's orders charge one at a time": with charge-order's queue
// settings, a claim leases one delivery of a customer at a time, and the
// next once it ends, while another customer's order runs beside it.
func TestOneCustomersOrdersChargeOneAtATime(t *testing.T) {
	s := newStory(t)
	s.shop.PlaceOrder(43, "ada", Item{Name: "socks", Cents: 700})
	s.shop.PlaceOrder(44, "bo", Item{Name: "hat", Cents: 1500})
	for _, o := range []struct {
		id    string
		order int
	}{{"order-42", 42}, {"order-43", 43}, {"order-44", 44}} {
		if _, err := Trigger(bg, s.client, s.shop, o.id, o.order); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := s.store.ClaimDue(bg, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range leases {
		ids = append(ids, l.ExecutionID)
	}
	if strings.Join(ids, " ") != "order-42 order-44" {
		t.Fatalf("a claim leased %v, want ada's first order and bo's", ids)
	}
	if _, err := s.store.Acknowledge(bg, leases[0], execstore.Suspended()); err != nil {
		t.Fatal(err)
	}
	next, err := s.store.ClaimDue(bg, 10, time.Minute)
	if err != nil || len(next) != 1 || next[0].ExecutionID != "order-43" {
		t.Fatalf("once ada's first delivery ended, a claim leased %v, %v; want order-43", next, err)
	}
}
