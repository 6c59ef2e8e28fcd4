package harness

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
)

// Execstore is execstore through its public API: Admit, ClaimDue and
// AcknowledgeBatch (or AcknowledgeAndClaim, chained), and the dispatcher
// package as its worker loop.
type Execstore struct {
	NoSync bool

	dir      string
	store    *execstore.Store
	heapBase uint64
}

func (e *Execstore) Name() string {
	if e.NoSync {
		return "execstore NoSync"
	}
	return "execstore"
}

func (e *Execstore) options(noSync bool) execstore.Options {
	return execstore.Options{NoSync: noSync}
}

func (e *Execstore) Open(_ context.Context, dir string) error {
	e.dir = e.dirOr(dir)
	e.heapBase = heapNow()
	s, err := execstore.Open(e.dir, e.options(e.NoSync))
	e.store = s
	if err != nil {
		return err
	}
	return e.settle()
}

func (e *Execstore) dirOr(dir string) string {
	if dir == "" {
		return e.dir
	}
	return dir
}

func (e *Execstore) Close() error {
	if e.store == nil {
		return nil
	}
	err := e.store.Close()
	e.store = nil
	return err
}

// Store is the open store, for the profile and the floor's batch sizes.
func (e *Execstore) Store() *execstore.Store { return e.store }

func (e *Execstore) Admit(ctx context.Context, id string) (bool, error) {
	_, err := e.store.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "bench"})
	if errors.Is(err, execstore.ErrExecutionIDConflict) {
		return true, nil
	}
	return false, err
}

// fillNoSyncMin is the fill size from which a durable store is filled
// through a NoSync reopen: setup is not what is measured, and a durable fill
// of 10^7 would take minutes. Close syncs everything before the durable
// reopen, so the state measured afterwards is the same.
const fillNoSyncMin = 100_000

func (e *Execstore) Fill(ctx context.Context, prefix string, from, n int) error {
	if e.NoSync || n < fillNoSyncMin {
		if err := e.admitMany(ctx, prefix, from, n); err != nil {
			return err
		}
		return e.snapshotAfterFill(ctx)
	}
	if err := e.reopen(true); err != nil {
		return err
	}
	if err := e.admitMany(ctx, prefix, from, n); err != nil {
		return err
	}
	return e.reopen(false)
}

// snapshotAfterFill waits for a snapshot the fill's admissions started
// (the Go benchmarks take one before their timer starts for the same
// reason). Otherwise it would still be encoding, on the same two cores,
// inside the next timed run: setup's cost, not the workload's, whose own
// snapshots still fall where they fall. A durable fill needs no wait: its
// reopen waits for a snapshot in flight.
func (e *Execstore) snapshotAfterFill(ctx context.Context) error {
	return e.waitUntil(ctx, 10*time.Minute, "the snapshot started by the fill finished", func(g execstore.Gauges) bool {
		return g.SnapshotRunning == 0
	})
}

// waitUntil polls the store's gauges until done holds, for at most patience.
func (e *Execstore) waitUntil(ctx context.Context, patience time.Duration, what string, done func(execstore.Gauges) bool) error {
	for deadline := time.Now().Add(patience); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		g, err := e.store.Gauges(ctx)
		if err != nil {
			return err
		}
		if done(g) {
			return nil
		}
	}
	return fmt.Errorf("waited %v, and still not: %s", patience, what)
}

func (e *Execstore) reopen(noSync bool) error {
	_, err := e.reopenTimed(noSync)
	return err
}

func (e *Execstore) reopenTimed(noSync bool) (time.Duration, error) {
	if err := e.store.Close(); err != nil {
		return 0, err
	}
	start := time.Now()
	s, err := execstore.Open(e.dir, e.options(noSync))
	e.store = s
	took := time.Since(start)
	if err != nil {
		return took, err
	}
	return took, e.settle()
}

// settle waits until the store's check after Open has read the fallback
// (the older snapshot and the log between the two snapshots): it runs once
// per Open, in the background, and on two cores it would otherwise be
// measured as part of whatever runs next.
func (e *Execstore) settle() error {
	return e.waitUntil(context.Background(), 5*time.Minute, "the check of the fallback finished", func(g execstore.Gauges) bool {
		return g.FallbackChecked
	})
}

// Reopen closes the store and times opening it again: recovery from the
// newest snapshot plus the log after it.
func (e *Execstore) Reopen(context.Context) (time.Duration, error) { return e.reopenTimed(e.NoSync) }

func (e *Execstore) admitMany(ctx context.Context, prefix string, from, n int) error {
	return parallel(ctx, n, 64, func(i int) error {
		_, err := e.store.Admit(ctx, execstore.AdmitRequest{ExecutionID: id(prefix, from+i), WorkflowID: "bench"})
		return err
	})
}

// claimLease is how long the claim workload's leases last.
const claimLease = time.Minute

func (e *Execstore) ClaimComplete(ctx context.Context, limit int) (int, error) {
	leases, err := e.store.ClaimDue(ctx, limit, claimLease)
	if err != nil || len(leases) == 0 {
		return 0, err
	}
	res, err := e.store.AcknowledgeBatch(ctx, completions(leases))
	return ackCount(res, err)
}

// completions acknowledges each lease as completed.
func completions(leases []execstore.Lease) []execstore.Ack {
	acks := make([]execstore.Ack, len(leases))
	for i, l := range leases {
		acks[i] = execstore.Ack{Lease: l, Outcome: execstore.Completed(nil)}
	}
	return acks
}

// ackCount is how many acknowledgements res recorded, or the first error.
func ackCount(res []execstore.AckResult, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	for _, r := range res {
		if r.Err != nil {
			return 0, r.Err
		}
	}
	return len(res), nil
}

// Chain is a claimer that acknowledges the batch it ran and claims the next
// with one AcknowledgeAndClaim: one WAL batch, one fsync, per round.
func (e *Execstore) Chain() ClaimChain { return &execChain{store: e.store} }

type execChain struct {
	store  *execstore.Store
	leases []execstore.Lease // claimed, not yet acknowledged
}

func (c *execChain) Next(ctx context.Context, limit int) (int, int, error) {
	if len(c.leases) == 0 {
		leases, err := c.store.ClaimDue(ctx, limit, claimLease)
		if err != nil {
			return 0, 0, err
		}
		c.leases = leases
		return 0, len(leases), nil
	}
	res, leases, err := c.store.AcknowledgeAndClaim(ctx, completions(c.leases), limit, claimLease)
	n, err := ackCount(res, err)
	if err != nil {
		return 0, 0, err
	}
	c.leases = leases
	return n, len(leases), nil
}

func (c *execChain) Finish(ctx context.Context) (int, error) {
	if len(c.leases) == 0 {
		return 0, nil
	}
	n, err := ackCount(c.store.AcknowledgeBatch(ctx, completions(c.leases)))
	if err != nil {
		return 0, err
	}
	c.leases = nil
	return n, nil
}

// Work runs a dispatcher: it claims what is due, reads each record, calls
// the no-op invoker, and acknowledges; OnOutcome reports the completion.
func (e *Execstore) Work(_ context.Context, conc int, onRun, onDone func(string)) (func(), error) {
	inv := dispatcher.InvokerFunc(func(_ context.Context, d dispatcher.Delivery) (execstore.RunOutcome, error) {
		onRun(d.ExecutionID)
		return execstore.Completed(nil), nil
	})
	d, err := dispatcher.New(e.store, inv, dispatcher.Options{
		Concurrency: conc,
		OnOutcome:   func(r execstore.Record) { onDone(r.ExecutionID) },
	})
	if err != nil {
		return nil, err
	}
	d.Start()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.Stop(ctx); err != nil {
			panic(fmt.Sprintf("dispatcher stop: %v", err))
		}
	}, nil
}

// Size is the heap the process gained since Open, after a full collection.
func (e *Execstore) Size(context.Context) (int64, string, error) {
	return int64(heapNow()) - int64(e.heapBase), "heap", nil
}

// WALBatches returns the store's WAL batches and entries so far.
func (e *Execstore) WALBatches(ctx context.Context) (batches, entries uint64, err error) {
	st, err := e.store.Stats(ctx)
	return st.WALBatches, st.WALLastIndex, err
}

func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
