package dispatcher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
)

// Cancelling an execution during its delivery cancels the delivery's context
// at the next renewal, with a cause that matches execstore.ErrCancelled (and
// ErrLeaseLost); the dispatcher neither acknowledges nor releases.
func TestACancelledExecutionsDeliveryIsCancelledWithinOneRenewalInterval(t *testing.T) {
	f := newFixture(t, dispatcher.Options{Concurrency: 1, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second})
	f.admit("e", "")
	c := f.next()
	if _, err := f.store.Cancel(bg, "e", "the customer cancelled"); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(10 * time.Second)
	if err := f.renewal(); !errors.Is(err, execstore.ErrCancelled) {
		t.Fatalf("renewal = %v, want ErrCancelled", err)
	}
	waitDone(t, c.ctx.Done(), "the delivery's cancellation")
	cause := context.Cause(c.ctx)
	if !errors.Is(cause, execstore.ErrCancelled) || !errors.Is(cause, execstore.ErrLeaseLost) {
		t.Fatalf("cause = %v, want one matching ErrCancelled and ErrLeaseLost", cause)
	}
	c.fail(cause)
	f.drain()
	if n, m := f.faults.count("Acknowledge"), f.faults.count("Release"); n != 0 || m != 0 {
		t.Fatalf("acknowledged %d and released %d times, want neither", n, m)
	}
	if rec := f.get("e"); rec.Status != execstore.StatusCancelled {
		t.Fatalf("record = %s, want cancelled", rec.Status)
	}
}

// The release-with-backoff of failing deliveries and MaxAttempts compose:
// each failure is released with the growing delay until the last allowed
// attempt, whose release fails the execution with ATTEMPTS_EXHAUSTED caused
// by the invoker's error; it is never delivered again.
func TestReleaseWithBackoffEndsAtTheLastAllowedAttempt(t *testing.T) {
	f := newFixture(t, dispatcher.Options{RetryBaseDelay: time.Second, RetryMaxDelay: time.Minute})
	f.admitRequest(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w", MaxAttempts: 3}, "")
	for attempt, delay := range []time.Duration{time.Second, 2 * time.Second} {
		c := f.next()
		if c.d.Attempt != attempt+1 {
			t.Fatalf("attempt = %d, want %d", c.d.Attempt, attempt+1)
		}
		c.fail(errors.New("payment gateway unavailable"))
		f.drain()
		if rec := f.get("e"); rec.Status != execstore.StatusAdmitted || !rec.DueAt.Equal(f.clock.Now().Add(delay)) {
			t.Fatalf("attempt %d: %s due %v, want admitted and due after %v", attempt+1, rec.Status, rec.DueAt, delay)
		}
		f.clock.Advance(delay)
	}
	last := f.next()
	if last.d.Attempt != 3 {
		t.Fatalf("attempt = %d, want 3", last.d.Attempt)
	}
	last.fail(errors.New("payment gateway unavailable"))
	f.drain()
	rec := f.get("e")
	e := rec.Outcome
	if rec.Status != execstore.StatusFailed || e == nil || !errors.Is(e.Error, execstore.ErrAttemptsExhausted) ||
		e.Error.Cause == nil || e.Error.Cause.Message != "payment gateway unavailable" {
		t.Fatalf("after the last attempt: %s %+v", rec.Status, e)
	}
	f.clock.Advance(time.Hour)
	f.drainWithoutDelivery()
}
