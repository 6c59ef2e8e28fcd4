package execstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/google/go-cmp/cmp"
)

func TestRetentionDropsParamsContextAndStepsButKeepsTheOutcome(t *testing.T) {
	f := newFixture(t)
	f.s.Close()
	f.opts.Retention = time.Hour
	f.open()
	f.admit(execstore.AdmitRequest{ExecutionID: "parent", WorkflowID: "p", Params: raw(`{"big":"payload"}`), Context: map[string]string{"k": "v"}})
	f.admit(execstore.AdmitRequest{ExecutionID: "live", WorkflowID: "w", Params: raw(`{"keep":1}`)})
	l := f.claimFor("parent")
	f.s.SaveStep(ctx, l, "charge", raw(`"r-1"`))
	child, _ := f.s.Start(ctx, l, "child", "c", nil)
	done := f.ack(l, execstore.Completed(raw(`{"receipt":"r-1"}`)))

	f.clock.Advance(59 * time.Minute)
	f.wake("live", f.clock.Now()) // any write lets the writer check retention
	if rec := f.get("parent"); rec.Params == nil {
		t.Fatal("retired before the retention passed")
	}
	f.clock.Advance(2 * time.Minute)
	f.wake("live", f.clock.Now())
	for _, reopen := range []bool{false, true} {
		if reopen {
			f.reopen()
		}
		rec := f.get("parent")
		want := done
		want.Params, want.Context = nil, nil
		if diff := cmp.Diff(want, rec); diff != "" {
			t.Fatalf("retired record (reopened %v) (-want +got):\n%s", reopen, diff)
		}
		if _, ok, _ := f.s.Step(ctx, "parent", "charge"); ok {
			t.Fatal("a retired execution kept its steps")
		}
		if _, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "parent", WorkflowID: "p"}); !errors.Is(err, execstore.ErrExecutionIDConflict) {
			t.Fatalf("a retired ID was admitted again: %v", err)
		}
		if res := f.wake("parent", f.clock.Now()); res != execstore.WakeIgnored {
			t.Fatalf("wake of a retired execution: %q", res)
		}
		if again := f.ack(l, execstore.Failed(errors.New("late"))); again.Status != execstore.StatusCompleted {
			t.Fatalf("late acknowledgement of a retired execution: %+v", again)
		}
		if got, err := f.s.Await(ctx, "parent"); err != nil || got.Status != execstore.StatusCompleted {
			t.Fatalf("Await of a retired execution: %+v %v", got, err)
		}
		if rec := f.get("live"); string(rec.Params) != `{"keep":1}` {
			t.Fatalf("a live execution lost its params: %+v", rec)
		}
	}
	// The child outlives its retired parent: its outcome wakes nobody, and
	// nothing breaks.
	f.ack(f.claimFor(child), execstore.Completed(nil))
	if err := f.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if st := f.stats(); st.Terminal != 2 || st.Executions != 3 {
		t.Fatalf("stats = %+v", st)
	}
}

// "On a clock whose timers never fire, the writer retires only in the
// rounds that take requests, before their batch, all that is due then." A
// snapshot wakes the writer without a request and retires nothing; the next
// write, even one that changes nothing, answers after every due retirement,
// more than one retire command holds included.
func TestWithoutTheRetentionTickerTheNextRequestRetiresAllThatIsDue(t *testing.T) {
	f := newFixture(t)
	f.s.Close()
	f.opts.Retention = time.Hour
	f.untimed()
	f.open()
	const ended = 1030 // more than one retire command retires
	for i := range ended {
		id := fmt.Sprintf("e-%04d", i)
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
		if _, err := f.s.Cancel(ctx, id, "done"); err != nil {
			t.Fatalf("Cancel(%s): %v", id, err)
		}
	}
	f.clock.Advance(2 * time.Hour)
	if err := f.s.Snapshot(ctx); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if n := f.stats().Retired; n != 0 {
		t.Fatalf("%d retired with no request taken since the retention passed", n)
	}
	if _, err := f.s.RequestWake(ctx, "unknown", f.clock.Now()); !errors.Is(err, execstore.ErrExecutionNotFound) {
		t.Fatalf("wake of an unknown execution: %v", err)
	}
	if n := f.stats().Retired; n != ended {
		t.Fatalf("%d retired after a request, want all %d", n, ended)
	}
}
