package workflow_test

import (
	"encoding/json"
	"testing"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
)

type approval struct {
	By string `json:"by"`
}

func registerApproval(h *harness) {
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (approval, error) {
		return workflow.WaitForKey[approval](x, "approved", "orders/42/approval")
	})
}

func (h *harness) commit(key, value string) {
	h.t.Helper()
	w := execstore.Write{Key: key}
	if value != "" {
		w.Value = json.RawMessage(value)
	}
	if err := h.store.Commit(bg, w); err != nil {
		h.t.Fatalf("Commit: %v", err)
	}
}

func TestWaitForKeySuspendsUntilACommitWritesTheKey(t *testing.T) {
	h := newHarness(t)
	registerApproval(h)
	h.trigger("e", "w", nil)
	suspended(t, h.deliver("e"))
	h.notDue("e")
	h.commit("orders/42/other", `1`)
	h.notDue("e")
	h.commit("orders/42/approval", `{"by":"ana"}`)
	if got := result[approval](t, h.deliver("e")); got.By != "ana" {
		t.Fatalf("result = %+v", got)
	}
}

func TestWaitForKeyReturnsAtOnceWhenTheKeyHasAValue(t *testing.T) {
	h := newHarness(t)
	registerApproval(h)
	h.commit("orders/42/approval", `{"by":"ana"}`)
	h.trigger("e", "w", nil)
	if got := result[approval](t, h.deliver("e")); got.By != "ana" {
		t.Fatalf("result = %+v", got)
	}
}

// The value is saved as a step: a rerun sees the value the first run saw,
// even if the entry changed since.
func TestWaitForKeyKeepsTheValueItFirstSaw(t *testing.T) {
	h := newHarness(t)
	var seen []string
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		a, err := workflow.WaitForKey[approval](x, "approved", "orders/42/approval")
		if err != nil {
			return "", err
		}
		seen = append(seen, a.By)
		return "", x.Sleep("cool-off", 1)
	})
	h.commit("orders/42/approval", `{"by":"ana"}`)
	h.trigger("e", "w", nil)
	suspended(t, h.deliver("e"))
	h.commit("orders/42/approval", `{"by":"bo"}`)
	h.clock.Advance(1)
	result[string](t, h.deliver("e"))
	if len(seen) != 2 || seen[0] != "ana" || seen[1] != "ana" {
		t.Fatalf("runs saw %v, want ana twice", seen)
	}
}

// A commit that deletes the key wakes the execution too; the rerun finds no
// value and waits again.
func TestWaitForKeyWaitsAgainAfterADelete(t *testing.T) {
	h := newHarness(t)
	registerApproval(h)
	h.trigger("e", "w", nil)
	suspended(t, h.deliver("e"))
	h.commit("orders/42/approval", "") // a delete
	suspended(t, h.deliver("e"))
	h.notDue("e")
	h.commit("orders/42/approval", `{"by":"cy"}`)
	if got := result[approval](t, h.deliver("e")); got.By != "cy" {
		t.Fatalf("result = %+v", got)
	}
}

func TestAValueThatDoesNotDecodeFailsWithInvalidStepValue(t *testing.T) {
	h := newHarness(t)
	registerApproval(h)
	h.commit("orders/42/approval", `"yes"`)
	h.trigger("e", "w", nil)
	if err := failure(t, h.deliver("e")); err.Code != workflow.CodeInvalidStepValue {
		t.Fatalf("recorded %+v, want %s", err, workflow.CodeInvalidStepValue)
	}
}
