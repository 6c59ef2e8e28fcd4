package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
)

// A lost lease is not the workflow's outcome: the run stops, nothing more is
// written, and the worker returns an error so that nothing is acknowledged.
func TestALostLeaseEndsTheRunWithoutAnOutcome(t *testing.T) {
	h := newHarness(t)
	charged := 0
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		if _, err := workflow.Run(x, "load", func(context.Context) (int, error) { return 42, nil }); err != nil {
			return "", err
		}
		return workflow.Run(x, "charge", func(context.Context) (string, error) {
			charged++
			return "r-1", nil
		})
	})
	h.trigger("e", "w", nil)
	stale := h.claim("e")
	h.clock.Advance(time.Minute) // the lease expires and another worker claims it
	h.claim("e")
	d := h.deliverWith(bg, stale)
	if !errors.Is(d.err, execstore.ErrLeaseLost) {
		t.Fatalf("delivery = %+v, want an ErrLeaseLost error", d)
	}
	if charged != 0 {
		t.Fatal("the stale worker ran the next step after its save was refused")
	}
	if _, ok, _ := h.store.Step(bg, "e", "load"); ok {
		t.Fatal("the stale worker's step was saved")
	}
}

// The delivery's context carries the lease loss into the run: the first
// operation after the cancel stops it, with ErrLeaseLost as the reason.
func TestACancelledDeliveryStopsAtTheNextOperation(t *testing.T) {
	h := newHarness(t)
	ran := false
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		return workflow.Run(x, "charge", func(context.Context) (string, error) {
			ran = true
			return "r-1", nil
		})
	})
	h.trigger("e", "w", nil)
	lease := h.claim("e")
	ctx, cancel := context.WithCancelCause(bg)
	cancel(execstore.ErrLeaseLost)
	if d := h.deliverWith(ctx, lease); !errors.Is(d.err, execstore.ErrLeaseLost) || ran {
		t.Fatalf("delivery = %+v (step ran: %v), want ErrLeaseLost before the step", d, ran)
	}
}

// A store that fails mid-run ends the run without an outcome too; the step
// whose save failed runs again on the next delivery.
func TestAStoreThatClosesMidRunEndsTheRunWithoutAnOutcome(t *testing.T) {
	h := newHarness(t)
	calls := 0
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		v, err := workflow.Run(x, "charge", func(context.Context) (string, error) {
			calls++
			if calls == 1 {
				h.store.Close() // the process is going down
			}
			return "r-1", nil
		})
		if err != nil {
			return "swallowed: the abort still wins", nil
		}
		return v, nil
	})
	h.trigger("e", "w", nil)
	d := h.deliverWith(bg, h.claim("e"))
	if !errors.Is(d.err, execstore.ErrClosed) {
		t.Fatalf("delivery = %+v, want ErrClosed", d)
	}
	h.open()
	h.clock.Advance(time.Minute)
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		return workflow.Run(x, "charge", func(context.Context) (string, error) {
			calls++
			return "r-1", nil
		})
	})
	if got := result[string](t, h.deliver("e")); got != "r-1" || calls != 2 {
		t.Fatalf("result %q after %d calls", got, calls)
	}
}

func TestAnUnregisteredWorkflowIsAnErrorNotAnOutcome(t *testing.T) {
	h := newHarness(t)
	h.trigger("e", "nobody", nil)
	d := h.deliverWith(bg, h.claim("e"))
	if d.err == nil {
		t.Fatalf("delivery = %+v, want an error", d)
	}
}

func TestParamsThatDoNotDecodeFailTheExecution(t *testing.T) {
	h := newHarness(t)
	workflow.Register(h.worker, "w", func(x *workflow.Execution, p chargeParams) (string, error) { return "", nil })
	h.trigger("e", "w", map[string]string{"order": "forty-two"})
	if err := failure(t, h.deliver("e")); err.Code != workflow.CodeInvalidParams {
		t.Fatalf("recorded %+v, want %s", err, workflow.CodeInvalidParams)
	}
}

func TestParamsAndContextReachTheWorkflow(t *testing.T) {
	h := newHarness(t)
	workflow.Register(h.worker, "w", func(x *workflow.Execution, p chargeParams) (map[string]any, error) {
		return map[string]any{"order": p.Order, "tenant": x.EventContext()["tenant"], "id": x.ID(), "workflow": x.WorkflowID(), "attempt": x.Attempt()}, nil
	})
	if _, err := h.client.Trigger(bg, workflow.TriggerRequest{ExecutionID: "e", WorkflowID: "w", Params: chargeParams{Order: 42}, Context: map[string]string{"tenant": "shop"}}); err != nil {
		t.Fatal(err)
	}
	got := result[map[string]any](t, h.deliver("e"))
	want := map[string]any{"order": 42.0, "tenant": "shop", "id": "e", "workflow": "w", "attempt": 1.0}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("result = %v, want %v", got, want)
		}
	}
}

func TestRegisteringAnIDTwicePanics(t *testing.T) {
	h := newHarness(t)
	fn := func(x *workflow.Execution, _ struct{}) (string, error) { return "", nil }
	workflow.Register(h.worker, "w", fn)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	workflow.Register(h.worker, "w", fn)
}
