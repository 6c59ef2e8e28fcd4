package execstore_test

// The lease rules of @yieldstar/core 0.6.0 (ExecutionDispatcher, execution
// state) and of API.md's "Lease rules shared by every method that takes a
// Lease".

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/google/go-cmp/cmp"
)

// leaseOps runs every lease-taking write with l and returns each one's error.
func leaseOps(f *fixture, l execstore.Lease) map[string]error {
	_, renewErr := f.s.Renew(ctx, l, time.Minute)
	_, ackErr := f.s.Acknowledge(ctx, l, execstore.Suspended())
	_, startErr := f.s.Start(ctx, l, "child", "w", nil)
	return map[string]error{
		"Renew":       renewErr,
		"SaveStep":    f.s.SaveStep(ctx, l, "step", raw(`1`)),
		"Start":       startErr,
		"Release":     f.s.Release(ctx, l, 0),
		"Acknowledge": ackErr,
	}
}

func TestFirstTokenIsOneAndTokensOnlyGrowAcrossRestarts(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	var last uint64
	for i := 0; i < 6; i++ {
		l := f.claimOne("e")
		if i == 0 && l.Token != 1 {
			t.Fatalf("first token = %d, want 1", l.Token)
		}
		if l.Token <= last {
			t.Fatalf("token %d not above %d", l.Token, last)
		}
		last = l.Token
		if i%2 == 0 {
			f.reopen()
		}
		f.clock.Advance(time.Minute) // expire it
	}
}

// "a lease stays current until a later claim issues a higher token, even after ExpiresAt"
func TestExpiredLeaseStaysCurrentUntilSuperseded(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne("e")
	f.clock.Advance(time.Hour) // long expired, nobody claimed
	renewed, err := f.s.Renew(ctx, l, time.Minute)
	if err != nil {
		t.Fatalf("Renew after expiry: %v", err)
	}
	if want := f.clock.Now().Add(time.Minute); renewed.Token != l.Token || !renewed.ExpiresAt.Equal(want) {
		t.Fatalf("renewed = %+v, want token %d expiring %v", renewed, l.Token, want)
	}
	if err := f.s.SaveStep(ctx, l, "s", raw(`"v"`)); err != nil {
		t.Fatalf("SaveStep with the expired-but-current lease: %v", err)
	}
	if leases := f.claim(10, time.Minute); len(leases) != 0 {
		t.Fatalf("renewed lease was claimed: %+v", leases)
	}
}

// "after ExpiresAt the execution is due again (redelivery), and the next claim supersedes it"
func TestSupersededLeaseIsLostEverywhere(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	stale := f.claimOne("e")
	f.clock.Advance(time.Minute)
	fresh := f.claimOne("e")
	if fresh.Token != stale.Token+1 {
		t.Fatalf("fresh token %d, want %d", fresh.Token, stale.Token+1)
	}
	before := f.stats().WALLastIndex
	for op, err := range leaseOps(f, stale) {
		if !errors.Is(err, execstore.ErrLeaseLost) || execstore.ErrorCode(err) != "LEASE_LOST" {
			t.Errorf("%s with a superseded lease: err = %v, want ErrLeaseLost", op, err)
		}
	}
	if after := f.stats().WALLastIndex; after != before {
		t.Errorf("refused lease operations wrote %d log entries", after-before)
	}
	if _, ok, _ := f.s.Step(ctx, "e", "step"); ok {
		t.Errorf("a stale lease saved a step")
	}
	if _, err := f.s.Renew(ctx, fresh, time.Minute); err != nil {
		t.Errorf("the fresh lease is not current: %v", err)
	}
}

// "or until its own Acknowledge or Release ends it (afterwards it is no longer current)"
func TestAcknowledgeAndReleaseEndTheLease(t *testing.T) {
	for _, end := range []string{"acknowledge", "release"} {
		t.Run(end, func(t *testing.T) {
			f := newFixture(t)
			f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
			l := f.claimOne("e")
			if end == "acknowledge" {
				f.ack(l, execstore.Suspended())
			} else if err := f.s.Release(ctx, l, 0); err != nil {
				t.Fatal(err)
			}
			if rec := f.get("e"); rec.Lease != nil {
				t.Fatalf("lease still on the record: %+v", rec.Lease)
			}
			if _, err := f.s.Renew(ctx, l, time.Minute); !errors.Is(err, execstore.ErrLeaseLost) {
				t.Fatalf("Renew after %s: err = %v, want ErrLeaseLost", end, err)
			}
		})
	}
}

// "before ExpiresAt no claim returns that execution", and a renewal moves ExpiresAt.
func TestRenewedLeaseDefersRedelivery(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne("e")
	f.clock.Advance(50 * time.Second)
	if _, err := f.s.Renew(ctx, l, time.Minute); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(59 * time.Second) // 109s: past the first expiry, before the renewed one
	if leases := f.claim(10, time.Minute); len(leases) != 0 {
		t.Fatalf("claimed before the renewed expiry: %+v", leases)
	}
	f.clock.Advance(time.Second)
	f.claimOne("e")
}

func TestReleaseIsDueAtTheLaterOfItsWakeAndTheRetryDelay(t *testing.T) {
	cases := []struct {
		name  string
		wake  time.Duration // a wake requested during the delivery, relative to t0
		retry time.Duration
		want  time.Duration
	}{
		{"retry delay after the covered wake", 0, 10 * time.Second, 10 * time.Second},
		{"no delay: due at once", 0, 0, 0},
		{"a later wake keeps the earliest pending", 30 * time.Second, 10 * time.Second, 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
			l := f.claimOne("e")
			f.wake("e", t0.Add(tc.wake))
			if err := f.s.Release(ctx, l, tc.retry); err != nil {
				t.Fatal(err)
			}
			if rec := f.get("e"); !rec.DueAt.Equal(t0.Add(tc.want)) {
				t.Fatalf("DueAt = %v, want %v", rec.DueAt, t0.Add(tc.want))
			}
		})
	}
}

func TestClaimDueOrdersByDueTimeThenIDAndHonoursTheLimit(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"c", "a", "b", "d"} {
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
	}
	// All four are due at t0: ties go by ID.
	l := f.claim(1, time.Minute)
	if diff := cmp.Diff([]string{"a"}, ids(l)); diff != "" {
		t.Fatalf("limit 1 (-want +got):\n%s", diff)
	}
	f.ack(l[0], execstore.Suspended())
	f.wake("a", t0.Add(-time.Hour)) // earlier than everything: a first again
	got := ids(f.claim(10, time.Minute))
	if diff := cmp.Diff([]string{"a", "b", "c", "d"}, got); diff != "" {
		t.Fatalf("claim order (-want +got):\n%s", diff)
	}
}

func TestClaimRefusesBadArguments(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		limit int
		d     time.Duration
	}{{0, time.Minute}, {-1, time.Minute}, {10_001, time.Minute}, {1, 0}, {1, -time.Second}, {1, 25 * time.Hour}} {
		if _, err := f.s.ClaimDue(ctx, tc.limit, tc.d); !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("ClaimDue(%d, %v): err = %v, want ErrInvalidArgument", tc.limit, tc.d, err)
		}
	}
}

func TestLeaseOnAnUnknownExecutionIsNotFoundAndLost(t *testing.T) {
	f := newFixture(t)
	for _, l := range []execstore.Lease{{ExecutionID: "ghost", Token: 1}, {}} {
		for op, err := range leaseOps(f, l) {
			if !errors.Is(err, execstore.ErrLeaseLost) || !errors.Is(err, execstore.ErrExecutionNotFound) {
				t.Errorf("%s(%+v): err = %v, want lease lost and not found", op, l, err)
			}
		}
	}
}

func TestForgedFutureTokenIsNotCurrent(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne("e")
	l.Token++
	for op, err := range leaseOps(f, l) {
		if !errors.Is(err, execstore.ErrLeaseLost) {
			t.Errorf("%s with a forged token: err = %v, want ErrLeaseLost", op, err)
		}
	}
}

func TestAcknowledgeRefusesBadOutcomes(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne("e")
	for _, o := range []execstore.RunOutcome{{}, {Status: execstore.StatusAdmitted}, {Status: "done"}, execstore.Failed(nil)} {
		if _, err := f.s.Acknowledge(ctx, l, o); !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("Acknowledge(%+v): err = %v, want ErrInvalidArgument", o, err)
		}
	}
	if rec := f.get("e"); rec.Lease == nil || rec.Status != execstore.StatusAdmitted {
		t.Fatalf("a refused acknowledgement changed the record: %+v", rec)
	}
}

// "acknowledging a non-durable result records a failed outcome with INVALID_STEP_VALUE"
// A result over Limits.ValueBytes cannot be stored either.
func TestCompletedResultThatIsNotJSONIsRecordedAsFailed(t *testing.T) {
	tooLarge := `"` + strings.Repeat("x", execstore.DefaultLimits.ValueBytes-1) + `"`
	for _, result := range []string{`{"a":`, `{"a":1,"a":2}`, "\"\xff\"", `undefined`, tooLarge} {
		f := newFixture(t)
		f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
		rec := f.ack(f.claimOne("e"), execstore.Completed(raw(result)))
		if rec.Status != execstore.StatusFailed || rec.Outcome.Error == nil ||
			rec.Outcome.Error.Code != execstore.CodeInvalidStepValue || rec.Outcome.Error.Name != "WorkflowValueError" {
			t.Fatalf("result %q recorded as %+v / %+v", result, rec, rec.Outcome)
		}
		if diff := cmp.Diff(rec, f.get("e")); diff != "" {
			t.Fatalf("Get differs from the acknowledgement:\n%s", diff)
		}
	}
}

func TestCompletedWithoutAResultKeepsNil(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	rec := f.ack(f.claimOne("e"), execstore.Completed(nil))
	if rec.Status != execstore.StatusCompleted || rec.Outcome.Result != nil {
		t.Fatalf("outcome = %+v", rec.Outcome)
	}
}

func TestFailedOutcomeTruncatesHugeMessagesAndDeepChains(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	var err error = errors.New(string(make([]byte, 100_000)))
	for i := 0; i < 40; i++ {
		err = &paymentError{cause: err}
	}
	rec := f.ack(f.claimOne("e"), execstore.Failed(err))
	depth := 0
	for e := rec.Outcome.Error; e != nil; e = e.Cause {
		depth++
		if len(e.Message) > execstore.DefaultLimits.ErrorMessageBytes {
			t.Fatalf("message of %d bytes kept", len(e.Message))
		}
	}
	if depth != execstore.DefaultLimits.ErrorCauseDepth+1 {
		t.Fatalf("recorded chain depth %d, want %d", depth, execstore.DefaultLimits.ErrorCauseDepth+1)
	}
}

func TestAcknowledgeBatchGivesEachAcknowledgementItsOwnResult(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"a", "b", "c"} {
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
	}
	leases := f.claim(10, time.Minute)
	stale := leases[2]
	stale.Token++ // never issued: not current
	results, err := f.s.AcknowledgeBatch(ctx, []execstore.Ack{
		{Lease: leases[0], Outcome: execstore.Completed(raw(`1`))},
		{Lease: leases[1], Outcome: execstore.RunOutcome{Status: "bogus"}},
		{Lease: stale, Outcome: execstore.Suspended()},
		{Lease: execstore.Lease{ExecutionID: "ghost", Token: 1}, Outcome: execstore.Suspended()},
		{Lease: leases[1], Outcome: execstore.Suspended()},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, execstore.ErrInvalidArgument, execstore.ErrLeaseLost, execstore.ErrExecutionNotFound, nil}
	for i, r := range results {
		if (want[i] == nil) != (r.Err == nil) || (want[i] != nil && !errors.Is(r.Err, want[i])) {
			t.Errorf("result %d: err = %v, want %v", i, r.Err, want[i])
		}
	}
	if results[0].Record.Status != execstore.StatusCompleted || results[4].Record.Status != execstore.StatusSuspended {
		t.Fatalf("records: %+v / %+v", results[0].Record, results[4].Record)
	}
	if rec := f.get("c"); rec.Lease == nil {
		t.Fatalf("a refused acknowledgement ended c's lease")
	}
}

// The records an AcknowledgeBatch returns are copies, each its own: changing
// one's outcome changes neither another's nor the store's.
func TestAcknowledgeBatchRecordsAreEachTheCallersOwn(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"a", "b"} {
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
	}
	leases := f.claim(10, time.Minute)
	results, err := f.s.AcknowledgeBatch(ctx, []execstore.Ack{
		{Lease: leases[0], Outcome: execstore.Completed(raw(`1`))},
		{Lease: leases[1], Outcome: execstore.Completed(raw(`2`))},
	})
	if err != nil {
		t.Fatal(err)
	}
	results[0].Record.Outcome.Status = execstore.StatusFailed
	results[0].Record.Outcome.Result[0] = '9'
	if o := results[1].Record.Outcome; o.Status != execstore.StatusCompleted || string(o.Result) != `2` {
		t.Fatalf("changing one answer's outcome changed another's: %+v", o)
	}
	for i, id := range []string{"a", "b"} {
		if o := f.get(id).Outcome; o.Status != execstore.StatusCompleted || string(o.Result) != fmt.Sprint(i+1) {
			t.Fatalf("changing an answer's outcome changed the store's record of %s: %+v", id, o)
		}
	}
}

func TestAcknowledgeBatchWithAnEndedContextChangesNothing(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w"})
	leases := f.claim(1, time.Minute)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	results, err := f.s.AcknowledgeBatch(cancelled, []execstore.Ack{{Lease: leases[0], Outcome: execstore.Completed(nil)}})
	if !errors.Is(err, context.Canceled) || results != nil {
		t.Fatalf("AcknowledgeBatch(cancelled) = %v, %v; want nil, context.Canceled", results, err)
	}
	if rec := f.get("a"); rec.Status != execstore.StatusAdmitted || rec.Lease == nil {
		t.Fatalf("record after a cancelled batch: status %s, lease %v", rec.Status, rec.Lease)
	}
}

func TestAcknowledgeBatchRefusesMoreThanTheClaimLimit(t *testing.T) {
	f := newFixture(t)
	acks := make([]execstore.Ack, execstore.DefaultLimits.ClaimLimit+1)
	for i := range acks {
		acks[i] = execstore.Ack{Lease: execstore.Lease{ExecutionID: "e", Token: 1}, Outcome: execstore.Suspended()}
	}
	if _, err := f.s.AcknowledgeBatch(ctx, acks); !errors.Is(err, execstore.ErrInvalidArgument) {
		t.Fatalf("AcknowledgeBatch(%d) err = %v, want ErrInvalidArgument", len(acks), err)
	}
}

// A batch larger than one command may hold (by count, or by the size of its
// results) is logged as several commands in one WAL batch; every
// acknowledgement still gets its own result and survives a restart.
func TestAcknowledgeBatchLargerThanOneCommand(t *testing.T) {
	f := newFixture(t)
	const n = 4100 // more than fsm.MaxAcksPerCommand
	for i := 0; i < n+3; i++ {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("e%05d", i), WorkflowID: "w"})
	}
	leases := f.claim(n+3, time.Hour)
	big := raw(`"` + strings.Repeat("x", 700<<10) + `"`) // two do not fit one command
	acks := make([]execstore.Ack, len(leases))
	for i, l := range leases {
		out := execstore.Completed(raw(`1`))
		if i >= n {
			out = execstore.Completed(big)
		}
		acks[i] = execstore.Ack{Lease: l, Outcome: out}
	}
	acks[7].Lease.Token++ // one stale lease fails alone
	before := f.stats()
	results, err := f.s.AcknowledgeBatch(ctx, acks)
	if err != nil {
		t.Fatal(err)
	}
	after := f.stats()
	if got := after.WALBatches - before.WALBatches; got != 1 {
		t.Errorf("%d WAL batches, want 1", got)
	}
	if got := after.WALLastIndex - before.WALLastIndex; got != 4 {
		t.Errorf("%d WAL entries, want 4 (4096 acknowledgements; 4 and a big result; a big result; a big result)", got)
	}
	for i, r := range results {
		if i == 7 {
			if !errors.Is(r.Err, execstore.ErrLeaseLost) {
				t.Errorf("stale lease: err = %v, want ErrLeaseLost", r.Err)
			}
			continue
		}
		if r.Err != nil || r.Record.ExecutionID != leases[i].ExecutionID || r.Record.Status != execstore.StatusCompleted {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	f.reopen()
	for i, l := range leases {
		want := execstore.StatusCompleted
		if i == 7 {
			want = execstore.StatusAdmitted
		}
		if rec := f.get(l.ExecutionID); rec.Status != want {
			t.Fatalf("%s after reopen: %s, want %s", l.ExecutionID, rec.Status, want)
		}
	}
	if rec := f.get(leases[n+2].ExecutionID); !bytes.Equal(rec.Outcome.Result, big) {
		t.Fatalf("big result not kept byte for byte")
	}
}

// AcknowledgeAndClaim answers as AcknowledgeBatch followed by ClaimDue
// would, in one write of the log: a lone claimer's round costs one fsync.
func TestAcknowledgeAndClaimAnswersAsBothCallsInOneWrite(t *testing.T) {
	f := newFixture(t)
	for i := range 6 {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("e-%d", i), WorkflowID: "w"})
	}
	first := f.claim(3, time.Minute)
	stale := first[2]
	stale.Token++ // never issued: not current
	before := f.stats()
	results, leases, err := f.s.AcknowledgeAndClaim(ctx, []execstore.Ack{
		{Lease: first[0], Outcome: execstore.Completed(raw(`1`))},
		{Lease: first[1], Outcome: execstore.Failed(errors.New("no"))},
		{Lease: stale, Outcome: execstore.Completed(nil)},
	}, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.stats().WALBatches - before.WALBatches; got != 1 {
		t.Fatalf("%d writes of the log, want 1", got)
	}
	if !results[0].Applied || results[0].Record.Status != execstore.StatusCompleted ||
		!results[1].Applied || results[1].Record.Status != execstore.StatusFailed ||
		!errors.Is(results[2].Err, execstore.ErrLeaseLost) {
		t.Fatalf("acknowledgements answered %+v", results)
	}
	var claimed []string
	for _, l := range leases {
		claimed = append(claimed, l.ExecutionID)
	}
	if want := []string{"e-3", "e-4", "e-5"}; !slices.Equal(claimed, want) {
		t.Fatalf("claimed %v, want %v (e-2's lease is still current)", claimed, want)
	}
	if rec := f.get("e-2"); rec.Lease == nil || rec.Lease.Token != first[2].Token {
		t.Fatalf("e-2 = %+v: the stale acknowledgement changed its lease", rec)
	}
}

// A claim with invalid arguments refuses the whole call before anything is
// queued: the acknowledgements are not written either.
func TestAcknowledgeAndClaimWithAnInvalidClaimWritesNothing(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w"})
	l := f.claim(1, time.Minute)[0]
	before := f.stats()
	for _, c := range []struct {
		limit int
		d     time.Duration
	}{{0, time.Minute}, {execstore.DefaultLimits.ClaimLimit + 1, time.Minute}, {1, 0}, {1, -time.Second}} {
		results, leases, err := f.s.AcknowledgeAndClaim(ctx, []execstore.Ack{{Lease: l, Outcome: execstore.Completed(nil)}}, c.limit, c.d)
		if !errors.Is(err, execstore.ErrInvalidArgument) || results != nil || leases != nil {
			t.Fatalf("AcknowledgeAndClaim(limit %d, %v) = %v, %v, %v; want ErrInvalidArgument", c.limit, c.d, results, leases, err)
		}
	}
	if f.stats().WALBatches != before.WALBatches || f.get("a").Status == execstore.StatusCompleted {
		t.Fatal("a refused call wrote something")
	}
}
