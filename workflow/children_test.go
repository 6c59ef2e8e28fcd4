package workflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
)

type chargeParams struct {
	Order int `json:"order"`
}

type receipt struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

// family registers checkout, which starts a charge child and awaits it, and
// charge, which fails with failWith if set. It returns the child IDs each
// checkout run got from Start.
func family(h *harness, failWith error) *[]string {
	started := new([]string)
	workflow.Register(h.worker, "charge", func(x *workflow.Execution, p chargeParams) (receipt, error) {
		if failWith != nil {
			return receipt{}, failWith
		}
		return receipt{ID: "r-1", Amount: p.Order * 100}, nil
	})
	workflow.Register(h.worker, "checkout", func(x *workflow.Execution, p chargeParams) (receipt, error) {
		id, err := x.Start("charge", "charge", p)
		if err != nil {
			return receipt{}, err
		}
		*started = append(*started, id)
		return workflow.Await[receipt](x, id)
	})
	return started
}

func TestAParentAwaitsItsChildsResultAndIsWokenWhenTheChildEnds(t *testing.T) {
	h := newHarness(t)
	started := family(h, nil)
	h.trigger("parent", "checkout", chargeParams{Order: 42})
	suspended(t, h.deliver("parent"))
	h.notDue("parent")
	child := h.get((*started)[0])
	if child.WorkflowID != "charge" || string(child.Params) != `{"order":42}` || child.Parent.ExecutionID != "parent" || child.Parent.StepKey != "charge" {
		t.Fatalf("child = %+v", child)
	}
	result[receipt](t, h.deliver(child.ExecutionID))
	// The child's outcome woke the parent.
	if got := result[receipt](t, h.deliver("parent")); got != (receipt{ID: "r-1", Amount: 4200}) {
		t.Fatalf("parent result = %+v", got)
	}
	if len(*started) != 2 || (*started)[1] != child.ExecutionID {
		t.Fatalf("Start returned %v over two runs, want the same child twice", *started)
	}
	if st, _ := h.store.Stats(bg); st.Executions != 2 {
		t.Fatalf("%d executions, want the parent and one child", st.Executions)
	}
}

func TestAChildsFailureReachesTheParentWithItsCode(t *testing.T) {
	h := newHarness(t)
	started := family(h, errDeclined)
	h.trigger("parent", "checkout", chargeParams{Order: 42})
	suspended(t, h.deliver("parent"))
	failure(t, h.deliver((*started)[0]))
	err := failure(t, h.deliver("parent"))
	if err.Name != "ChildFailedError" || err.Code != "CARD_DECLINED" || err.Cause == nil || err.Cause.Message != "card declined: insufficient funds" {
		t.Fatalf("parent recorded %+v (cause %+v)", err, err.Cause)
	}
}

// A rerun that starts a different child under the same key is refused: the
// store compares the workflow and canonical params.
func TestARerunStartingADifferentChildUnderTheSameKeyFails(t *testing.T) {
	h := newHarness(t)
	order := 42
	workflow.Register(h.worker, "checkout", func(x *workflow.Execution, _ struct{}) (string, error) {
		id, err := x.Start("charge", "charge", chargeParams{Order: order})
		if err != nil {
			return "", err
		}
		return workflow.Await[string](x, id)
	})
	h.trigger("parent", "checkout", nil)
	suspended(t, h.deliver("parent"))
	order = 43 // the workflow changed between deliveries
	h.store.RequestWake(bg, "parent", t0)
	if err := failure(t, h.deliver("parent")); err.Code != execstore.ErrorCode(execstore.ErrStartRequestMismatch) {
		t.Fatalf("recorded %+v, want START_REQUEST_MISMATCH", err)
	}
}

func TestAwaitRefusesAnExecutionThatIsNotAChild(t *testing.T) {
	h := newHarness(t)
	h.trigger("stranger", "charge", nil)
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		return workflow.Await[string](x, "stranger")
	})
	h.trigger("e", "w", nil)
	if err := failure(t, h.deliver("e")); err.Code != workflow.CodeNotAChild {
		t.Fatalf("recorded %+v, want %s", err, workflow.CodeNotAChild)
	}
}

// Call is Start then Await, end to end with a dispatcher.
func TestCallRunsAChildToItsResultUnderADispatcher(t *testing.T) {
	h := newHarness(t)
	workflow.Register(h.worker, "charge", func(x *workflow.Execution, p chargeParams) (receipt, error) {
		return receipt{ID: "r-1", Amount: p.Order * 100}, nil
	})
	workflow.Register(h.worker, "checkout", func(x *workflow.Execution, p chargeParams) (receipt, error) {
		return workflow.Call[receipt](x, "charge", "charge", p)
	})
	h.dispatch(dispatcherOptions())
	ctx, cancel := context.WithTimeout(bg, patience)
	defer cancel()
	rec, err := h.client.TriggerAndWait(ctx, workflow.TriggerRequest{ExecutionID: "parent", WorkflowID: "checkout", Params: chargeParams{Order: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := workflow.Result[receipt](rec); err != nil || got != (receipt{ID: "r-1", Amount: 700}) {
		t.Fatalf("Result = %+v, %v", got, err)
	}
}

// A child retired by retention before its parent awaits it keeps its parent
// link and its outcome, so the parent still gets the child's result.
func TestAParentAwaitsAChildRetiredBeforeItLooks(t *testing.T) {
	h := newHarness(t)
	h.store.Close()
	h.retention = time.Hour
	h.open()
	started := family(h, nil)
	h.trigger("parent", "checkout", chargeParams{Order: 42})
	suspended(t, h.deliver("parent"))
	child := (*started)[0]
	result[receipt](t, h.deliver(child))

	// Past the retention horizon the finished child is retired (the writer
	// retires before it takes the next command).
	h.clock.Advance(2 * time.Hour)
	h.trigger("nudge", "charge", chargeParams{Order: 1})
	if st, _ := h.store.Stats(bg); st.Retired != 1 {
		t.Fatalf("%d retired, want the child", st.Retired)
	}
	if rec := h.get(child); rec.Params != nil || rec.Parent == nil || rec.Parent.ExecutionID != "parent" {
		t.Fatalf("retired child = %+v, want its parent link kept and its params dropped", rec)
	}
	if got := result[receipt](t, h.deliver("parent")); got != (receipt{ID: "r-1", Amount: 4200}) {
		t.Fatalf("parent result = %+v", got)
	}
}

// A cancelled child makes the parent's Await return an error that matches
// execstore.ErrCancelled, with the reason; a parent that fails with it
// records the cancellation's code.
func TestACancelledChildMakesAwaitReturnErrCancelled(t *testing.T) {
	h := newHarness(t)
	started := family(h, nil)
	var awaited error
	workflow.Register(h.worker, "careful-checkout", func(x *workflow.Execution, p chargeParams) (receipt, error) {
		id, err := x.Start("charge", "charge", p)
		if err != nil {
			return receipt{}, err
		}
		*started = append(*started, id)
		r, err := workflow.Await[receipt](x, id)
		awaited = err
		return r, err
	})
	h.trigger("parent", "careful-checkout", chargeParams{Order: 42})
	suspended(t, h.deliver("parent"))
	if _, err := h.store.Cancel(bg, (*started)[0], "out of stock"); err != nil {
		t.Fatal(err)
	}
	rec := failure(t, h.deliver("parent"))
	if !errors.Is(awaited, execstore.ErrCancelled) || !strings.Contains(awaited.Error(), "was cancelled: out of stock") {
		t.Fatalf("Await returned %v, want an error matching ErrCancelled with the reason", awaited)
	}
	if rec.Code != "CANCELLED" {
		t.Fatalf("parent recorded %+v, want the code CANCELLED", rec)
	}
}
