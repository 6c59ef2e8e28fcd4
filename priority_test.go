package execstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/execstore/execstore"
)

// Within the queues a claim serves, it takes every claimable execution of a
// higher priority first, then by due time; a child runs at its parent's
// priority; records report their priority across a restart, and an
// acknowledgement's record too. A priority out of range is refused and
// admits nothing.
func TestAClaimTakesHigherPrioritiesFirstAndAChildInheritsIt(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "low", WorkflowID: "w", Priority: execstore.PriorityLast})
	f.admit(execstore.AdmitRequest{ExecutionID: "plain", WorkflowID: "w"})
	f.clock.Advance(time.Second)
	f.admit(execstore.AdmitRequest{ExecutionID: "urgent", WorkflowID: "w", Priority: execstore.PriorityFirst})
	f.admit(execstore.AdmitRequest{ExecutionID: "other-queue", WorkflowID: "v", Priority: execstore.PriorityFirst})
	f.reopen()
	first := f.claimIn(1, "w")
	if diff := cmp.Diff([]string{"urgent"}, ids(first)); diff != "" {
		t.Fatalf("first claim (-want +got):\n%s", diff)
	}
	f.clock.Advance(time.Second)
	child, err := f.s.Start(ctx, first[0], "c", "w-child", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := f.s.Get(ctx, child); err != nil || rec.Priority != execstore.PriorityFirst {
		t.Fatalf("the child = %+v, %v; want priority 1, its parent's", rec, err)
	}
	if diff := cmp.Diff([]string{"plain", "low"}, ids(f.claimIn(10, "w"))); diff != "" {
		t.Fatalf("second claim (-want +got):\n%s", diff)
	}
	// Across queues too: a claim of every queue takes priority 1 first.
	if diff := cmp.Diff([]string{"other-queue", child}, ids(f.claim(10, time.Minute))); diff != "" {
		t.Fatalf("claim of every queue (-want +got):\n%s", diff)
	}
	rec, err := f.s.Acknowledge(ctx, first[0], execstore.Completed(nil))
	if err != nil || rec.Priority != execstore.PriorityFirst {
		t.Fatalf("Acknowledge answered %+v, %v; want priority 1", rec, err)
	}
	if rec, _ := f.s.Get(ctx, "plain"); rec.Priority != 0 {
		t.Fatalf("an execution admitted without a priority reports %d, want 0 for the default", rec.Priority)
	}
	for _, p := range []int{-1, execstore.PriorityLast + 1} {
		_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "bad", WorkflowID: "w", Priority: p})
		if !errors.Is(err, execstore.ErrInvalidExecutionEvent) || !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Fatalf("priority %d: %v, want ErrInvalidExecutionEvent and ErrInvalidArgument", p, err)
		}
	}
	if _, err := f.s.Get(ctx, "bad"); !errors.Is(err, execstore.ErrExecutionNotFound) {
		t.Fatalf("a refused admission left a record: %v", err)
	}
}
