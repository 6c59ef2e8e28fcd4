package execstore_test

// One test per row of the conformance tables of Yieldstar RFC 001
// "Execution Record". Each test quotes its row: Case | Observable outcome.
// (The SDK rows that need the HTTP server are tested with the server.)

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/google/go-cmp/cmp"
)

// "Admission receives an unused caller-supplied ID | It reserves and returns that exact ID."
func TestAdmissionReturnsTheCallerSuppliedID(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"order-42", "sched-7@2026-01-02T12:00:00Z", "ünïcode ✓", string(make([]byte, 0)) + "x"} {
		if got := f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "charge-order"}); got != id {
			t.Errorf("Admit returned %q, want %q", got, id)
		}
		if rec := f.get(id); rec.ExecutionID != id || rec.Status != execstore.StatusAdmitted {
			t.Errorf("Get(%q) = %+v", id, rec)
		}
	}
}

// "Admission receives an ID in use | It returns EXECUTION_ID_CONFLICT; the existing record is unchanged."
func TestAdmissionOfAnIDInUseConflictsAndLeavesTheRecord(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order", Params: raw(`{"order":42}`), Context: map[string]string{"tenant": "shop"}})
	before := f.get("order-42")
	logged := f.stats().WALLastIndex
	f.clock.Advance(time.Minute)

	_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "other", Params: raw(`{"order":43}`)})
	if !errors.Is(err, execstore.ErrExecutionIDConflict) || execstore.ErrorCode(err) != "EXECUTION_ID_CONFLICT" {
		t.Fatalf("second Admit: err = %v (code %q), want ErrExecutionIDConflict", err, execstore.ErrorCode(err))
	}
	if diff := cmp.Diff(before, f.get("order-42")); diff != "" {
		t.Errorf("record changed (-before +after):\n%s", diff)
	}
	// Loom ADR 0103: a duplicate start costs one refused write, and here not
	// even that: nothing is logged.
	if got := f.stats().WALLastIndex; got != logged {
		t.Errorf("a refused duplicate wrote to the log: last index %d -> %d", logged, got)
	}
}

// "Delivery fails after admission | Repeating the admission with that ID returns EXECUTION_ID_CONFLICT."
func TestAdmissionAfterAFailedDeliveryStillConflicts(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "job-1", WorkflowID: "w"})
	l := f.claimOne("job-1")
	f.ack(l, execstore.Failed(errors.New("boom")))
	f.reopen()
	_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "job-1", WorkflowID: "w"})
	if !errors.Is(err, execstore.ErrExecutionIDConflict) {
		t.Fatalf("Admit after failed delivery: err = %v, want ErrExecutionIDConflict", err)
	}
}

// "Admission omits an ID | It returns a new ID that differs from every existing ID."
func TestAdmissionWithoutAnIDGeneratesANewOne(t *testing.T) {
	f := newFixture(t)
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		id := f.admit(execstore.AdmitRequest{WorkflowID: "w"})
		if id == "" || seen[id] {
			t.Fatalf("generated ID %q is empty or repeated", id)
		}
		seen[id] = true
	}
	f.reopen()
	for i := 0; i < 50; i++ {
		if id := f.admit(execstore.AdmitRequest{WorkflowID: "w"}); seen[id] {
			t.Fatalf("generated ID %q repeated after restart", id)
		}
	}
}

// "Admission stores an event | get returns the same workflowId, params and context; context is a ReadonlyMap."
func TestAdmissionStoresTheEventExactly(t *testing.T) {
	f := newFixture(t)
	cases := []execstore.AdmitRequest{
		{ExecutionID: "a", WorkflowID: "w", Params: raw(` { "b" : 1, "a" : [true, null, "é\u00e9"] } `), Context: map[string]string{"tenant": "t-1", "trace": ""}},
		{ExecutionID: "b", WorkflowID: "w"},
		{ExecutionID: "c", WorkflowID: "w", Params: raw(`{}`), Context: map[string]string{}},
	}
	for _, req := range cases {
		f.admit(req)
	}
	f.reopen() // and it survives a restart byte for byte
	for _, req := range cases {
		rec := f.get(req.ExecutionID)
		if rec.WorkflowID != req.WorkflowID || string(rec.Params) != string(req.Params) || (rec.Params == nil) != (req.Params == nil) {
			t.Errorf("%s: got workflow %q params %q, want %q %q", req.ExecutionID, rec.WorkflowID, rec.Params, req.WorkflowID, req.Params)
		}
		if diff := cmp.Diff(req.Context, rec.Context); diff != "" {
			t.Errorf("%s: context (-want +got):\n%s", req.ExecutionID, diff)
		}
	}
	// The returned context is a copy: changing it changes nothing.
	rec := f.get("a")
	rec.Context["tenant"] = "evil"
	rec.Params[3] = 'X'
	if again := f.get("a"); again.Context["tenant"] != "t-1" || string(again.Params) != string(cases[0].Params) {
		t.Errorf("mutating a returned record changed the store: %+v", again)
	}
}

// "A delivery runs | The worker reads workflowId, params and context from the record, not from the wake."
func TestDeliveryReadsTheEventFromTheRecordNotTheWake(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w", Params: raw(`{"n":1}`), Context: map[string]string{"k": "v"}})
	// Wakes carry only a time: however many arrive, the event is the record's.
	for i := 0; i < 3; i++ {
		f.wake("e", t0.Add(time.Duration(i)*time.Second))
	}
	l := f.claimOne("e")
	if l.ExecutionID != "e" || l.Token == 0 {
		t.Fatalf("lease = %+v", l)
	}
	rec := f.get(l.ExecutionID)
	if rec.WorkflowID != "w" || string(rec.Params) != `{"n":1}` || rec.Context["k"] != "v" {
		t.Errorf("record read for the delivery = %+v", rec)
	}
}

// "Admission receives a value that cannot round-trip | It returns INVALID_EXECUTION_EVENT; no record exists and nothing is due."
func TestAdmissionOfAValueThatCannotRoundTripIsRefused(t *testing.T) {
	big := make([]byte, 1<<20+1)
	copy(big, `{"x":"`)
	for i := 6; i < len(big)-2; i++ {
		big[i] = 'a'
	}
	copy(big[len(big)-2:], `"}`)
	cases := map[string]execstore.AdmitRequest{
		"empty workflow ID":         {ExecutionID: "e", WorkflowID: ""},
		"ID over 200 bytes":         {ExecutionID: string(make([]byte, 201)), WorkflowID: "w"},
		"ID with a control char":    {ExecutionID: "a\nb", WorkflowID: "w"},
		"ID not UTF-8":              {ExecutionID: "a\xffb", WorkflowID: "w"},
		"workflow ID not UTF-8":     {ExecutionID: "e", WorkflowID: "\xff"},
		"invalid JSON":              {ExecutionID: "e", WorkflowID: "w", Params: raw(`{"a":`)},
		"array params":              {ExecutionID: "e", WorkflowID: "w", Params: raw(`[]`)},
		"null params":               {ExecutionID: "e", WorkflowID: "w", Params: raw(`null`)},
		"string params":             {ExecutionID: "e", WorkflowID: "w", Params: raw(`"x"`)},
		"number params":             {ExecutionID: "e", WorkflowID: "w", Params: raw(`7`)},
		"empty params bytes":        {ExecutionID: "e", WorkflowID: "w", Params: raw(``)},
		"duplicate key":             {ExecutionID: "e", WorkflowID: "w", Params: raw(`{"a":1,"a":2}`)},
		"nested duplicate key":      {ExecutionID: "e", WorkflowID: "w", Params: raw(`{"a":[{"b":1,"\u0062":2}]}`)},
		"invalid UTF-8 in params":   {ExecutionID: "e", WorkflowID: "w", Params: raw("{\"a\":\"\xff\"}")},
		"lone surrogate":            {ExecutionID: "e", WorkflowID: "w", Params: raw(`{"a":"\ud800"}`)},
		"params over the limit":     {ExecutionID: "e", WorkflowID: "w", Params: big},
		"empty context key":         {ExecutionID: "e", WorkflowID: "w", Context: map[string]string{"": "v"}},
		"context key not UTF-8":     {ExecutionID: "e", WorkflowID: "w", Context: map[string]string{"\xff": "v"}},
		"context value not UTF-8":   {ExecutionID: "e", WorkflowID: "w", Context: map[string]string{"k": "\xff"}},
		"params+context over limit": {ExecutionID: "e", WorkflowID: "w", Params: big[:0:0], Context: map[string]string{"k": string(big)}},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			_, err := f.s.Admit(ctx, req)
			if !errors.Is(err, execstore.ErrInvalidExecutionEvent) || execstore.ErrorCode(err) != "INVALID_EXECUTION_EVENT" {
				t.Fatalf("err = %v, want ErrInvalidExecutionEvent", err)
			}
			if _, err := f.s.Get(ctx, req.ExecutionID); !errors.Is(err, execstore.ErrExecutionNotFound) {
				t.Errorf("Get after refusal: err = %v, want not found", err)
			}
			if leases := f.claim(10, time.Minute); len(leases) != 0 {
				t.Errorf("something became due: %+v", leases)
			}
			if st := f.stats(); st.Executions != 0 || st.WALLastIndex != 0 {
				t.Errorf("stats after refusal = %+v", st)
			}
		})
	}
}

// "Admission commits | The execution is admitted and claimDue returns it."
func TestAdmittedExecutionIsClaimable(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	if rec := f.get("e"); rec.Status != execstore.StatusAdmitted || !rec.DueAt.Equal(t0) {
		t.Fatalf("record = %+v, want admitted and due now", rec)
	}
	f.claimOne("e")
}

// "Two wakes are requested before a delivery | claimDue returns the execution once."
func TestTwoWakesBeforeADeliveryClaimOnce(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.wake("e", t0)
	f.wake("e", t0)
	f.claimOne("e")
	if leases := f.claim(10, time.Minute); len(leases) != 0 {
		t.Fatalf("second claim = %+v, want none", leases)
	}
}

// "Wakes are requested with different due times | The execution becomes due at the earlier time."
func TestWakesWithDifferentTimesMergeToTheEarliest(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne("e")
	f.ack(l, execstore.Suspended())
	f.wake("e", t0.Add(20*time.Minute))
	f.wake("e", t0.Add(10*time.Minute))
	f.wake("e", t0.Add(30*time.Minute))
	if rec := f.get("e"); !rec.DueAt.Equal(t0.Add(10 * time.Minute)) {
		t.Fatalf("DueAt = %v, want %v", rec.DueAt, t0.Add(10*time.Minute))
	}
	f.clock.Advance(10*time.Minute - time.Nanosecond)
	if leases := f.claim(10, time.Minute); len(leases) != 0 {
		t.Fatalf("claimed before the earliest wake: %+v", leases)
	}
	f.clock.Advance(time.Nanosecond)
	f.claimOne("e")
}

// "A wake is requested during a delivery | After that delivery acknowledges, the execution is still due at the requested time."
func TestWakeDuringDeliveryIsKeptAfterAcknowledge(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne("e")
	f.wake("e", t0)
	rec := f.ack(l, execstore.Suspended())
	if !rec.DueAt.Equal(t0) {
		t.Fatalf("DueAt after ack = %v, want %v", rec.DueAt, t0)
	}
	f.claimOne("e")
}

// "A delivery claims a past-due wake, and a future wake is requested during it | After acknowledgement, the execution is due at the future time, not immediately."
func TestFutureWakeDuringDeliveryIsNotDueImmediately(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.clock.Advance(time.Minute) // the admission wake is now past due
	l := f.claimOne("e")
	future := f.clock.Now().Add(10 * time.Minute)
	f.wake("e", future)
	rec := f.ack(l, execstore.Suspended())
	if !rec.DueAt.Equal(future) {
		t.Fatalf("DueAt = %v, want %v", rec.DueAt, future)
	}
	if leases := f.claim(10, time.Minute); len(leases) != 0 {
		t.Fatalf("claimed immediately: %+v", leases)
	}
}

// "A wake is requested for an unknown execution ID | It returns EXECUTION_NOT_FOUND; no record is created and nothing is due."
func TestWakeForAnUnknownExecutionIsNotFound(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"nobody", "", "\xff"} {
		_, err := f.s.RequestWake(ctx, id, t0)
		if !errors.Is(err, execstore.ErrExecutionNotFound) || execstore.ErrorCode(err) != "EXECUTION_NOT_FOUND" {
			t.Fatalf("RequestWake(%q): err = %v, want ErrExecutionNotFound", id, err)
		}
	}
	if st := f.stats(); st.Executions != 0 || st.Pending != 0 || st.WALLastIndex != 0 {
		t.Fatalf("stats = %+v, want nothing stored", st)
	}
}

// "A delivery is claimed and not yet acknowledged | claimDue does not return it again before the redelivery timeout."
func TestClaimedExecutionIsNotReclaimedBeforeExpiry(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.claimOne("e") // one-minute lease
	f.wake("e", t0)
	for _, d := range []time.Duration{0, 30 * time.Second, time.Minute - time.Nanosecond} {
		f.clock.Set(t0.Add(d))
		if leases := f.claim(10, time.Minute); len(leases) != 0 {
			t.Fatalf("at +%v: claimed again %+v", d, leases)
		}
	}
}

// "A delivery is never acknowledged | Its wakes stay pending and the execution is delivered again."
func TestUnacknowledgedDeliveryIsDeliveredAgain(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	first := f.claimOne("e")
	f.clock.Advance(time.Minute) // the lease expires
	second := f.claimOne("e")
	if second.Token <= first.Token {
		t.Fatalf("redelivery token %d not above %d", second.Token, first.Token)
	}
	if rec := f.get("e"); rec.Attempts != 2 || rec.Lease == nil || rec.Lease.Token != second.Token {
		t.Fatalf("record = %+v", rec)
	}
}

// "A wake is requested for a terminal execution | It returns ignored; nothing becomes due."
func TestWakeForATerminalExecutionIsIgnored(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.ack(f.claimOne("e"), execstore.Completed(raw(`1`)))
	if got := f.wake("e", t0); got != execstore.WakeIgnored {
		t.Fatalf("RequestWake = %q, want ignored", got)
	}
	if rec := f.get("e"); !rec.DueAt.IsZero() {
		t.Fatalf("DueAt = %v, want none", rec.DueAt)
	}
	f.clock.Advance(time.Hour)
	if leases := f.claim(10, time.Minute); len(leases) != 0 {
		t.Fatalf("terminal execution claimed: %+v", leases)
	}
}

// "The runtime restarts with admitted and suspended executions | Their records and pending wakes survive and are delivered."
func TestRestartKeepsRecordsAndPendingWakes(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "admitted", WorkflowID: "w"})
	f.admit(execstore.AdmitRequest{ExecutionID: "suspended", WorkflowID: "w"})
	leases := f.claim(10, time.Minute)
	for _, l := range leases {
		if l.ExecutionID == "suspended" {
			f.s.RequestWake(ctx, "suspended", t0.Add(10*time.Minute))
			f.ack(l, execstore.Suspended())
		}
	}
	before := []execstore.Record{f.get("admitted"), f.get("suspended")}
	f.reopen()
	after := []execstore.Record{f.get("admitted"), f.get("suspended")}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("records changed across restart (-before +after):\n%s", diff)
	}
	f.clock.Advance(10 * time.Minute) // "admitted"'s lease expired too
	got := ids(f.claim(10, time.Minute))
	slices.Sort(got)
	if diff := cmp.Diff([]string{"admitted", "suspended"}, got); diff != "" {
		t.Fatalf("delivered after restart (-want +got):\n%s", diff)
	}
}

// ---- Outcome table ----

// "A delivery acknowledges suspended | The record is suspended and has no outcome."
func TestAcknowledgeSuspended(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	rec := f.ack(f.claimOne("e"), execstore.Suspended())
	if rec.Status != execstore.StatusSuspended || rec.Outcome != nil || rec.Lease != nil {
		t.Fatalf("record = %+v", rec)
	}
}

// "A delivery acknowledges completed | The record is completed; get returns the result."
func TestAcknowledgeCompleted(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.ack(f.claimOne("e"), execstore.Completed(raw(`{"receipt": "r-1"}`)))
	f.reopen()
	rec := f.get("e")
	if rec.Status != execstore.StatusCompleted || rec.Outcome == nil || rec.Outcome.Status != execstore.StatusCompleted ||
		string(rec.Outcome.Result) != `{"receipt": "r-1"}` || rec.Outcome.Error != nil {
		t.Fatalf("record = %+v, outcome %+v", rec, rec.Outcome)
	}
}

type paymentError struct{ cause error }

func (e *paymentError) Error() string     { return "declined" }
func (e *paymentError) ErrorName() string { return "PaymentError" }
func (e *paymentError) Code() string      { return "DECLINED" }
func (e *paymentError) Unwrap() error     { return e.cause }

// "A delivery acknowledges failed | The record is failed; get returns an error with the same name and message."
func TestAcknowledgeFailedKeepsNameMessageCodeAndCause(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	err := &paymentError{cause: errors.New("card expired")}
	f.ack(f.claimOne("e"), execstore.Failed(err))
	f.reopen()
	rec := f.get("e")
	want := &execstore.WorkflowError{Name: "PaymentError", Message: "declined", Code: "DECLINED",
		Cause: &execstore.WorkflowError{Name: "*errors.errorString", Message: "card expired"}}
	if rec.Status != execstore.StatusFailed || rec.Outcome == nil {
		t.Fatalf("record = %+v", rec)
	}
	if diff := cmp.Diff(want, rec.Outcome.Error); diff != "" {
		t.Fatalf("recorded error (-want +got):\n%s", diff)
	}
	if rec.Outcome.Error.Error() != "declined" || errors.Unwrap(rec.Outcome.Error).Error() != "card expired" {
		t.Fatalf("revived error does not read back: %v", rec.Outcome.Error)
	}
}

// "A second terminal acknowledgement differs from the first | The record keeps the first outcome, and acknowledge returns it."
func TestSecondTerminalAcknowledgementKeepsTheFirst(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne("e")
	first := f.ack(l, execstore.Completed(raw(`"first"`)))
	for _, o := range []execstore.RunOutcome{execstore.Completed(raw(`"second"`)), execstore.Failed(errors.New("late"))} {
		again := f.ack(l, o)
		if diff := cmp.Diff(first, again); diff != "" {
			t.Fatalf("second acknowledgement changed the answer (-first +again):\n%s", diff)
		}
	}
	if diff := cmp.Diff(first, f.get("e")); diff != "" {
		t.Fatalf("record changed (-first +now):\n%s", diff)
	}
}

// "A suspended acknowledgement arrives after a terminal one | The record stays terminal, and acknowledge returns the terminal outcome."
func TestSuspendedAcknowledgementAfterTerminalReturnsTheOutcome(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne("e")
	first := f.ack(l, execstore.Failed(errors.New("boom")))
	again := f.ack(l, execstore.Suspended())
	if again.Status != execstore.StatusFailed || again.Outcome == nil || again.Outcome.Error.Message != "boom" {
		t.Fatalf("suspended ack after failed = %+v", again)
	}
	if diff := cmp.Diff(first, f.get("e")); diff != "" {
		t.Fatalf("record changed:\n%s", diff)
	}
}

// "A terminal execution is delivered again | The delivery returns the recorded outcome without running workflow code."
// The store never claims a terminal execution again, and a stale delivery's
// acknowledgement gets the recorded outcome (the dispatcher's part, not
// invoking the workflow, is tested with the dispatcher).
func TestTerminalExecutionIsNeverDeliveredAgain(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	stale := f.claimOne("e")
	f.clock.Advance(time.Minute)
	current := f.claimOne("e") // redelivery after expiry
	done := f.ack(current, execstore.Completed(raw(`42`)))
	f.wake("e", f.clock.Now())
	f.clock.Advance(time.Hour)
	if leases := f.claim(10, time.Minute); len(leases) != 0 {
		t.Fatalf("terminal execution delivered again: %+v", leases)
	}
	got := f.ack(stale, execstore.Suspended())
	if diff := cmp.Diff(done, got); diff != "" {
		t.Fatalf("stale delivery's acknowledgement (-recorded +got):\n%s", diff)
	}
}

// "A delivery fails with an infrastructure error | The status is unchanged, and the execution is delivered again."
func TestInfrastructureFailureKeepsStatusAndRedelivers(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.ack(f.claimOne("e"), execstore.Suspended())
	f.wake("e", t0)
	l := f.claimOne("e")
	if err := f.s.Release(ctx, l, 5*time.Second); err != nil {
		t.Fatalf("Release: %v", err)
	}
	rec := f.get("e")
	if rec.Status != execstore.StatusSuspended || rec.Lease != nil || !rec.DueAt.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("record after release = %+v", rec)
	}
	f.clock.Advance(5 * time.Second)
	f.claimOne("e")
}
