package execstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/google/go-cmp/cmp"
)

// Cancel makes a non-terminal execution cancelled: terminal, with the reason
// in its outcome's error, which matches ErrCancelled, across a restart too.
func TestCancelEndsAnExecutionWithItsReason(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	f.clock.Advance(time.Minute)
	rec, err := f.s.Cancel(ctx, "order-42", "the customer cancelled")
	if err != nil {
		t.Fatal(err)
	}
	for _, reopen := range []bool{false, true} {
		if reopen {
			f.reopen()
			rec = f.get("order-42")
		}
		if rec.Status != execstore.StatusCancelled || !rec.Status.Terminal() || rec.Outcome == nil ||
			rec.Outcome.Status != execstore.StatusCancelled || !rec.DueAt.IsZero() || rec.Lease != nil {
			t.Fatalf("record after Cancel (reopened %v): %+v", reopen, rec)
		}
		if e := rec.Outcome.Error; e == nil || e.Message != "the customer cancelled" || !errors.Is(e, execstore.ErrCancelled) {
			t.Fatalf("outcome error (reopened %v): %+v, want the reason matching ErrCancelled", reopen, e)
		}
		if !rec.UpdatedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("UpdatedAt = %v, want the cancel's time", rec.UpdatedAt)
		}
	}
	if leases := f.claim(10, time.Minute); len(leases) != 0 {
		t.Fatalf("ClaimDue after Cancel = %+v, want nothing", leases)
	}
}

// Cancel ends the current lease: every write fenced by it is refused with an
// error matching ErrLeaseLost and ErrCancelled; its acknowledgement gets the
// cancelled record, as a late acknowledgement gets a terminal one.
func TestCancelEndsTheLeaseSoTheHoldersNextWriteIsLost(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne("e")
	if _, err := f.s.Cancel(ctx, "e", "stop"); err != nil {
		t.Fatal(err)
	}
	writes := map[string]error{
		"SaveStep": f.s.SaveStep(ctx, l, "k", raw(`1`)),
		"Release":  f.s.Release(ctx, l, 0),
	}
	_, writes["Renew"] = f.s.Renew(ctx, l, time.Minute)
	_, writes["Start"] = f.s.Start(ctx, l, "child", "w", nil)
	for name, err := range writes {
		if !errors.Is(err, execstore.ErrLeaseLost) || !errors.Is(err, execstore.ErrCancelled) {
			t.Errorf("%s after Cancel: %v, want ErrLeaseLost and ErrCancelled", name, err)
		}
	}
	rec, err := f.s.Acknowledge(ctx, l, execstore.Completed(raw(`1`)))
	if err != nil || rec.Status != execstore.StatusCancelled {
		t.Fatalf("Acknowledge after Cancel: %+v, %v; want the cancelled record", rec, err)
	}
}

// Cancel drops pending wakes and watches: nothing is due afterwards, and a
// commit to a watched key wakes nothing.
func TestCancelDropsPendingWakesAndWatches(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.ack(f.claimOne("e"), execstore.Suspended())
	f.wake("e", t0.Add(time.Hour))
	if _, err := f.s.Watch(ctx, "e", "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Cancel(ctx, "e", ""); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Commit(ctx, execstore.Write{Key: "k", Value: raw(`1`)}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Hour)
	if st := f.stats(); st.Pending != 0 || !st.NextDue.IsZero() || st.Terminal != 1 {
		t.Fatalf("stats after Cancel: %+v, want nothing pending and one terminal", st)
	}
	if leases := f.claim(10, time.Minute); len(leases) != 0 {
		t.Fatalf("ClaimDue = %+v, want nothing", leases)
	}
	if err := f.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Cancelling a parent cancels, in the same command, every child it started
// that is not terminal, and theirs; a child that already ended keeps its
// outcome.
func TestCancelCancelsTheChildrenItStartedRecursively(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "p", WorkflowID: "w"})
	lp := f.claimOne("p")
	done, _ := f.s.Start(ctx, lp, "done", "w", nil)
	running, _ := f.s.Start(ctx, lp, "running", "w", nil)
	f.ack(lp, execstore.Suspended())
	leases := map[string]execstore.Lease{}
	for _, l := range f.claim(10, time.Minute) {
		leases[l.ExecutionID] = l
	}
	f.ack(leases[done], execstore.Completed(raw(`"ok"`)))
	l := leases[running]
	grandchild, _ := f.s.Start(ctx, l, "g", "w", nil)
	f.ack(l, execstore.Suspended())
	doneRec := f.get(done)
	logged := f.stats().WALLastIndex

	if _, err := f.s.Cancel(ctx, "p", "order withdrawn"); err != nil {
		t.Fatal(err)
	}
	if got := f.stats().WALLastIndex; got != logged+1 {
		t.Fatalf("the cancellation took %d log entries, want one command", got-logged)
	}
	for _, id := range []string{"p", running, grandchild} {
		rec := f.get(id)
		if rec.Status != execstore.StatusCancelled || rec.Outcome.Error.Message != "order withdrawn" {
			t.Errorf("%s: %s %+v, want cancelled with the parent's reason", id, rec.Status, rec.Outcome)
		}
	}
	if diff := cmp.Diff(doneRec, f.get(done)); diff != "" {
		t.Errorf("a completed child changed (-before +after):\n%s", diff)
	}
	if st := f.stats(); st.Pending != 0 {
		t.Fatalf("%d executions still pending", st.Pending)
	}
	if err := f.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A cancelled child wakes its parent, as a finished one does.
func TestACancelledChildWakesItsParent(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "p", WorkflowID: "w"})
	lp := f.claimOne("p")
	child, _ := f.s.Start(ctx, lp, "c", "w", nil)
	f.ack(lp, execstore.Suspended())
	f.ack(f.claimFor(child), execstore.Suspended()) // the child waits; nothing is due
	f.clock.Advance(time.Minute)
	if _, err := f.s.Cancel(ctx, child, ""); err != nil {
		t.Fatal(err)
	}
	if rec := f.get("p"); rec.Status != execstore.StatusSuspended || !rec.DueAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("parent after its child's cancellation: %s due %v, want suspended and due at the cancel", rec.Status, rec.DueAt)
	}
	f.claimOne("p")
}

// Cancelling a terminal execution changes nothing and returns its record,
// answered without a write; an unknown ID is ErrExecutionNotFound.
func TestCancellingATerminalExecutionChangesNothingAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "done", WorkflowID: "w"})
	f.admit(execstore.AdmitRequest{ExecutionID: "gone", WorkflowID: "w"})
	done := f.ack(f.claimFor("done"), execstore.Completed(raw(`1`)))
	first, err := f.s.Cancel(ctx, "gone", "first")
	if err != nil {
		t.Fatal(err)
	}
	logged := f.stats().WALLastIndex
	f.clock.Advance(time.Minute)
	for id, want := range map[string]execstore.Record{"done": done, "gone": first} {
		rec, err := f.s.Cancel(ctx, id, "again")
		if err != nil {
			t.Fatalf("Cancel(%s) again: %v", id, err)
		}
		if diff := cmp.Diff(want, rec); diff != "" {
			t.Fatalf("Cancel(%s) of a terminal execution (-recorded +returned):\n%s", id, diff)
		}
	}
	if got := f.stats().WALLastIndex; got != logged {
		t.Fatalf("cancelling terminal executions wrote %d entries", got-logged)
	}
	if _, err := f.s.Cancel(ctx, "nobody", ""); !errors.Is(err, execstore.ErrExecutionNotFound) {
		t.Fatalf("Cancel of an unknown ID: %v, want ErrExecutionNotFound", err)
	}
}

// Await answers when the execution it waits for is cancelled, also when it is
// cancelled with an ancestor.
func TestAwaitAnswersWhenTheExecutionIsCancelled(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "p", WorkflowID: "w"})
	lp := f.claimOne("p")
	child, _ := f.s.Start(ctx, lp, "c", "w", nil)
	parentWait, childWait := f.awaitWaiting("p"), f.awaitWaiting(child)
	if _, err := f.s.Cancel(ctx, "p", "why"); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan awaited{parentWait, childWait} {
		if a := f.answer(ch); a.err != nil || a.rec.Status != execstore.StatusCancelled {
			t.Fatalf("Await: %+v, %v; want the cancelled record", a.rec, a.err)
		}
	}
}

// A cancelled record retires like any terminal one and keeps its outcome.
func TestRetentionKeepsACancelledOutcome(t *testing.T) {
	f := newFixture(t)
	f.s.Close()
	f.opts.Retention = time.Hour
	f.open()
	f.admit(execstore.AdmitRequest{ExecutionID: "c", WorkflowID: "w", Params: raw(`{"big":1}`)})
	f.admit(execstore.AdmitRequest{ExecutionID: "live", WorkflowID: "w"})
	cancelled, err := f.s.Cancel(ctx, "c", "not needed")
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Hour)
	f.wake("live", f.clock.Now()) // any write lets the writer check retention
	f.reopen()
	want := cancelled
	want.Params = nil
	if diff := cmp.Diff(want, f.get("c")); diff != "" {
		t.Fatalf("retired cancelled record (-want +got):\n%s", diff)
	}
}
