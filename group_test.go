package execstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/lockstep"
)

// Callers that each wait for their answer before they send again share one
// fsync: the writer waits for the callers its latest batch answered instead
// of writing the part of them that queued meanwhile on its own. Eight
// callers admitting 40 executions each, one after another, take about 41
// batches (one for the first to arrive, then one per round); taking turns,
// without the wait (GroupWait -1), they took 80–81. The bound here is long,
// so that the claim does not depend on how fast this machine schedules the
// callers; the waits at the end, as callers finish and do not come back, end
// at it.
func TestCallersInLockstepShareOneFsyncPerRound(t *testing.T) {
	for _, tc := range []struct {
		name       string
		wait       time.Duration
		maxBatches uint64
	}{
		{"bound 200ms", 200 * time.Millisecond, 41 + 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := execstore.Open(t.TempDir(), execstore.Options{GroupWait: tc.wait})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			before, _ := s.Stats(ctx)
			const callers, each = 8, 40
			if err := lockstep.Admit(ctx, s, "c", callers, each); err != nil {
				t.Fatal(err)
			}
			after, _ := s.Stats(ctx)
			if got := after.Executions - before.Executions; got != callers*each {
				t.Fatalf("%d executions admitted, want %d", got, callers*each)
			}
			batches := after.WALBatches - before.WALBatches
			if batches > tc.maxBatches {
				t.Errorf("%d admissions took %d fsyncs, want at most %d", callers*each, batches, tc.maxBatches)
			}
			if after.GroupWaits == 0 {
				t.Errorf("no wait for the callers ended with them back (%d ended at the bound)", after.GroupWaitsMissed)
			}
			t.Logf("%d batches, %d waits answered, %d at the bound", batches, after.GroupWaits, after.GroupWaitsMissed)
		})
	}
}

// A call whose every part is refused in the caller's goroutine queues
// nothing and still answers, and the store goes on: the writer counts calls
// by their first queued request, and such a call has none.
func TestCallWithNothingToQueueAnswersAndTheStoreGoesOn(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, acks := range [][]execstore.Ack{nil, {{Lease: execstore.Lease{}, Outcome: execstore.Completed(nil)}}} {
		results, err := f.s.AcknowledgeBatch(ctx, acks)
		if err != nil {
			t.Fatalf("AcknowledgeBatch(%d refused acks): %v", len(acks), err)
		}
		for _, r := range results {
			if r.Err == nil {
				t.Fatal("an acknowledgement of the zero lease was not refused")
			}
		}
	}
	f.admit(execstore.AdmitRequest{ExecutionID: "after", WorkflowID: "w"})
	if got := f.get("after").Status; got != execstore.StatusAdmitted {
		t.Fatalf("status %s after the refused calls, want admitted", got)
	}
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	f.s = nil
}

// Open takes any GroupWait up to GroupWaitMax, and refuses a longer one.
func TestOpenTakesAGroupWaitUpToItsMax(t *testing.T) {
	for _, wait := range []time.Duration{-1, 0, time.Microsecond, execstore.GroupWaitMax, execstore.GroupWaitMax + 1} {
		s, err := execstore.Open(t.TempDir(), execstore.Options{GroupWait: wait})
		switch {
		case wait <= execstore.GroupWaitMax && err != nil:
			t.Errorf("Open with GroupWait %v: %v", wait, err)
		case wait > execstore.GroupWaitMax && !errors.Is(err, execstore.ErrInvalidArgument):
			t.Errorf("Open with GroupWait %v: %v, want ErrInvalidArgument", wait, err)
		}
		if err == nil {
			s.Close()
		}
	}
}
