package execstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/google/go-cmp/cmp"
)

func TestSavedStepIsFoundByTheRerunAndTheFirstValueWins(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	l := f.claimOne("order-42")
	if err := f.s.SaveStep(ctx, l, "charge", raw(`{"receipt":"r-1"}`)); err != nil {
		t.Fatal(err)
	}
	logged := f.stats().WALLastIndex
	if err := f.s.SaveStep(ctx, l, "charge", raw(`{"receipt":"r-2"}`)); err != nil {
		t.Fatalf("saving the same key again: %v", err)
	}
	if f.stats().WALLastIndex != logged {
		t.Errorf("a repeated step save was logged")
	}
	f.reopen()
	v, ok, err := f.s.Step(ctx, "order-42", "charge")
	if err != nil || !ok || string(v) != `{"receipt":"r-1"}` {
		t.Fatalf("Step = %s, %v, %v; want the first value", v, ok, err)
	}
	if _, ok, err := f.s.Step(ctx, "order-42", "load"); ok || err != nil {
		t.Fatalf("unsaved step: ok %v err %v", ok, err)
	}
	if _, _, err := f.s.Step(ctx, "nobody", "charge"); !errors.Is(err, execstore.ErrExecutionNotFound) {
		t.Fatalf("Step of unknown execution: err = %v", err)
	}
}

func TestSaveStepRefusesBadKeysAndValues(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne("e")
	cases := []struct {
		key   string
		value string
	}{
		{"", `1`}, {string(make([]byte, 1025)), `1`}, {"\xff", `1`},
		{"k", ``}, {"k", `{`}, {"k", `{"a":1,"a":1}`}, {"k", "\"\xff\""},
	}
	for _, tc := range cases {
		if err := f.s.SaveStep(ctx, l, tc.key, raw(tc.value)); !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("SaveStep(%q, %q): err = %v, want ErrInvalidArgument", tc.key, tc.value, err)
		}
	}
}

// "createStartedExecution admits the target with the caller's context and a parent link"
func TestStartAdmitsAChildWithTheCallersContextAndAParentLink(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "caller", WorkflowID: "parent", Context: map[string]string{"tenant": "t-1"}})
	l := f.claimOne("caller")
	f.clock.Advance(5 * time.Second)
	child, err := f.s.Start(ctx, l, "start:job", "w", raw(`{"n": -0, "list": [1]}`))
	if err != nil {
		t.Fatal(err)
	}
	if child == "caller" || child == "" {
		t.Fatalf("child ID %q", child)
	}
	rec := f.get(child)
	want := execstore.Record{
		ExecutionID: child,
		WorkflowID:  "w",
		Params:      raw(`{"n": -0, "list": [1]}`),
		Context:     map[string]string{"tenant": "t-1"},
		Status:      execstore.StatusAdmitted,
		Parent:      &execstore.Parent{ExecutionID: "caller", StepKey: "start:job"},
		AdmittedAt:  t0.Add(5 * time.Second),
		UpdatedAt:   t0.Add(5 * time.Second),
		DueAt:       t0.Add(5 * time.Second),
	}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Fatalf("child record (-want +got):\n%s", diff)
	}
	other, err := f.s.Start(ctx, l, "start:other", "w", nil)
	if err != nil || other == child {
		t.Fatalf("second start = %q, %v", other, err)
	}
	if rec := f.get(other); rec.Params != nil {
		t.Fatalf("start without params got params %q", rec.Params)
	}
}

// "records admitted without start have no parent"
func TestAdmittedRecordHasNoParent(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	if rec := f.get("e"); rec.Parent != nil {
		t.Fatalf("Parent = %+v", rec.Parent)
	}
}

// "matchStartRequest compares workflow ID and canonical params"
func TestRepeatedStartComparesWorkflowAndCanonicalParams(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "caller", WorkflowID: "parent"})
	l := f.claimOne("caller")
	child, err := f.s.Start(ctx, l, "start:job", "w", raw(`{"a":1,"b":2}`))
	if err != nil {
		t.Fatal(err)
	}
	logged := f.stats().WALLastIndex
	same, err := f.s.Start(ctx, l, "start:job", "w", raw(" {\n\"b\" : 2, \"a\":1 } "))
	if err != nil || same != child {
		t.Fatalf("repeat with reordered keys = %q, %v; want %q", same, err, child)
	}
	if f.stats().WALLastIndex != logged || f.stats().Executions != 2 {
		t.Fatalf("a matching repeat admitted or logged something: %+v", f.stats())
	}
	for _, tc := range []struct {
		workflow string
		params   string
	}{
		{"other", `{"a":1,"b":2}`},
		{"w", `{"a":1}`},
		{"w", `{"a":1,"b":2,"c":null}`},
		{"w", ``}, // no params
		{"w", `{"a":1,"b":2.0}`},
	} {
		var params []byte
		if tc.params != "" {
			params = raw(tc.params)
		}
		_, err := f.s.Start(ctx, l, "start:job", tc.workflow, params)
		if !errors.Is(err, execstore.ErrStartRequestMismatch) || execstore.ErrorCode(err) != "START_REQUEST_MISMATCH" {
			t.Errorf("Start(%q, %q): err = %v, want ErrStartRequestMismatch", tc.workflow, tc.params, err)
		}
	}
	// The idempotency survives a restart and a redelivery of the caller.
	f.reopen()
	f.clock.Advance(time.Minute)
	l2 := f.claimFor("caller")
	if again, err := f.s.Start(ctx, l2, "start:job", "w", raw(`{"b":2,"a":1}`)); err != nil || again != child {
		t.Fatalf("repeat after restart = %q, %v; want %q", again, err, child)
	}
}

// "prepareExecutionStart distinguishes missing params from an empty object"
func TestStartDistinguishesMissingParamsFromAnEmptyObject(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "caller", WorkflowID: "parent"})
	l := f.claimOne("caller")
	none, _ := f.s.Start(ctx, l, "none", "w", nil)
	empty, _ := f.s.Start(ctx, l, "empty", "w", raw(`{}`))
	if f.get(none).Params != nil || string(f.get(empty).Params) != `{}` {
		t.Fatalf("params: none %q, empty %q", f.get(none).Params, f.get(empty).Params)
	}
	if _, err := f.s.Start(ctx, l, "none", "w", raw(`{}`)); !errors.Is(err, execstore.ErrStartRequestMismatch) {
		t.Fatalf("{} after nil: err = %v, want mismatch", err)
	}
}

// "prepareExecutionStart rejects an empty workflow ID, array, null and string params"
func TestStartRefusesInvalidEvents(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "caller", WorkflowID: "parent"})
	l := f.claimOne("caller")
	for _, tc := range []struct{ workflow, params string }{
		{"", `{}`}, {"w", `[]`}, {"w", `null`}, {"w", `"x"`}, {"w", `{"a":1,"a":2}`},
	} {
		if _, err := f.s.Start(ctx, l, "k", tc.workflow, raw(tc.params)); !errors.Is(err, execstore.ErrInvalidExecutionEvent) {
			t.Errorf("Start(%q, %q): err = %v, want ErrInvalidExecutionEvent", tc.workflow, tc.params, err)
		}
	}
	if st := f.stats(); st.Executions != 1 {
		t.Fatalf("a refused start admitted something: %+v", st)
	}
}

func TestChildOutcomeWakesTheParentInTheSameCommand(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "parent", WorkflowID: "p"})
	pl := f.claimOne("parent")
	child, err := f.s.Start(ctx, pl, "start:child", "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.ack(pl, execstore.Suspended()) // the parent awaits its child
	if rec := f.get("parent"); !rec.DueAt.IsZero() {
		t.Fatalf("parent due before the child ends: %v", rec.DueAt)
	}
	cl := f.claimOne(child)
	f.clock.Advance(time.Second)
	f.ack(cl, execstore.Completed(raw(`"done"`)))
	f.reopen()
	if rec := f.get("parent"); !rec.DueAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("parent DueAt = %v, want the child's completion time", rec.DueAt)
	}
	f.claimOne("parent")
}

func TestChildOutcomeDoesNotWakeATerminalParent(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "parent", WorkflowID: "p"})
	pl := f.claimOne("parent")
	child, _ := f.s.Start(ctx, pl, "start:child", "c", nil)
	f.ack(pl, execstore.Completed(nil))
	parentRec := f.get("parent")
	f.ack(f.claimOne(child), execstore.Failed(errors.New("x")))
	if diff := cmp.Diff(parentRec, f.get("parent")); diff != "" {
		t.Fatalf("terminal parent changed:\n%s", diff)
	}
}
