package execstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/google/go-cmp/cmp"
)

// An acknowledgement's result says whether it recorded its outcome: the
// first terminal one did; a repeat with the same lease, a late one with a
// superseded lease, and a second one in the same batch found the execution
// terminal and got the outcome recorded before, with Applied false.
func TestAcknowledgeBatchSaysWhetherEachAcknowledgementWasApplied(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w"})
	f.admit(execstore.AdmitRequest{ExecutionID: "b", WorkflowID: "w"})
	leases := f.claim(10, time.Minute)
	if len(leases) != 2 {
		t.Fatalf("ClaimDue = %+v", leases)
	}
	la, lb := leases[0], leases[1]
	first, second := execstore.Completed(raw(`"first"`)), execstore.Completed(raw(`"second"`))
	res, err := f.s.AcknowledgeBatch(ctx, []execstore.Ack{
		{Lease: la, Outcome: first}, {Lease: la, Outcome: second}, {Lease: lb, Outcome: execstore.Suspended()},
	})
	if err != nil {
		t.Fatal(err)
	}
	applied := []bool{res[0].Applied, res[1].Applied, res[2].Applied}
	if diff := cmp.Diff([]bool{true, false, true}, applied); diff != "" || res[1].Err != nil {
		t.Fatalf("Applied (-want +got):\n%s (second's error %v)", diff, res[1].Err)
	}
	if got := string(res[1].Record.Outcome.Result); got != `"first"` {
		t.Fatalf("the unapplied acknowledgement answered %s, want the recorded first outcome", got)
	}
	// A repeat alone, and a suspension with the same stale lease, later.
	for _, o := range []execstore.RunOutcome{second, execstore.Suspended()} {
		res, err = f.s.AcknowledgeBatch(ctx, []execstore.Ack{{Lease: la, Outcome: o}})
		if err != nil || res[0].Err != nil || res[0].Applied || string(res[0].Record.Outcome.Result) != `"first"` {
			t.Fatalf("late %s acknowledgement: %+v, %v; want the first outcome, not applied", o.Status, res, err)
		}
	}
	// A lease that ended, of an execution that is not terminal, is lost.
	res, err = f.s.AcknowledgeBatch(ctx, []execstore.Ack{{Lease: lb, Outcome: first}})
	if err != nil || !errors.Is(res[0].Err, execstore.ErrLeaseLost) || res[0].Applied {
		t.Fatalf("stale lease of a live execution: %+v, %v; want ErrLeaseLost", res, err)
	}
}

// An acknowledgement repeated under the same lease with the same outcome (a
// retry whose first answer was lost) answers as the first did, applied, and
// says it is a replay; results compare in canonical form. A different
// outcome, a suspension, or the same outcome under another lease is not a
// replay: only a genuinely stale acknowledgement reads as not applied.
func TestARepeatedAcknowledgementIsAReplay(t *testing.T) {
	failure := &execstore.WorkflowError{Name: "PaymentError", Message: "card declined", Code: "DECLINED",
		Cause: &execstore.WorkflowError{Name: "GatewayError", Message: "402"}}
	tests := []struct {
		name         string
		first, again execstore.RunOutcome
		sameLease    bool
		wantApplied  bool
		wantReplayed bool
	}{
		{"the same result", execstore.Completed(raw(`{"receipt":"r-1","total":16}`)), execstore.Completed(raw(`{"receipt":"r-1","total":16}`)), true, true, true},
		{"the same result in another key order", execstore.Completed(raw(`{"receipt":"r-1","total":16}`)), execstore.Completed(raw(`{ "total": 16, "receipt": "r-1" }`)), true, true, true},
		{"no result, twice", execstore.Completed(nil), execstore.Completed(nil), true, true, true},
		{"the same failure", execstore.Failed(failure), execstore.Failed(failure), true, true, true},
		{"another result", execstore.Completed(raw(`{"receipt":"r-1"}`)), execstore.Completed(raw(`{"receipt":"r-2"}`)), true, false, false},
		{"a result where there was none", execstore.Completed(nil), execstore.Completed(raw(`null`)), true, false, false},
		{"a failure with another cause", execstore.Failed(failure), execstore.Failed(&execstore.WorkflowError{Name: "PaymentError", Message: "card declined", Code: "DECLINED"}), true, false, false},
		{"a suspension after the outcome", execstore.Completed(nil), execstore.Suspended(), true, false, false},
		{"the same result under an older lease", execstore.Completed(raw(`1`)), execstore.Completed(raw(`1`)), false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
			older := f.claim(1, time.Minute)[0]
			lease := older
			if !tt.sameLease {
				if err := f.s.Release(ctx, older, 0); err != nil {
					t.Fatal(err)
				}
				lease = f.claim(1, time.Minute)[0]
			}
			res, err := f.s.AcknowledgeBatch(ctx, []execstore.Ack{{Lease: lease, Outcome: tt.first}})
			if err != nil || res[0].Err != nil || !res[0].Applied || res[0].Replayed {
				t.Fatalf("first acknowledgement: %+v, %v", res, err)
			}
			res, err = f.s.AcknowledgeBatch(ctx, []execstore.Ack{{Lease: older, Outcome: tt.again}})
			if err != nil || res[0].Err != nil {
				t.Fatalf("repeat: %+v, %v", res, err)
			}
			if res[0].Applied != tt.wantApplied || res[0].Replayed != tt.wantReplayed {
				t.Fatalf("repeat: applied %v, replayed %v; want %v, %v", res[0].Applied, res[0].Replayed, tt.wantApplied, tt.wantReplayed)
			}
		})
	}
}

// A suspension repeated under the lease whose own acknowledgement
// suspended the execution, with no claim since, is a replay (a retry whose
// first answer was lost): applied, replayed, the record as it is now, and
// nothing written; across a reopen too. After anything else that ended or
// followed the lease, it is a stale worker's: ErrLeaseLost.
func TestARepeatedSuspensionUnderItsOwnLeaseIsAReplay(t *testing.T) {
	tests := []struct {
		name string
		// between runs after the first acknowledgement (a suspension, unless
		// release is set) and before the repeat.
		between    func(f *fixture, l execstore.Lease)
		release    bool // the lease is released instead of acknowledged
		maxTries   int
		again      *execstore.RunOutcome // nil: a suspension
		wantReplay bool
	}{
		{name: "at once", between: func(*fixture, execstore.Lease) {}, wantReplay: true},
		{name: "under an attempt bound", between: func(*fixture, execstore.Lease) {}, maxTries: 3, wantReplay: true},
		{name: "after a wake was requested", between: func(f *fixture, _ execstore.Lease) { f.wake("e", t0.Add(time.Hour)) }, wantReplay: true},
		{name: "after a reopen", between: func(f *fixture, _ execstore.Lease) { f.reopen() }, wantReplay: true},
		{name: "after a snapshot and a reopen", between: func(f *fixture, _ execstore.Lease) {
			if err := f.s.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
			f.reopen()
		}, wantReplay: true},
		{name: "after a later claim", between: func(f *fixture, _ execstore.Lease) {
			f.wake("e", t0)
			f.claimOne("e")
		}},
		{name: "after a later delivery released", between: func(f *fixture, _ execstore.Lease) {
			f.wake("e", t0)
			if err := f.s.Release(ctx, f.claimOne("e"), 0); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "of a released lease", between: func(*fixture, execstore.Lease) {}, release: true},
		{name: "a completion after the suspension", between: func(*fixture, execstore.Lease) {}, again: new(execstore.Completed(nil))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w", MaxAttempts: tt.maxTries})
			l := f.claimOne("e")
			if tt.release {
				if err := f.s.Release(ctx, l, time.Hour); err != nil {
					t.Fatal(err)
				}
			} else if res, err := f.s.AcknowledgeBatch(ctx, []execstore.Ack{{Lease: l, Outcome: execstore.Suspended()}}); err != nil || res[0].Err != nil || !res[0].Applied || res[0].Replayed {
				t.Fatalf("first acknowledgement: %+v, %v", res, err)
			}
			tt.between(f, l)
			again := execstore.Suspended()
			if tt.again != nil {
				again = *tt.again
			}
			want := f.get("e")
			before := f.stats().WALLastIndex
			res, err := f.s.AcknowledgeBatch(ctx, []execstore.Ack{{Lease: l, Outcome: again}})
			if err != nil {
				t.Fatal(err)
			}
			rec, oneErr := f.s.Acknowledge(ctx, l, again)
			if !tt.wantReplay {
				if !errors.Is(res[0].Err, execstore.ErrLeaseLost) || !errors.Is(oneErr, execstore.ErrLeaseLost) {
					t.Fatalf("repeat: %+v and %v, want ErrLeaseLost from both", res[0], oneErr)
				}
				return
			}
			if res[0].Err != nil || !res[0].Applied || !res[0].Replayed {
				t.Fatalf("repeat: %+v, want applied and replayed", res[0])
			}
			if diff := cmp.Diff(want, res[0].Record); diff != "" {
				t.Fatalf("the replay's record is not the record as it is (-want +got):\n%s", diff)
			}
			if oneErr != nil || !cmp.Equal(want, rec) {
				t.Fatalf("Acknowledge's repeat: %+v, %v; want the record as it is", rec, oneErr)
			}
			if after := f.stats().WALLastIndex; after != before {
				t.Fatalf("the replays wrote to the log (%d -> %d)", before, after)
			}
		})
	}
}

// SaveStepKept saves a new key's value and says so; for a key saved
// already it writes nothing and answers the first value, which is kept.
func TestSaveStepKeptAnswersTheValueThatIsKept(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne("e")
	kept, saved, err := f.s.SaveStepKept(ctx, l, "charge", raw(`{"receipt":"r-1"}`))
	if err != nil || !saved || string(kept) != `{"receipt":"r-1"}` {
		t.Fatalf("first save: %s %v %v", kept, saved, err)
	}
	before := f.stats().WALLastIndex
	kept, saved, err = f.s.SaveStepKept(ctx, l, "charge", raw(`{"receipt":"r-2"}`))
	if err != nil || saved || string(kept) != `{"receipt":"r-1"}` {
		t.Fatalf("second save: %s %v %v, want the first value kept and saved false", kept, saved, err)
	}
	if after := f.stats().WALLastIndex; after != before {
		t.Fatalf("the second save wrote to the log (%d -> %d)", before, after)
	}
	f.ack(l, execstore.Suspended())
	if _, _, err := f.s.SaveStepKept(ctx, l, "other", raw(`1`)); !errors.Is(err, execstore.ErrLeaseLost) {
		t.Fatalf("save with an ended lease: %v, want ErrLeaseLost", err)
	}
}

// ListSteps pages through an execution's steps in key order: after a key,
// at most limit of them, and no more than maxBytes of values, but at least
// one.
func TestListStepsPagesInKeyOrderWithinItsBounds(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.admit(execstore.AdmitRequest{ExecutionID: "f", WorkflowID: "w"})
	for _, l := range f.claim(10, time.Minute) {
		for i := range 5 {
			if err := f.s.SaveStep(ctx, l, fmt.Sprint("s", 4-i), raw(fmt.Sprintf(`"%s%d"`, l.ExecutionID, 4-i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys := func(steps []execstore.SavedStep) string {
		var out []string
		for _, s := range steps {
			out = append(out, s.Key+"="+string(s.Value))
		}
		return strings.Join(out, " ")
	}
	cases := []struct {
		after           string
		limit, maxBytes int
		want            string
		more            bool
	}{
		{"", 10, 0, `s0="e0" s1="e1" s2="e2" s3="e3" s4="e4"`, false},
		{"", 5, 0, `s0="e0" s1="e1" s2="e2" s3="e3" s4="e4"`, false},
		{"", 2, 0, `s0="e0" s1="e1"`, true},
		{"s1", 2, 0, `s2="e2" s3="e3"`, true},
		{"s2x", 10, 0, `s3="e3" s4="e4"`, false},
		{"s4", 10, 0, ``, false},
		{"", 10, 8, `s0="e0" s1="e1"`, true}, // each value is 4 bytes
		{"", 10, 1, `s0="e0"`, true},         // at least one
	}
	for _, c := range cases {
		got, more, err := f.s.ListSteps(ctx, "e", c.after, c.limit, c.maxBytes)
		if err != nil || keys(got) != c.want || more != c.more {
			t.Errorf("ListSteps(after %q, limit %d, maxBytes %d) = %q, %v, %v; want %q, %v",
				c.after, c.limit, c.maxBytes, keys(got), more, err, c.want, c.more)
		}
	}
	if _, _, err := f.s.ListSteps(ctx, "nobody", "", 10, 0); !errors.Is(err, execstore.ErrExecutionNotFound) {
		t.Errorf("unknown execution: %v", err)
	}
	if _, _, err := f.s.ListSteps(ctx, "e", "", 0, 0); !errors.Is(err, execstore.ErrInvalidArgument) {
		t.Errorf("limit 0: %v", err)
	}
}

// CheckOutcome answers, without writing, exactly the outcome Acknowledge
// records for the same RunOutcome.
func TestCheckOutcomeAnswersWhatAcknowledgeRecords(t *testing.T) {
	f := newFixture(t)
	deep := error(&execstore.WorkflowError{Name: "Root", Message: "root"})
	for i := range 12 {
		deep = fmt.Errorf("layer %d: %w", i, deep)
	}
	outcomes := []execstore.RunOutcome{
		execstore.Completed(raw(`{"ok":true}`)),
		execstore.Completed(nil),
		execstore.Completed(raw(`{"a":1,"a":2}`)),
		execstore.Completed(raw(`"` + strings.Repeat("x", execstore.DefaultLimits.ValueBytes) + `"`)),
		execstore.Failed(&execstore.WorkflowError{Name: "E", Message: strings.Repeat("m", 20<<10), Code: "C",
			Cause: &execstore.WorkflowError{Name: "F", Message: "cause"}}),
		execstore.Failed(deep),
	}
	for i, o := range outcomes {
		id := fmt.Sprint("e", i)
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
		before := f.stats().WALLastIndex
		checked, err := f.s.CheckOutcome(o)
		if err != nil {
			t.Fatalf("%d: CheckOutcome: %v", i, err)
		}
		if after := f.stats().WALLastIndex; after != before {
			t.Fatalf("%d: CheckOutcome wrote to the log", i)
		}
		rec := f.ack(f.claimOne(id), o)
		if diff := cmp.Diff(*rec.Outcome, checked); diff != "" {
			t.Errorf("%d: CheckOutcome differs from the recorded outcome (-recorded +checked):\n%s", i, diff)
		}
	}
	if o, err := f.s.CheckOutcome(execstore.Suspended()); err != nil || o.Status != execstore.StatusSuspended {
		t.Errorf("suspended: %+v %v", o, err)
	}
	if _, err := f.s.CheckOutcome(execstore.RunOutcome{Status: "done"}); !errors.Is(err, execstore.ErrInvalidArgument) {
		t.Errorf("an unknown status: %v", err)
	}
}
