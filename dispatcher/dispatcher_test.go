package dispatcher_test

// The rules of @yieldstar/core 0.6.0's ExecutionDispatcher, one test each.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
	"github.com/google/go-cmp/cmp"
)

// "A delivery runs: the worker reads workflowId, params and context from the
// record, not from the wake."
func TestDeliveryCarriesTheEventReadFromTheRecord(t *testing.T) {
	f := newFixture(t, dispatcher.Options{})
	_, err := f.store.Admit(bg, execstore.AdmitRequest{
		ExecutionID: "order-42",
		WorkflowID:  "charge-order",
		Params:      []byte(`{ "order" : 42 }`),
		Context:     map[string]string{"tenant": "shop"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := f.next()
	want := dispatcher.Delivery{
		ExecutionID: "order-42",
		WorkflowID:  "charge-order",
		Params:      []byte(`{ "order" : 42 }`),
		Context:     map[string]string{"tenant": "shop"},
		Lease:       execstore.Lease{ExecutionID: "order-42", Token: 1, ExpiresAt: t0.Add(dispatcher.DefaultLeaseDuration)},
		Attempt:     1,
	}
	if diff := cmp.Diff(want, c.d); diff != "" {
		t.Fatalf("delivery (-want +got):\n%s", diff)
	}
	c.finish(execstore.Completed([]byte(`{"receipt":"r-1"}`)))
	if rec := f.outcome(); rec.Status != execstore.StatusCompleted || string(rec.Outcome.Result) != `{"receipt":"r-1"}` {
		t.Fatalf("published %+v, want the completed record", rec)
	}
}

func TestOutcomesAreAcknowledgedAndOnlyTerminalOnesPublished(t *testing.T) {
	tests := []struct {
		name      string
		outcome   execstore.RunOutcome
		status    execstore.Status
		published bool
	}{
		{"completed", execstore.Completed([]byte(`1`)), execstore.StatusCompleted, true},
		{"failed", execstore.Failed(errors.New("card declined")), execstore.StatusFailed, true},
		{"suspended", execstore.Suspended(), execstore.StatusSuspended, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, dispatcher.Options{})
			f.admit("e", "")
			f.next().finish(tt.outcome)
			f.drain()
			if rec := f.get("e"); rec.Status != tt.status || rec.Lease != nil {
				t.Fatalf("record = %s lease %+v, want %s with no lease", rec.Status, rec.Lease, tt.status)
			}
			if got := len(f.outcomes) == 1; got != tt.published {
				t.Fatalf("published = %v, want %v", got, tt.published)
			}
		})
	}
}

// "Up to concurrency deliveries run at once. The dispatcher claims new
// executions as slots free up, without waiting for earlier deliveries."
func TestAFreedSlotClaimsAgainAtOnceAndClaimsNeverExceedTheFreeSlots(t *testing.T) {
	f := newFixture(t, dispatcher.Options{Concurrency: 2})
	for _, id := range []string{"a", "b", "c"} {
		f.admit(id, "")
	}
	first, second := f.next(), f.next()
	if n := f.d.ActiveDeliveries(); n != 2 {
		t.Fatalf("ActiveDeliveries = %d, want 2", n)
	}
	if rec := f.get("c"); rec.Lease != nil {
		t.Fatalf("c was claimed while both slots were busy: %+v", rec.Lease)
	}
	// No time passes: the freed slot alone makes the dispatcher claim c.
	first.finish(execstore.Completed(nil))
	third := f.next()
	if third.d.ExecutionID != "c" {
		t.Fatalf("third delivery = %q, want c", third.d.ExecutionID)
	}
	second.finish(execstore.Completed(nil))
	third.finish(execstore.Completed(nil))
	f.drain()
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	for _, limit := range f.faults.claims {
		if limit > 2 {
			t.Fatalf("a claim asked for %d executions with concurrency 2 (claims %v)", limit, f.faults.claims)
		}
	}
}

// An idle dispatcher learns from the store that something became due: the
// poll interval is an hour and the clock never reaches it.
func TestAnIdleDispatcherDeliversAnAdmissionWithoutPolling(t *testing.T) {
	f := newFixture(t, dispatcher.Options{PollInterval: time.Hour})
	for i, id := range []string{"a", "b", "c"} {
		f.admit(id, "")
		c := f.next()
		if c.d.ExecutionID != id {
			t.Fatalf("delivery %d = %q, want %q", i, c.d.ExecutionID, id)
		}
		c.finish(execstore.Completed(nil))
		f.drain()
	}
	if f.clock.Now() != t0 {
		t.Fatal("the clock moved")
	}
}

// A wake in the future is delivered when the clock reaches it, and not
// before: the dispatcher sets a timer for the store's next due time. The poll
// interval is a minute: every poll so far was set at 12:00, so moving the
// clock to a nanosecond before the wake fires one, and the claim it makes
// must find nothing; the next poll then falls after the wake, so only the
// next-due timer can deliver it on time.
func TestAFutureWakeIsDeliveredWhenTheClockReachesIt(t *testing.T) {
	f := newFixture(t, dispatcher.Options{PollInterval: time.Minute})
	f.admit("order-42", "")
	c := f.next()
	// The workflow sleeps: during its delivery it asks for a wake, then
	// suspends.
	if _, err := f.store.RequestWake(bg, "order-42", t0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	c.finish(execstore.Suspended())
	f.drain()
	f.clock.Advance(10*time.Minute - time.Nanosecond)
	if leases := f.faults.claimFrom(t, f.clock.Now()); len(leases) != 0 {
		t.Fatalf("a claim a nanosecond before the wake got %+v", leases)
	}
	if rec := f.get("order-42"); rec.Lease != nil || rec.Attempts != 1 {
		t.Fatalf("claimed before its wake: lease %+v after %d attempts", rec.Lease, rec.Attempts)
	}
	f.clock.Advance(time.Nanosecond)
	c = f.next()
	if c.d.Attempt != 2 {
		t.Fatalf("attempt = %d, want 2", c.d.Attempt)
	}
	c.finish(execstore.Completed(nil))
}

// The dispatcher learns when the next execution is due from the store's
// NextDue, not by building Stats on every idle loop; a store that does not
// offer NextDue is asked Stats, and the wake is delivered on time either way.
func TestTheDispatcherAsksNextDueAndFallsBackToStats(t *testing.T) {
	for _, hide := range []bool{false, true} {
		t.Run(fmt.Sprintf("without NextDue=%v", hide), func(t *testing.T) {
			var wrap func(dispatcher.Store) dispatcher.Store
			if hide {
				wrap = func(s dispatcher.Store) dispatcher.Store { return statsOnly{s} }
			}
			f := newFixtureWrapped(t, dispatcher.Options{PollInterval: time.Hour}, nil, wrap)
			f.admit("order-42", "")
			c := f.next()
			if _, err := f.store.RequestWake(bg, "order-42", t0.Add(10*time.Minute)); err != nil {
				t.Fatal(err)
			}
			c.finish(execstore.Suspended())
			f.drain()
			f.clock.Advance(10 * time.Minute) // a poll would come only after an hour
			c = f.next()
			c.finish(execstore.Completed(nil))
			asked, built := f.faults.count("NextDue"), f.faults.count("Stats")
			if hide && (asked != 0 || built == 0) || !hide && (asked == 0 || built != 0) {
				t.Fatalf("NextDue asked %d times, Stats %d times", asked, built)
			}
		})
	}
}

// "It renews each lease every renewInterval while the delivery runs."
func TestTheLeaseIsRenewedEveryRenewInterval(t *testing.T) {
	f := newFixture(t, dispatcher.Options{LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second})
	f.admit("e", "")
	c := f.next()
	for i := 1; i <= 3; i++ {
		f.clock.Advance(10 * time.Second)
		if err := f.renewal(); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
		want := t0.Add(time.Duration(i)*10*time.Second + 30*time.Second)
		if rec := f.get("e"); !rec.Lease.ExpiresAt.Equal(want) || rec.Lease.Token != 1 {
			t.Fatalf("after renewal %d lease = %+v, want token 1 expiring %v", i, rec.Lease, want)
		}
	}
	c.finish(execstore.Completed(nil))
	if rec := f.outcome(); rec.Status != execstore.StatusCompleted {
		t.Fatalf("status = %s", rec.Status)
	}
}

// A renewal error is logged and retried: the lease stays current until
// another claim supersedes it, even after it expired.
func TestARenewalErrorIsLoggedAndRetriedAtTheNextInterval(t *testing.T) {
	f := newFixture(t, dispatcher.Options{Concurrency: 1, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second})
	f.admit("e", "")
	c := f.next()
	f.faults.failNext("Renew", 4)
	for range 4 { // 40 s: past the lease's expiry, but nobody else claims
		f.clock.Advance(10 * time.Second)
		if err := f.renewal(); !errors.Is(err, errInjected) {
			t.Fatalf("renewal = %v, want the injected failure", err)
		}
	}
	f.clock.Advance(10 * time.Second)
	if err := f.renewal(); err != nil {
		t.Fatalf("renewal after the failures: %v", err)
	}
	if err := c.ctx.Err(); err != nil {
		t.Fatalf("the delivery was cancelled: %v", err)
	}
	c.finish(execstore.Completed(nil))
	if rec := f.outcome(); rec.Status != execstore.StatusCompleted {
		t.Fatalf("status = %s", rec.Status)
	}
	if !strings.Contains(f.logs.String(), "failed to renew the lease") {
		t.Fatalf("renewal failure not logged:\n%s", f.logs)
	}
}

// supersede lets id's current lease expire without renewals and claims id
// behind the dispatcher's back, as another worker would. The dispatcher must
// have no free slot, or it would claim id itself.
func (f *fixture) supersede(id string) execstore.Lease {
	f.t.Helper()
	f.faults.failNext("Renew", 1)
	f.clock.Advance(dispatcher.DefaultLeaseDuration) // one renewal, which fails
	if err := f.renewal(); !errors.Is(err, errInjected) {
		f.t.Fatalf("renewal = %v, want the injected failure", err)
	}
	leases, err := f.store.ClaimDue(bg, 10, time.Hour)
	if err != nil || len(leases) != 1 || leases[0].ExecutionID != id {
		f.t.Fatalf("ClaimDue = %+v, %v; want a lease on %q", leases, err, id)
	}
	return leases[0]
}

// "If a renewal returns lost, another claim has taken over: the dispatcher
// stops renewing, aborts the delivery's signal so it runs no more workflow
// code, and neither acknowledges nor releases."
func TestALostLeaseCancelsTheDeliveryWhichIsNeitherAcknowledgedNorReleased(t *testing.T) {
	f := newFixture(t, dispatcher.Options{Concurrency: 1, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second})
	f.admit("e", "")
	c := f.next()
	other := f.supersede("e")
	f.clock.Advance(10 * time.Second)
	if err := f.renewal(); !errors.Is(err, execstore.ErrLeaseLost) {
		t.Fatalf("renewal = %v, want ErrLeaseLost", err)
	}
	waitDone(t, c.ctx.Done(), "the delivery's cancellation")
	if cause := context.Cause(c.ctx); cause != execstore.ErrLeaseLost {
		t.Fatalf("cause = %v, want ErrLeaseLost", cause)
	}
	c.finish(execstore.Completed([]byte(`"stale"`)))
	f.drain()
	if n, m := f.faults.count("Acknowledge"), f.faults.count("Release"); n != 0 || m != 0 {
		t.Fatalf("acknowledged %d and released %d times, want neither", n, m)
	}
	rec := f.get("e")
	if rec.Status != execstore.StatusAdmitted || rec.Lease == nil || rec.Lease.Token != other.Token {
		t.Fatalf("record = %s lease %+v, want admitted under the other claim's token %d", rec.Status, rec.Lease, other.Token)
	}
	renewals := f.faults.count("Renew")
	f.clock.Advance(time.Minute)
	f.drain()
	if n := f.faults.count("Renew"); n != renewals {
		t.Fatalf("renewed %d more times after the loss", n-renewals)
	}
}

// "If the delivery has not settled abortGracePeriod after the abort, the
// dispatcher abandons it and frees its slot."
func TestADeliveryThatOverrunsTheAbortGracePeriodIsAbandoned(t *testing.T) {
	f := newFixture(t, dispatcher.Options{Concurrency: 1, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second, AbortGracePeriod: 5 * time.Second})
	f.admit("e", "")
	stuck := f.next() // ignores its context
	f.supersede("e")
	f.clock.Advance(10 * time.Second)
	if err := f.renewal(); !errors.Is(err, execstore.ErrLeaseLost) {
		t.Fatalf("renewal = %v, want ErrLeaseLost", err)
	}
	waitDone(t, stuck.ctx.Done(), "the delivery's cancellation")
	f.clock.Advance(5*time.Second - time.Nanosecond)
	if n := f.d.ActiveDeliveries(); n != 1 {
		t.Fatalf("ActiveDeliveries = %d before the grace period ended, want 1", n)
	}
	f.clock.Advance(time.Nanosecond)
	f.drain() // the slot is free although the invoker has not returned
	// The freed slot delivers other work.
	f.admit("next", "")
	c := f.next()
	if c.d.ExecutionID != "next" {
		t.Fatalf("delivery = %q, want next", c.d.ExecutionID)
	}
	c.finish(execstore.Completed(nil))
	f.outcome()
	stuck.finish(execstore.Completed([]byte(`"late"`)))
	f.drain()
	if rec := f.get("e"); rec.Status != execstore.StatusAdmitted {
		t.Fatalf("the late result was recorded: %s", rec.Status)
	}
	if !strings.Contains(f.logs.String(), "abandoning it") {
		t.Fatalf("abandonment not logged:\n%s", f.logs)
	}
}

// A delivery that stops within the grace period after its lease was lost is
// not abandoned, and still neither acknowledged nor released.
func TestADeliveryThatStopsWithinTheGracePeriodEndsWithoutAnOutcome(t *testing.T) {
	f := newFixture(t, dispatcher.Options{Concurrency: 1, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second})
	f.admit("e", "")
	c := f.next()
	f.supersede("e")
	f.clock.Advance(10 * time.Second)
	f.renewal()
	waitDone(t, c.ctx.Done(), "the delivery's cancellation")
	c.fail(context.Cause(c.ctx))
	f.drain()
	if n, m := f.faults.count("Acknowledge"), f.faults.count("Release"); n != 0 || m != 0 {
		t.Fatalf("acknowledged %d and released %d times, want neither", n, m)
	}
	if strings.Contains(f.logs.String(), "abandoning it") {
		t.Fatalf("a delivery that stopped in time was abandoned:\n%s", f.logs)
	}
}

// "A delivery that rejects is not acknowledged. If the worker exited before
// replying, the lease is left to expire; any other rejection is a retry
// reply, and the lease is released."
func TestAnErrorReleasesTheLeaseWithAnExponentialRetryDelay(t *testing.T) {
	f := newFixture(t, dispatcher.Options{RetryBaseDelay: time.Second, RetryMaxDelay: 3 * time.Second})
	f.admit("e", "")
	for attempt, delay := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
		c := f.next()
		if c.d.Attempt != attempt+1 {
			t.Fatalf("attempt = %d, want %d", c.d.Attempt, attempt+1)
		}
		c.fail(errors.New("payment gateway unavailable"))
		f.drain()
		rec := f.get("e")
		if want := f.clock.Now().Add(delay); rec.Lease != nil || !rec.DueAt.Equal(want) || rec.Status != execstore.StatusAdmitted {
			t.Fatalf("attempt %d: record %s due %v lease %+v; want released, due %v", attempt+1, rec.Status, rec.DueAt, rec.Lease, want)
		}
		f.clock.Advance(delay)
	}
	f.next().finish(execstore.Completed(nil))
	f.outcome()
}

func TestAWorkerThatExitedLeavesTheLeaseToExpire(t *testing.T) {
	tests := []struct {
		name   string
		invoke func(c *call)
	}{
		{"ErrWorkerExited", func(c *call) { c.fail(dispatcher.ErrWorkerExited) }},
		{"wrapped ErrWorkerExited", func(c *call) { c.fail(errors.Join(errors.New("pipe closed"), dispatcher.ErrWorkerExited)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, dispatcher.Options{})
			f.admit("e", "")
			tt.invoke(f.next())
			f.drain()
			leftToExpire(t, f, "e")
		})
	}
}

// leftToExpire checks that e's first lease is still on the record, unended,
// and that e is delivered again once it expires.
func leftToExpire(t *testing.T, f *fixture, id string) {
	t.Helper()
	if n := f.faults.count("Release"); n != 0 {
		t.Fatalf("released %d times", n)
	}
	rec := f.get(id)
	if rec.Lease == nil || rec.Lease.Token != 1 || rec.Status.Terminal() {
		t.Fatalf("record = %s lease %+v, want the first lease left in place", rec.Status, rec.Lease)
	}
	f.clock.Set(rec.Lease.ExpiresAt)
	c := f.next()
	if c.d.Lease.Token != 2 || c.d.Attempt != 2 {
		t.Fatalf("redelivery = %+v, want token 2, attempt 2", c.d)
	}
	c.finish(execstore.Completed(nil))
	f.outcome()
}

// "If reading the record, acknowledging or releasing throws, the lease is
// left to expire rather than released."
func TestAFailedReadAcknowledgementOrReleaseLeavesTheLeaseToExpire(t *testing.T) {
	tests := []struct {
		method string
		end    func(c *call)
	}{
		{"Get", nil},
		{"Acknowledge", func(c *call) { c.finish(execstore.Completed(nil)) }},
		{"Release", func(c *call) { c.fail(errors.New("retry me")) }},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			f := newFixture(t, dispatcher.Options{})
			f.faults.failNext(tt.method, 1)
			f.admit("e", "")
			if tt.end != nil {
				tt.end(f.next())
			}
			f.faults.waitCalls(t, tt.method, 1)
			f.drain()
			if n := f.faults.count(tt.method); n != 1 {
				t.Fatalf("%s called %d times, want 1", tt.method, n)
			}
			f.faults.resetCount("Release") // only releases after this point count
			leftToExpire(t, f, "e")
			if !strings.Contains(f.logs.String(), "the lease will expire") {
				t.Fatalf("failure not logged:\n%s", f.logs)
			}
		})
	}
}

// "A finished execution never runs again." Its outcome was published by the
// delivery that recorded it, so a claim that hands it out again publishes
// nothing more.
func TestAClaimedTerminalExecutionIsNeitherInvokedNorPublishedAgain(t *testing.T) {
	f := newFixture(t, dispatcher.Options{})
	f.admit("done", "")
	c := f.next()
	stale := c.d.Lease
	c.finish(execstore.Failed(errors.New("card declined")))
	published := f.outcome()
	if published.ExecutionID != "done" || published.Status != execstore.StatusFailed || published.Outcome.Error.Message != "card declined" {
		t.Fatalf("published %+v, want done's recorded failure", published)
	}
	// A claim that raced with the outcome hands the dispatcher the old lease
	// along with new work.
	f.faults.inject(stale)
	f.admit("other", "")
	other := f.next()
	if other.d.ExecutionID != "other" {
		t.Fatalf("invoked %q, want other", other.d.ExecutionID)
	}
	other.finish(execstore.Completed(nil))
	if got := f.outcome(); got.ExecutionID != "other" {
		t.Fatalf("published %q, want other only", got.ExecutionID)
	}
	f.drainWithoutDelivery() // done was never invoked
	f.noMoreOutcomes()
}

// A delivery whose lease was taken over without its knowing, and whose
// execution the new holder ended, acknowledges and gets the recorded outcome
// back, not applied: only the delivery that recorded an outcome publishes it,
// so every terminal outcome is published once.
func TestAnAcknowledgementThatFoundTheOutcomeRecordedIsNotPublished(t *testing.T) {
	f := newFixture(t, dispatcher.Options{Concurrency: 1, LeaseDuration: 30 * time.Second, RenewInterval: 10 * time.Second})
	f.admit("e", "")
	c := f.next()
	other := f.supersede("e")
	if _, err := f.store.Acknowledge(bg, other, execstore.Completed([]byte(`"theirs"`))); err != nil {
		t.Fatalf("the other holder's Acknowledge: %v", err)
	}
	c.finish(execstore.Completed([]byte(`"mine"`)))
	f.faults.waitCalls(t, "Acknowledge", 1)
	f.drain()
	f.noMoreOutcomes()
	if rec := f.get("e"); string(rec.Outcome.Result) != `"theirs"` {
		t.Fatalf("recorded %s, want the other holder's outcome", rec.Outcome.Result)
	}
}

// A panicking invoker and one whose goroutine exits are handled like an
// error and like a dead worker.
func TestAPanickingInvokerIsReleasedAndAnExitingOneLeftToExpire(t *testing.T) {
	tests := []struct {
		name     string
		body     func()
		released bool
	}{
		{"panic", func() { panic("boom") }, true},
		{"Goexit", runtime.Goexit, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := make(chan struct{}, 1)
			inv := dispatcher.InvokerFunc(func(context.Context, dispatcher.Delivery) (execstore.RunOutcome, error) {
				started <- struct{}{}
				tt.body()
				return execstore.Completed(nil), nil
			})
			f := newFixtureWith(t, dispatcher.Options{}, inv)
			f.admit("e", "")
			<-started // the delivery holds its slot until it has ended
			f.drain()
			rec := f.get("e")
			if released := rec.Lease == nil; released != tt.released || rec.Status != execstore.StatusAdmitted {
				t.Fatalf("record = %s lease %+v, want released = %v", rec.Status, rec.Lease, tt.released)
			}
		})
	}
}

// "Stops claiming and waits for in-flight deliveries to settle."
func TestStopWaitsForDeliveriesInFlightAndThenClaimsNothing(t *testing.T) {
	f := newFixture(t, dispatcher.Options{})
	f.admit("a", "")
	c := f.next()
	stopped := make(chan error, 1)
	go func() { stopped <- f.d.Stop(bg) }()
	// Stop has stopped the loop and waits in Drain, or it returns: a Stop
	// that does not wait for the delivery fails here.
	deadline := time.After(patience)
	for f.d.DrainWaiters() == 0 {
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned %v with a delivery in flight", err)
		case <-deadline:
			t.Fatal("Stop neither returned nor waited for the delivery")
		case <-time.After(time.Millisecond):
		}
	}
	c.finish(execstore.Completed(nil))
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("Stop did not return once the delivery settled")
	}
	if rec := f.get("a"); rec.Status != execstore.StatusCompleted {
		t.Fatalf("status = %s, want completed", rec.Status)
	}
	f.admit("b", "")
	f.clock.Advance(time.Hour)
	if rec := f.get("b"); rec.Lease != nil {
		t.Fatalf("a stopped dispatcher claimed b: %+v", rec.Lease)
	}
	// Started again, it delivers what became due meanwhile.
	f.d.Start()
	f.next().finish(execstore.Completed(nil))
	f.outcome()
	f.outcome()
}

func TestStopReturnsTheContextErrorWhileADeliveryHasNotSettled(t *testing.T) {
	f := newFixture(t, dispatcher.Options{})
	f.admit("a", "")
	c := f.next()
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := f.d.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop = %v, want context.Canceled", err)
	}
	if n := f.d.ActiveDeliveries(); n != 1 {
		t.Fatalf("ActiveDeliveries = %d, want 1", n)
	}
	c.finish(execstore.Completed(nil))
	f.outcome()
}

// A failed claim is logged once and retried at the poll interval.
func TestAFailedClaimIsRetriedAtThePollInterval(t *testing.T) {
	f := newFixture(t, dispatcher.Options{PollInterval: time.Minute})
	if err := f.d.Stop(bg); err != nil {
		t.Fatal(err)
	}
	f.faults.resetCount("ClaimDue")
	f.faults.failNext("ClaimDue", 2)
	f.admit("a", "")
	f.d.Start()
	f.faults.waitCalls(t, "ClaimDue", 1)
	f.clock.Advance(time.Minute)
	f.faults.waitCalls(t, "ClaimDue", 2)
	f.clock.Advance(time.Minute)
	c := f.next()
	c.finish(execstore.Completed(nil))
	f.outcome()
	if n := strings.Count(f.logs.String(), "failed to claim"); n != 1 {
		t.Fatalf("claim failures logged %d times, want once:\n%s", n, f.logs)
	}
}
