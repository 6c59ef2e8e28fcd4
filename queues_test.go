package execstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/execstore/execstore"
)

func (f *fixture) claimIn(limit int, queues ...string) []execstore.Lease {
	f.t.Helper()
	leases, err := f.s.Claim(ctx, execstore.ClaimRequest{Limit: limit, LeaseDuration: time.Minute, Queues: queues})
	if err != nil {
		f.t.Fatalf("Claim(%q): %v", queues, err)
	}
	return leases
}

// A claim that names queues leases only their executions, in due-time then
// ID order; an execution's queue is by default its workflow ID, and naming
// the workflow's own name is the default. A queue nothing was admitted to
// is not an error. The queues survive a restart (snapshot and log).
func TestAClaimLeasesOnlyTheQueuesItNames(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "charge-1", WorkflowID: "charge-order"})
	f.clock.Advance(time.Millisecond)
	f.admit(execstore.AdmitRequest{ExecutionID: "email-1", WorkflowID: "send-email"})
	f.clock.Advance(time.Millisecond)
	f.admit(execstore.AdmitRequest{ExecutionID: "email-2", WorkflowID: "send-email", Queue: "send-email"})
	f.clock.Advance(time.Millisecond)
	f.admit(execstore.AdmitRequest{ExecutionID: "bulk-1", WorkflowID: "send-email", Queue: "bulk"})
	for id, want := range map[string]string{"charge-1": "", "email-1": "", "email-2": "", "bulk-1": "bulk"} {
		if got := f.get(id).Queue; got != want {
			t.Fatalf("%s: Record.Queue = %q, want %q", id, got, want)
		}
	}
	if got := f.claimIn(10, "no-such-queue"); len(got) != 0 {
		t.Fatalf("a claim of a queue nothing was admitted to leased %v", ids(got))
	}
	f.reopen()
	if diff := cmp.Diff([]string{"email-1", "email-2"}, ids(f.claimIn(10, "send-email"))); diff != "" {
		t.Fatalf("claim of send-email (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"charge-1", "bulk-1"}, ids(f.claimIn(10, "bulk", "charge-order", "bulk"))); diff != "" {
		t.Fatalf("claim of bulk and charge-order (-want +got):\n%s", diff)
	}
	if got := f.get("bulk-1").Queue; got != "bulk" {
		t.Fatalf("after a restart, Record.Queue = %q, want bulk", got)
	}
}

// NextDueIn answers for the named queues alone: work due in another queue
// does not make a dispatcher of these claim in a loop.
func TestNextDueInAnswersForTheNamedQueues(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w1"})
	l := f.claimIn(1, "w1")[0]
	if err := f.s.Release(ctx, l, time.Hour); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	f.admit(execstore.AdmitRequest{ExecutionID: "b", WorkflowID: "w2"})
	for _, tc := range []struct {
		queues []string
		want   time.Time
	}{
		{[]string{"w1"}, t0.Add(time.Hour)},
		{[]string{"w2"}, t0.Add(time.Second)},
		{[]string{"w3"}, time.Time{}},
		{nil, t0.Add(time.Second)},
	} {
		got, err := f.s.NextDueIn(ctx, tc.queues)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("NextDueIn(%q) = %v, %v; want %v", tc.queues, got, err, tc.want)
		}
	}
}

// A child is in its own workflow's queue unless StartWith names one, so
// the parent's workers do not run it unless they serve that queue.
func TestAChildIsInItsOwnWorkflowsQueueUnlessItsStartNamesOne(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "p", WorkflowID: "parent", Queue: "orders"})
	l := f.claimIn(1, "orders")[0]
	c1, err := f.s.Start(ctx, l, "a", "child", nil)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := f.s.StartWith(ctx, l, execstore.StartRequest{StepKey: "b", WorkflowID: "child", Queue: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := f.s.StartWith(ctx, l, execstore.StartRequest{StepKey: "b", WorkflowID: "child", Queue: "elsewhere"}); err != nil || again != c2 {
		t.Fatalf("a repeated start = %q, %v; want %q", again, err, c2)
	}
	if diff := cmp.Diff([]string{c2}, ids(f.claimIn(10, "orders"))); diff != "" {
		t.Fatalf("claim of orders (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{c1}, ids(f.claimIn(10, "child"))); diff != "" {
		t.Fatalf("claim of child (-want +got):\n%s", diff)
	}
}

// Bad queue names are refused with a typed error and change nothing.
func TestBadQueueNamesAreRefused(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("q", execstore.IDBytes+1)
	for _, q := range []string{long, "bad\x00queue", "\xff"} {
		_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w", Queue: q})
		if !errors.Is(err, execstore.ErrInvalidExecutionEvent) {
			t.Errorf("Admit with queue %.20q: %v, want ErrInvalidExecutionEvent", q, err)
		}
		if _, err := f.s.Claim(ctx, execstore.ClaimRequest{Limit: 1, LeaseDuration: time.Minute, Queues: []string{q}}); !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("Claim of queue %.20q: %v, want ErrInvalidArgument", q, err)
		}
	}
	if _, err := f.s.Claim(ctx, execstore.ClaimRequest{Limit: 1, LeaseDuration: time.Minute, Queues: []string{""}}); !errors.Is(err, execstore.ErrInvalidArgument) {
		t.Errorf("Claim of an empty queue name: %v, want ErrInvalidArgument", err)
	}
	many := make([]string, execstore.MaxClaimQueues+1)
	for i := range many {
		many[i] = strings.Repeat("q", i+1)
	}
	if _, err := f.s.Claim(ctx, execstore.ClaimRequest{Limit: 1, LeaseDuration: time.Minute, Queues: many}); !errors.Is(err, execstore.ErrInvalidArgument) {
		t.Errorf("Claim of %d queues: %v, want ErrInvalidArgument", len(many), err)
	}
	if st, err := f.s.Stats(ctx); err != nil || st.Executions != 0 {
		t.Fatalf("after refusals: %d executions, %v", st.Executions, err)
	}
}

// AcknowledgeAndClaimWith claims from the queues it names.
func TestAcknowledgeAndClaimWithServesItsQueues(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w1"})
	f.admit(execstore.AdmitRequest{ExecutionID: "b", WorkflowID: "w2"})
	f.admit(execstore.AdmitRequest{ExecutionID: "c", WorkflowID: "w1"})
	l := f.claimIn(1, "w1")[0]
	res, leases, err := f.s.AcknowledgeAndClaimWith(ctx, []execstore.Ack{{Lease: l, Outcome: execstore.Completed(json.RawMessage(`1`))}},
		execstore.ClaimRequest{Limit: 5, LeaseDuration: time.Minute, Queues: []string{"w1"}})
	if err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	if diff := cmp.Diff([]string{"c"}, ids(leases)); diff != "" {
		t.Fatalf("claimed (-want +got):\n%s", diff)
	}
}

// A schedule names its occurrences' queue; left out, they are in the
// workflow's own. The queue is part of the definition: a put that changes
// only the queue is a change, an identical one writes nothing.
func TestAScheduleAdmitsItsOccurrencesToItsQueue(t *testing.T) {
	f := newFixture(t)
	f.untimed()
	f.reopen()
	sc := execstore.Schedule{ID: "nightly", WorkflowID: "settle", Interval: time.Hour, Start: t0.Add(time.Hour), Queue: "batch"}
	got, err := f.s.PutSchedule(ctx, sc)
	if err != nil || got.Queue != "batch" {
		t.Fatalf("PutSchedule = %+v, %v", got, err)
	}
	f.clock.Advance(time.Hour)
	f.admit(execstore.AdmitRequest{ExecutionID: "other", WorkflowID: "settle"}) // a write: the occurrence is reached before it
	occ := execstore.ScheduleOccurrenceID("nightly", t0.Add(time.Hour))
	if rec := f.get(occ); rec.Queue != "batch" {
		t.Fatalf("the occurrence's Record.Queue = %q, want batch", rec.Queue)
	}
	if diff := cmp.Diff([]string{occ}, ids(f.claimIn(10, "batch"))); diff != "" {
		t.Fatalf("claim of batch (-want +got):\n%s", diff)
	}
	f.reopen()
	if back, err := f.s.GetSchedule(ctx, "nightly"); err != nil || back.Queue != "batch" {
		t.Fatalf("after a restart, GetSchedule = %+v, %v", back, err)
	}
	sc.Queue = "settle" // the workflow's own, by name: the default
	if got, err := f.s.PutSchedule(ctx, sc); err != nil || got.Queue != "" {
		t.Fatalf("PutSchedule in the workflow's own queue = %+v, %v", got, err)
	}
	sc.Queue = "bad\x00"
	if _, err := f.s.PutSchedule(ctx, sc); !errors.Is(err, execstore.ErrInvalidArgument) {
		t.Fatalf("PutSchedule with a bad queue: %v", err)
	}
}

// A queue's concurrency limit holds across claims and restarts: at most n of
// its executions hold a lease at once; an acknowledgement that frees a place
// signals DueChanged and NextDue says the work is due again; a pause gives
// nothing until the queue is resumed. Queue and ListQueues report the
// settings and the counts.
func TestAQueuesConcurrencyLimitAndPauseHoldAcrossClaimsAndRestarts(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("c-%d", i), WorkflowID: "charge"})
	}
	f.admit(execstore.AdmitRequest{ExecutionID: "m-1", WorkflowID: "mail"})
	got, err := f.s.PutQueue(ctx, execstore.QueueSettings{Name: "charge", Concurrency: 2})
	if err != nil || got.Concurrency != 2 {
		t.Fatalf("PutQueue = %+v, %v", got, err)
	}
	f.reopen()
	first := f.claimIn(10, "charge")
	if diff := cmp.Diff([]string{"c-0", "c-1"}, ids(first)); diff != "" {
		t.Fatalf("first claim at a limit of 2 (-want +got):\n%s", diff)
	}
	if got := f.claim(10, time.Minute); len(got) != 1 || got[0].ExecutionID != "m-1" {
		t.Fatalf("a claim of every queue leased %v, want m-1 alone", ids(got))
	}
	if next, _ := f.s.NextDue(ctx); !next.Equal(first[0].ExpiresAt) {
		t.Fatalf("NextDue = %v, want the leases' expiry %v: the limited queue's due work cannot be claimed", next, first[0].ExpiresAt)
	}
	info, err := f.s.Queue(ctx, "charge")
	if err != nil || info.Concurrency != 2 || info.Live != 5 || info.Leased != 2 || info.Due != 3 {
		t.Fatalf("Queue(charge) = %+v, %v", info, err)
	}
	due := f.s.DueChanged()
	if _, err := f.s.Acknowledge(ctx, first[0], execstore.Completed(nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-due:
	default:
		t.Fatal("an acknowledgement that freed a place in a limited queue did not signal DueChanged")
	}
	if next, _ := f.s.NextDue(ctx); next.After(f.clock.Now()) {
		t.Fatalf("NextDue = %v after a place was freed, want now", next)
	}
	if diff := cmp.Diff([]string{"c-2"}, ids(f.claimIn(10, "charge"))); diff != "" {
		t.Fatalf("claim after one ended (-want +got):\n%s", diff)
	}
	if _, err := f.s.PutQueue(ctx, execstore.QueueSettings{Name: "charge", Concurrency: 10, Paused: true}); err != nil {
		t.Fatal(err)
	}
	if got := f.claimIn(10, "charge"); len(got) != 0 {
		t.Fatalf("a claim of a paused queue leased %v", ids(got))
	}
	list, err := f.s.ListQueues(ctx, "")
	if err != nil || len(list) != 2 || list[0].Name != "charge" || !list[0].Paused || list[1].Name != "mail" || list[1].Leased != 1 {
		t.Fatalf("ListQueues = %+v, %v", list, err)
	}
	due = f.s.DueChanged()
	if _, err := f.s.PutQueue(ctx, execstore.QueueSettings{Name: "charge"}); err != nil { // no limit, not paused: the defaults
		t.Fatal(err)
	}
	select {
	case <-due:
	default:
		t.Fatal("resuming a queue did not signal DueChanged")
	}
	if diff := cmp.Diff([]string{"c-3", "c-4"}, ids(f.claimIn(10, "charge"))); diff != "" {
		t.Fatalf("claim after the queue was resumed (-want +got):\n%s", diff)
	}
	if list, _ := f.s.ListQueues(ctx, ""); len(list) != 2 || list[0].Concurrency != 0 || list[0].Paused {
		t.Fatalf("after the defaults were put, ListQueues = %+v", list)
	}
}

// A queue's rate limit holds in every window across claims and a restart:
// claims grant at most n leases in any period, the queue's NextDue is the
// time its window has room again, and Queue reports what was granted within
// the window; another rate starts the count afresh.
func TestAQueuesRateLimitHoldsInEveryWindowAcrossARestart(t *testing.T) {
	f := newFixture(t)
	for i := range 6 {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("a-%d", i), WorkflowID: "api"})
	}
	if _, err := f.s.PutQueue(ctx, execstore.QueueSettings{Name: "api", Rate: 2, RatePeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	start := f.clock.Now()
	if diff := cmp.Diff([]string{"a-0", "a-1"}, ids(f.claimIn(10, "api"))); diff != "" {
		t.Fatalf("first claim at a rate of 2 a second (-want +got):\n%s", diff)
	}
	f.reopen()
	f.clock.Advance(999 * time.Millisecond)
	if got := f.claimIn(10, "api"); len(got) != 0 {
		t.Fatalf("a claim 999 ms later, after a restart, leased %v", ids(got))
	}
	if next, _ := f.s.NextDue(ctx); !next.Equal(start.Add(time.Second)) {
		t.Fatalf("NextDue = %v, want a second after the first grants, %v", next, start.Add(time.Second))
	}
	if info, err := f.s.Queue(ctx, "api"); err != nil || info.Granted != 2 || info.Due != 4 || info.RatePeriod != time.Second {
		t.Fatalf("Queue(api) = %+v, %v", info, err)
	}
	f.clock.Advance(time.Millisecond)
	if diff := cmp.Diff([]string{"a-2", "a-3"}, ids(f.claimIn(10, "api"))); diff != "" {
		t.Fatalf("claim a second after the first (-want +got):\n%s", diff)
	}
	if _, err := f.s.PutQueue(ctx, execstore.QueueSettings{Name: "api", Rate: 3, RatePeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a-4", "a-5"}, ids(f.claimIn(10, "api"))); diff != "" {
		t.Fatalf("claim after another rate was put (-want +got):\n%s", diff)
	}
}

// Under saturation (every claim made the moment NextDue allows one) a rate
// limit grants its full rate: exactly n in each period, 100 % of it, and
// never more in any window.
func TestARateLimitedQueueUnderSaturationGrantsItsFullRate(t *testing.T) {
	const rate, periods = 50, 40
	f := newFixture(t)
	for i := range 3 * rate * periods {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("s-%05d", i), WorkflowID: "sms"})
	}
	if _, err := f.s.PutQueue(ctx, execstore.QueueSettings{Name: "sms", Rate: rate, RatePeriod: time.Second}); err != nil {
		t.Fatal(err)
	}
	start := f.clock.Now()
	var grants []time.Time
	for {
		now := f.clock.Now()
		if !now.Before(start.Add(periods * time.Second)) {
			break
		}
		// A claimer's rounds: up to 7 at a time, until the window is full.
		for {
			got := f.claimIn(7, "sms")
			for range got {
				grants = append(grants, now)
			}
			if len(got) == 0 {
				break
			}
		}
		next, err := f.s.NextDue(ctx)
		if err != nil || !next.After(now) {
			t.Fatalf("NextDue = %v, %v at %v after a claim took all it could", next, err, now)
		}
		f.clock.Set(next)
	}
	if len(grants) != rate*periods {
		t.Fatalf("%d leases granted in %d periods at a rate of %d: %.1f %% of the rate", len(grants), periods, rate, 100*float64(len(grants))/float64(rate*periods))
	}
	for i, at := range grants {
		n := 0
		for _, b := range grants[i:] {
			if b.Before(at.Add(time.Second)) {
				n++
			}
		}
		if n > rate {
			t.Fatalf("%d leases granted within a second from %v", n, at)
		}
	}
}

// Bad settings are refused with a typed error and write nothing; deleting
// settings a queue does not have is no error; the settings are bounded.
func TestBadQueueSettingsAreRefused(t *testing.T) {
	f := newFixture(t)
	for _, st := range []execstore.QueueSettings{
		{Name: "", Paused: true},
		{Name: "q\x00", Paused: true},
		{Name: "q", Concurrency: -1},
		{Name: "q", Concurrency: execstore.MaxQueueConcurrency + 1},
		{Name: "q", Rate: -1, RatePeriod: time.Second},
		{Name: "q", Rate: execstore.MaxQueueRate + 1, RatePeriod: time.Second},
		{Name: "q", Rate: 1},
		{Name: "q", Rate: 1, RatePeriod: execstore.MinRatePeriod - 1},
		{Name: "q", Rate: 1, RatePeriod: execstore.MaxRatePeriod + 1},
		{Name: "q", Rate: 1, RatePeriod: 1500 * time.Microsecond},
		{Name: "q", Concurrency: 1, RatePeriod: time.Second},
	} {
		if _, err := f.s.PutQueue(ctx, st); !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("PutQueue(%+v): %v, want ErrInvalidArgument", st, err)
		}
	}
	if err := f.s.DeleteQueue(ctx, "never-set"); err != nil {
		t.Fatalf("DeleteQueue of a queue without settings: %v", err)
	}
	if list, err := f.s.ListQueues(ctx, ""); err != nil || len(list) != 0 {
		t.Fatalf("after refusals, ListQueues = %+v, %v", list, err)
	}
}

// A keyed claim repeated with other queues answers the first claim's
// leases: the key names the claim, not the queues.
func TestAKeyedClaimRepeatedWithOtherQueuesAnswersItsLeases(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "a-1", WorkflowID: "a"})
	f.admit(execstore.AdmitRequest{ExecutionID: "b-1", WorkflowID: "b"})
	req := execstore.ClaimRequest{Limit: 5, LeaseDuration: time.Minute, Queues: []string{"a"}, RequestKey: "round-1"}
	first, err := f.s.Claim(ctx, req)
	if err != nil || len(first) != 1 || first[0].ExecutionID != "a-1" {
		t.Fatalf("first claim = %v, %v", ids(first), err)
	}
	req.Queues = []string{"b"}
	again, err := f.s.Claim(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Fatalf("the repeat naming another queue (-first +repeat):\n%s", diff)
	}
	if info, _ := f.s.Queue(ctx, "b"); info.Leased != 0 {
		t.Fatalf("the repeat leased %d of queue b", info.Leased)
	}
}
