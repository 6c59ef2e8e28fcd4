package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// An execution not ended by its deadline fails with ErrDeadlineExceeded
// when the store's time reaches it, fired by the writer's timer: its lease
// ends (the worker's acknowledgement is refused), a child it started is
// cancelled, and the record's deadline is gone. A deadline survives a
// restart, and one that passed while the store was closed fires when it
// opens.
func TestADeadlineFailsTheExecutionOnceEvenAcrossARestart(t *testing.T) {
	f := newFixture(t)
	start := f.clock.Now()
	f.admit(execstore.AdmitRequest{ExecutionID: "order", WorkflowID: "w", Deadline: start.Add(10 * time.Second)})
	f.admit(execstore.AdmitRequest{ExecutionID: "later", WorkflowID: "v", Deadline: start.Add(time.Hour)})
	if rec, _ := f.s.Get(ctx, "order"); !rec.Deadline.Equal(start.Add(10 * time.Second)) {
		t.Fatalf("the record's deadline = %v", rec.Deadline)
	}
	l := f.claimIn(1, "w")[0]
	child, err := f.s.Start(ctx, l, "charge", "charge", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(10 * time.Second) // fires the writer's timer
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rec, err := f.s.Await(wait, "order")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != execstore.StatusFailed || !errors.Is(rec.Outcome.Error, execstore.ErrDeadlineExceeded) ||
		!rec.UpdatedAt.Equal(start.Add(10*time.Second)) || !rec.Deadline.IsZero() {
		t.Fatalf("after its deadline: %+v", rec)
	}
	if c, _ := f.s.Get(ctx, child); c.Status != execstore.StatusCancelled {
		t.Fatalf("its child is %v, want cancelled", c.Status)
	}
	if _, err := f.s.Acknowledge(ctx, l, execstore.Completed(nil)); err != nil {
		t.Fatalf("a late acknowledgement: %v", err) // answered with the recorded outcome
	}
	if rec, _ := f.s.Get(ctx, "order"); !errors.Is(rec.Outcome.Error, execstore.ErrDeadlineExceeded) {
		t.Fatalf("a late acknowledgement changed the outcome: %+v", rec.Outcome)
	}

	f.s.Close()
	f.clock.Advance(2 * time.Hour)
	f.open()
	wait2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	rec, err = f.s.Await(wait2, "later")
	if err != nil || !errors.Is(rec.Outcome.Error, execstore.ErrDeadlineExceeded) {
		t.Fatalf("a deadline passed while the store was closed: %+v, %v", rec, err)
	}
	if !rec.UpdatedAt.Equal(start.Add(10*time.Second + 2*time.Hour)) {
		t.Fatalf("it ended at %v, want the store's time when it opened", rec.UpdatedAt)
	}
	if _, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "far", WorkflowID: "w", Deadline: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}); !errors.Is(err, execstore.ErrInvalidExecutionEvent) {
		t.Fatalf("a deadline past what the store keeps: %v", err)
	}
}

// When more deadlines have passed than one command ends, the writer ends
// them all before the batch it took, even when an earlier one's execution
// cancelled a later one's (which that later deadline then ends nothing):
// an acknowledgement after them all finds its execution failed.
func TestEveryPassedDeadlineFiresBeforeTheNextWrite(t *testing.T) {
	f := newFixture(t)
	f.untimed()
	f.reopen()
	start := f.clock.Now()
	f.admit(execstore.AdmitRequest{ExecutionID: "parent", WorkflowID: "p", Deadline: start.Add(time.Second)})
	pl := f.claimIn(1, "p")[0]
	if _, err := f.s.StartWith(ctx, pl, execstore.StartRequest{StepKey: "c", WorkflowID: "c", Deadline: start.Add(2 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	for i := range 1100 {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("x-%04d", i), WorkflowID: "x", Deadline: start.Add(10 * time.Second)})
	}
	f.admit(execstore.AdmitRequest{ExecutionID: "last", WorkflowID: "last", Deadline: start.Add(20 * time.Second)})
	l := f.claimIn(1, "last")[0]
	f.clock.Advance(time.Hour)
	rec, err := f.s.Acknowledge(ctx, l, execstore.Completed(nil))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != execstore.StatusFailed || !errors.Is(rec.Outcome.Error, execstore.ErrDeadlineExceeded) {
		t.Fatalf("an acknowledgement after every deadline passed: %+v, want the deadline's failure", rec.Outcome)
	}
}
