package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
	"github.com/execstore/execstore/dispatcher/dispatchertest"
	"github.com/execstore/execstore/workflow"
)

// t0 is the manual clock's start: every test's times are relative to it.
var t0 = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

// patience bounds every wait, so that a broken test fails instead of hanging.
// It is never an expectation about how long anything takes.
const patience = 10 * time.Second

var bg = context.Background()

// harness is a store on a temporary directory with a manual clock, and a
// worker, which takes its time from the store. Tests deliver executions to the worker by hand (deliver), or run a
// dispatcher (dispatch).
type harness struct {
	t         *testing.T
	dir       string
	retention time.Duration // Options.Retention of the store open opens
	clock     *dispatchertest.Clock
	store     *execstore.Store
	worker    *workflow.Worker
	client    *workflow.Client
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), clock: dispatchertest.NewClock(t0)}
	h.open()
	t.Cleanup(func() { h.store.Close() })
	return h
}

func (h *harness) open() {
	h.t.Helper()
	store, err := execstore.Open(h.dir, execstore.Options{Now: h.clock.Now, NoSync: true, Retention: h.retention})
	if err != nil {
		h.t.Fatalf("Open: %v", err)
	}
	h.store = store
	h.worker = workflow.NewWorker(store, workflow.Options{})
	h.client = workflow.NewClient(store)
}

func (h *harness) trigger(id, workflowID string, params any) {
	h.t.Helper()
	if _, err := h.client.Trigger(bg, workflow.TriggerRequest{ExecutionID: id, WorkflowID: workflowID, Params: params}); err != nil {
		h.t.Fatalf("Trigger(%q): %v", id, err)
	}
}

func (h *harness) get(id string) execstore.Record {
	h.t.Helper()
	rec, err := h.store.Get(bg, id)
	if err != nil {
		h.t.Fatalf("Get(%q): %v", id, err)
	}
	return rec
}

// delivered is what one hand-made delivery gave.
type delivered struct {
	outcome execstore.RunOutcome
	err     error            // the worker's error (no outcome)
	rec     execstore.Record // after acknowledging the outcome
}

// deliver claims id, which must be due, runs it on the worker as a
// dispatcher would, and acknowledges its outcome. Other executions claimed
// along the way are released for later.
func (h *harness) deliver(id string) delivered {
	h.t.Helper()
	lease := h.claim(id)
	return h.deliverWith(bg, lease)
}

func (h *harness) claim(id string) execstore.Lease {
	h.t.Helper()
	leases, err := h.store.ClaimDue(bg, 100, time.Minute)
	if err != nil {
		h.t.Fatalf("ClaimDue: %v", err)
	}
	var lease execstore.Lease
	for _, l := range leases {
		if l.ExecutionID == id {
			lease = l
		} else if err := h.store.Release(bg, l, 0); err != nil {
			h.t.Fatalf("Release(%+v): %v", l, err)
		}
	}
	if lease.Token == 0 {
		h.t.Fatalf("%q is not due (claimed %+v)", id, leases)
	}
	return lease
}

func (h *harness) deliverWith(ctx context.Context, lease execstore.Lease) delivered {
	h.t.Helper()
	rec := h.get(lease.ExecutionID)
	outcome, err := h.worker.Invoke(ctx, dispatcher.Delivery{
		ExecutionID: rec.ExecutionID,
		WorkflowID:  rec.WorkflowID,
		Params:      rec.Params,
		Context:     rec.Context,
		Lease:       lease,
		Attempt:     rec.Attempts,
		Parent:      rec.Parent,
	})
	if err != nil {
		return delivered{err: err}
	}
	acked, err := h.store.Acknowledge(bg, lease, outcome)
	if err != nil {
		h.t.Fatalf("Acknowledge(%+v): %v", outcome, err)
	}
	return delivered{outcome: outcome, rec: acked}
}

// notDue checks that id cannot be claimed now.
func (h *harness) notDue(id string) {
	h.t.Helper()
	rec := h.get(id)
	if !rec.DueAt.IsZero() && !rec.DueAt.After(h.clock.Now()) {
		h.t.Fatalf("%q is due at %v (now %v)", id, rec.DueAt, h.clock.Now())
	}
}

// dispatch starts a dispatcher on the harness's store and clock; it stops
// when the test ends.
func (h *harness) dispatch(opts dispatcher.Options) *dispatcher.Dispatcher {
	h.t.Helper()
	opts.Clock = h.clock
	d, err := dispatcher.New(h.store, h.worker, opts)
	if err != nil {
		h.t.Fatalf("dispatcher.New: %v", err)
	}
	d.Start()
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, patience)
		defer cancel()
		d.Stop(ctx)
	})
	return d
}

// await waits for id's terminal record.
func (h *harness) await(id string) execstore.Record {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(bg, patience)
	defer cancel()
	rec, err := h.client.Wait(ctx, id)
	if err != nil {
		h.t.Fatalf("Wait(%q): %v", id, err)
	}
	return rec
}

// failure returns a failed record's error, failing the test if it did not
// fail.
func failure(t *testing.T, d delivered) *execstore.WorkflowError {
	t.Helper()
	if d.err != nil || d.rec.Status != execstore.StatusFailed {
		t.Fatalf("delivery = %s, %v; want failed", d.rec.Status, d.err)
	}
	return d.rec.Outcome.Error
}

func result[R any](t *testing.T, d delivered) R {
	t.Helper()
	if d.err != nil || d.rec.Status != execstore.StatusCompleted {
		t.Fatalf("delivery = %s, %v (%+v); want completed", d.rec.Status, d.err, d.rec.Outcome)
	}
	v, err := workflow.Result[R](d.rec)
	if err != nil {
		t.Fatalf("Result: %v", err)
	}
	return v
}

func suspended(t *testing.T, d delivered) {
	t.Helper()
	if d.err != nil || d.rec.Status != execstore.StatusSuspended {
		t.Fatalf("delivery = %s, %v (%+v); want suspended", d.rec.Status, d.err, d.rec.Outcome)
	}
}

// declined is a step error with a code, as a payment gateway might return.
type declined struct{ reason string }

func (e *declined) Error() string { return "card declined: " + e.reason }
func (e *declined) Code() string  { return "CARD_DECLINED" }

var errDeclined error = &declined{reason: "insufficient funds"}

// dispatcherOptions are options for a dispatcher in a test: defaults, with
// a poll interval the manual clock never reaches unless told.
func dispatcherOptions() dispatcher.Options {
	return dispatcher.Options{PollInterval: time.Hour}
}
