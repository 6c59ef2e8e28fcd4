package execstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// codedErr is an application error with a code, to follow through a record.
type codedErr struct{ code string }

func (e *codedErr) Error() string { return "failed with " + e.code }
func (e *codedErr) Code() string  { return e.code }

// When the lease of the last attempt MaxAttempts allows expires, the next
// claim fails the execution (ATTEMPTS_EXHAUSTED, caused by a lease-expired
// error) instead of leasing it: it is never delivered again, and Await
// answers.
func TestTheLastAttemptsExpiredLeaseFailsTheExecutionAtTheNextClaim(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w", MaxAttempts: 2})
	f.claimOne("e")
	f.clock.Advance(2 * time.Minute) // the first lease expires: one attempt left
	f.claimOne("e")
	wait := f.awaitWaiting("e")
	f.clock.Advance(2 * time.Minute) // the last lease expires
	if leases := f.claim(10, time.Minute); len(leases) != 0 {
		t.Fatalf("ClaimDue after the last attempt = %+v, want nothing", leases)
	}
	for _, rec := range []execstore.Record{f.get("e"), f.answer(wait).rec} {
		if rec.Status != execstore.StatusFailed || rec.Attempts != 2 || rec.MaxAttempts != 2 || rec.Lease != nil || !rec.DueAt.IsZero() {
			t.Fatalf("record after the last attempt: %+v", rec)
		}
		e := rec.Outcome.Error
		if !errors.Is(e, execstore.ErrAttemptsExhausted) || execstore.ErrorCode(e) != "ATTEMPTS_EXHAUSTED" ||
			e.Cause == nil || e.Cause.Name != "LeaseExpiredError" {
			t.Fatalf("outcome error %+v (cause %+v), want ATTEMPTS_EXHAUSTED caused by an expired lease", e, e.Cause)
		}
	}
	if st := f.stats(); st.Pending != 0 || st.Terminal != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// Releasing the lease of the last allowed attempt fails the execution at
// once, with the release's error as the cause.
func TestReleasingTheLastAttemptFailsWithTheReleasesError(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w", MaxAttempts: 2})
	if err := f.s.ReleaseWithCause(ctx, f.claimOne("e"), time.Second, &codedErr{"CARD_DECLINED"}); err != nil {
		t.Fatal(err)
	}
	if rec := f.get("e"); rec.Status != execstore.StatusSuspended && rec.Status != execstore.StatusAdmitted {
		t.Fatalf("after the first release: %s, want still running", rec.Status)
	}
	f.clock.Advance(time.Second)
	if err := f.s.ReleaseWithCause(ctx, f.claimOne("e"), time.Second, fmt.Errorf("charge: %w", &codedErr{"CARD_DECLINED"})); err != nil {
		t.Fatal(err)
	}
	rec := f.get("e")
	e := rec.Outcome.Error
	if rec.Status != execstore.StatusFailed || !errors.Is(e, execstore.ErrAttemptsExhausted) ||
		!errors.Is(e, &codedErr{"CARD_DECLINED"}) || e.Cause.Message != "charge: failed with CARD_DECLINED" {
		t.Fatalf("after the last release: %s %+v (cause %+v)", rec.Status, e, e.Cause)
	}
	f.clock.Advance(time.Hour)
	if leases := f.claim(10, time.Minute); len(leases) != 0 {
		t.Fatalf("ClaimDue = %+v, want nothing", leases)
	}
}

// An acknowledged suspension starts the count again: an execution that waits
// is not failing, whatever its bound.
func TestASuspendedAcknowledgementStartsTheAttemptsAgain(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w", MaxAttempts: 1})
	for i := range 3 {
		f.ack(f.claimOne("e"), execstore.Suspended())
		f.wake("e", f.clock.Now())
		if rec := f.get("e"); rec.Status != execstore.StatusSuspended || rec.Attempts != i+1 {
			t.Fatalf("after delivery %d: %+v", i+1, rec)
		}
	}
	l := f.claimOne("e")
	if rec := f.ack(l, execstore.Completed(nil)); rec.Status != execstore.StatusCompleted {
		t.Fatalf("the fourth delivery of a bound of 1 could not complete: %+v", rec)
	}
}

// An expired last attempt is not leased, and does not count against the
// claim's limit: the claim leases what else is due.
func TestAnExhaustedLeaseDoesNotTakeAPlaceInTheClaim(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w", MaxAttempts: 1})
	f.claimOne("a")
	f.clock.Advance(2 * time.Minute)
	f.admit(execstore.AdmitRequest{ExecutionID: "b", WorkflowID: "w"})
	if leases := f.claim(1, time.Minute); len(leases) != 1 || leases[0].ExecutionID != "b" {
		t.Fatalf("ClaimDue(1) = %+v, want b", leases)
	}
	if rec := f.get("a"); rec.Status != execstore.StatusFailed {
		t.Fatalf("a = %s, want failed", rec.Status)
	}
}

// Until a claim supersedes it, the expired lease of the last attempt is
// still current: its holder may still record an outcome.
func TestTheLastAttemptMayStillFinishUntilAClaimSupersedesIt(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w", MaxAttempts: 1})
	l := f.claimOne("e")
	f.clock.Advance(2 * time.Minute)
	if rec := f.get("e"); rec.Status != execstore.StatusAdmitted || rec.Lease == nil || rec.Attempts != 1 || rec.MaxAttempts != 1 {
		t.Fatalf("before any claim: %+v", rec)
	}
	if rec := f.ack(l, execstore.Completed(nil)); rec.Status != execstore.StatusCompleted {
		t.Fatalf("a late acknowledgement of the last attempt: %+v", rec)
	}
}

// A child started by Start runs under its parent's bound; without one, there
// is none.
func TestAChildRunsUnderItsParentsAttemptBound(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "bounded", WorkflowID: "w", MaxAttempts: 3})
	f.admit(execstore.AdmitRequest{ExecutionID: "free", WorkflowID: "w"})
	leases := map[string]execstore.Lease{}
	for _, l := range f.claim(10, time.Minute) {
		leases[l.ExecutionID] = l
	}
	for id, want := range map[string]int{"bounded": 3, "free": 0} {
		child, err := f.s.Start(ctx, leases[id], "c", "w", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.get(child).MaxAttempts; got != want {
			t.Errorf("child of %s: MaxAttempts %d, want %d", id, got, want)
		}
	}
}
