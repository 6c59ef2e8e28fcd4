package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
)

// matchesDeclined checks what the package documentation advises callers to
// do with an error read back from a record: errors.Is against the sentinel,
// execstore.ErrorCode for the code.
func matchesDeclined(t *testing.T, where string, err error) {
	t.Helper()
	if !errors.Is(err, errDeclined) {
		t.Errorf("%s: errors.Is(%v, errDeclined) = false, want true", where, err)
	}
	if errors.Is(err, execstore.ErrLeaseLost) {
		t.Errorf("%s: errors.Is(%v, ErrLeaseLost) = true, want false", where, err)
	}
	if got := execstore.ErrorCode(err); got != "CARD_DECLINED" {
		t.Errorf("%s: ErrorCode(%v) = %q, want CARD_DECLINED", where, err, got)
	}
}

// A child fails with a coded error wrapped in context. The parent's Await,
// the callers reading either record, and the same callers after a restart
// all match it against its sentinel and read its code.
func TestAFailedChildsErrorMatchesItsSentinelInTheParentAndForCallersAcrossARestart(t *testing.T) {
	h := newHarness(t)
	var inParent []error
	workflow.Register(h.worker, "charge", func(x *workflow.Execution, p chargeParams) (receipt, error) {
		return receipt{}, fmt.Errorf("charging order %d: %w", p.Order, errDeclined)
	})
	workflow.Register(h.worker, "checkout", func(x *workflow.Execution, p chargeParams) (receipt, error) {
		r, err := workflow.Call[receipt](x, "charge", "charge", p)
		if err != nil && !errors.Is(err, workflow.ErrSuspended) {
			inParent = append(inParent, err)
		}
		return r, err
	})
	h.trigger("parent", "checkout", chargeParams{Order: 42})
	suspended(t, h.deliver("parent"))
	leases, err := h.store.ClaimDue(bg, 10, patience) // the child, due since the parent started it
	if err != nil || len(leases) != 1 {
		t.Fatalf("ClaimDue = %+v, %v; want the child", leases, err)
	}
	childID := leases[0].ExecutionID
	failure(t, h.deliverWith(bg, leases[0]))
	failure(t, h.deliver("parent"))
	if len(inParent) != 1 {
		t.Fatalf("the parent's Await returned %d errors, want 1", len(inParent))
	}
	var ce *workflow.ChildError
	if !errors.As(inParent[0], &ce) || ce.ChildID != childID {
		t.Fatalf("the parent's Await returned %v, want a ChildError for %s", inParent[0], childID)
	}
	matchesDeclined(t, "in the parent", inParent[0])

	readBack := func(when string) {
		for _, id := range []string{childID, "parent"} {
			_, err := workflow.Result[receipt](h.await(id))
			matchesDeclined(t, when+", "+id+"'s record", err)
		}
	}
	readBack("before a restart")
	if err := h.store.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	h.open()
	readBack("after a restart")
}

// A failed step returns the same recorded error on every run, and on every
// run it matches the sentinel the step function returned.
func TestAFailedStepsErrorMatchesItsSentinelOnEveryRun(t *testing.T) {
	h := newHarness(t)
	var seen []error
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		_, err := workflow.Run(x, "charge", func(context.Context) (string, error) {
			return "", fmt.Errorf("charging: %w", errDeclined)
		})
		seen = append(seen, err)
		if err := x.Sleep("wait", 1); err != nil {
			return "", err
		}
		return "notified the customer", nil
	})
	h.trigger("e", "w", nil)
	suspended(t, h.deliver("e"))
	h.clock.Advance(1)
	result[string](t, h.deliver("e"))
	if len(seen) != 2 {
		t.Fatalf("%d runs, want 2", len(seen))
	}
	for i, err := range seen {
		matchesDeclined(t, fmt.Sprintf("run %d", i+1), err)
	}
}

// The codes this package records (CodeWorkflowPanic...) are found with
// execstore.ErrorCode on the record, as its documentation says.
func TestThisPackagesCodesAreFoundOnTheRecordWithErrorCode(t *testing.T) {
	h := newHarness(t)
	workflow.Register(h.worker, "panics", func(x *workflow.Execution, _ struct{}) (string, error) {
		panic("out of stock")
	})
	workflow.Register(h.worker, "swallows", func(x *workflow.Execution, _ struct{}) (string, error) {
		if err := x.Sleep("wait", 1); err != nil {
			return "", errors.New("something else")
		}
		return "", nil
	})
	for _, c := range []struct{ id, want string }{{"panics", workflow.CodeWorkflowPanic}, {"swallows", workflow.CodeSuspensionSwallowed}} {
		id, want := c.id, c.want
		h.trigger(id, id, nil)
		failure(t, h.deliver(id))
		_, err := workflow.Result[string](h.await(id))
		if got := execstore.ErrorCode(err); got != want {
			t.Errorf("%s: ErrorCode(%v) = %q, want %q", id, err, got, want)
		}
	}
}
