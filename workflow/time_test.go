package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
)

// runDue claims and delivers whatever is due, round after round, until
// nothing is due or rounds run out. It returns the deliveries made and the
// log entries written meanwhile.
func runDue(h *harness, rounds int) (deliveries int, walEntries uint64) {
	h.t.Helper()
	before := h.stats().WALLastIndex
	for range rounds {
		leases, err := h.store.ClaimDue(bg, 100, time.Minute)
		if err != nil {
			h.t.Fatalf("ClaimDue: %v", err)
		}
		if len(leases) == 0 {
			break
		}
		for _, l := range leases {
			deliveries++
			if d := h.deliverWith(bg, l); d.err != nil {
				h.t.Fatalf("delivery of %s: %v", l.ExecutionID, d.err)
			}
		}
	}
	return deliveries, h.stats().WALLastIndex - before
}

func (h *harness) stats() execstore.Stats {
	h.t.Helper()
	st, err := h.store.Stats(bg)
	if err != nil {
		h.t.Fatalf("Stats: %v", err)
	}
	return st
}

func registerNap(h *harness) {
	workflow.Register(h.worker, "nap", func(x *workflow.Execution, _ struct{}) (string, error) {
		if err := x.Sleep("nap", 10*time.Minute); err != nil {
			return "", err
		}
		return "rested", nil
	})
}

// The clock jumps an hour ahead and back. The store's time stays an hour
// ahead (it never goes backwards), so the store finds a sleep's (or a
// retry's) wake due while the clock has not reached it. The rerun the store
// delivered must find the wake reached: were it to ask for the same wake
// again and suspend, the store would deliver it again at once, writing to
// the log in a loop until the clock caught up.
func TestARerunTheStoreFoundDueDoesNotSuspendAgainForTheSameWake(t *testing.T) {
	// The rerun's log entries: its claim and acknowledgement, and the retry's
	// saved step.
	for _, c := range []struct {
		workflowID  string
		wantEntries uint64
	}{{"nap", 2}, {"retry", 3}} {
		workflowID, wantEntries := c.workflowID, c.wantEntries
		t.Run(workflowID, func(t *testing.T) {
			h := newHarness(t)
			registerNap(h)
			attempts := 0
			workflow.Register(h.worker, "retry", func(x *workflow.Execution, _ struct{}) (string, error) {
				return workflow.Run(x, "charge", func(context.Context) (string, error) {
					if attempts++; attempts == 1 {
						return "", workflow.Retryable(errDeclined, 2, 10*time.Minute)
					}
					return "charged", nil
				})
			})
			h.trigger("e", workflowID, nil)
			suspended(t, h.deliver("e"))
			h.clock.Set(t0.Add(time.Hour))
			if err := h.store.Commit(bg, execstore.Write{Key: "k", Value: []byte(`1`)}); err != nil { // stamped an hour ahead
				t.Fatalf("Commit: %v", err)
			}
			h.clock.Set(t0.Add(time.Minute))

			deliveries, entries := runDue(h, 5)
			if rec := h.get("e"); rec.Status != execstore.StatusCompleted || deliveries != 1 || entries != wantEntries {
				t.Fatalf("after the jump: %d deliveries, %d log entries, e %s (due %v); want 1 delivery, %d entries, completed",
					deliveries, entries, rec.Status, rec.DueAt, wantEntries)
			}
		})
	}
}

// The worker's own clock plays no part: a worker whose clock reads an hour
// behind the store's neither sleeps from it nor decides from it that a wake
// has not come.
func TestSleepCountsInTheStoresTimeNotTheWorkersClock(t *testing.T) {
	h := newHarness(t)
	behind := func() time.Time { return t0.Add(-time.Hour) }
	h.worker = workflow.NewWorker(h.store, workflow.Options{Now: behind})
	registerNap(h)
	h.trigger("e", "nap", nil)

	deliveries, entries := runDue(h, 5)
	rec := h.get("e")
	if want := t0.Add(10 * time.Minute); deliveries != 1 || rec.Status != execstore.StatusSuspended || !rec.DueAt.Equal(want) {
		t.Fatalf("%d deliveries (%d log entries), e %s due %v; want 1 delivery, suspended until %v", deliveries, entries, rec.Status, rec.DueAt, want)
	}
	h.clock.Set(t0.Add(10 * time.Minute))
	if deliveries, _ := runDue(h, 5); deliveries != 1 || h.get("e").Status != execstore.StatusCompleted {
		t.Fatalf("at the wake: %d deliveries, e %s; want 1, completed", deliveries, h.get("e").Status)
	}
}
