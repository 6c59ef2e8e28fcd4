package workflow_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
)

func TestTriggerReturnsTheAdmittedIDAndARepeatIsAConflict(t *testing.T) {
	h := newHarness(t)
	req := workflow.TriggerRequest{ExecutionID: "order-42", WorkflowID: "charge-order", Params: chargeParams{Order: 42}}
	id, err := h.client.Trigger(bg, req)
	if err != nil || id != "order-42" {
		t.Fatalf("Trigger = %q, %v", id, err)
	}
	if _, err := h.client.Trigger(bg, req); !errors.Is(err, execstore.ErrExecutionIDConflict) {
		t.Fatalf("repeat = %v, want ErrExecutionIDConflict", err)
	}
	if _, err := h.client.TriggerAndWait(bg, req); !errors.Is(err, execstore.ErrExecutionIDConflict) {
		t.Fatalf("TriggerAndWait repeat = %v, want ErrExecutionIDConflict", err)
	}
	generated, err := h.client.Trigger(bg, workflow.TriggerRequest{WorkflowID: "charge-order"})
	if err != nil || generated == "" || generated == id {
		t.Fatalf("Trigger without an ID = %q, %v", generated, err)
	}
}

func TestTriggerStoresParams(t *testing.T) {
	tests := []struct {
		name   string
		params any
		want   string
	}{
		{"none", nil, ""},
		{"a struct", chargeParams{Order: 42}, `{"order":42}`},
		{"raw JSON byte for byte", json.RawMessage(`{ "order": 42 }`), `{ "order": 42 }`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.trigger("e", "w", tt.params)
			if got := h.get("e").Params; string(got) != tt.want || (got == nil) != (tt.want == "") {
				t.Fatalf("params = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTriggerRefusesParamsThatAreNotAnObject(t *testing.T) {
	h := newHarness(t)
	for _, params := range []any{42, "x", []int{1}, make(chan int)} {
		if _, err := h.client.Trigger(bg, workflow.TriggerRequest{WorkflowID: "w", Params: params}); !errors.Is(err, execstore.ErrInvalidExecutionEvent) {
			t.Fatalf("Trigger(%T) = %v, want ErrInvalidExecutionEvent", params, err)
		}
	}
}

// TriggerAndWait waits on the durable record: after a restart, Wait on the
// reopened store returns the outcome the new process records.
func TestWaitingWorksAcrossARestart(t *testing.T) {
	h := newHarness(t)
	workflow.Register(h.worker, "w", func(x *workflow.Execution, p chargeParams) (int, error) { return p.Order, nil })
	waited := make(chan error, 1)
	go func() {
		_, err := h.client.TriggerAndWait(bg, workflow.TriggerRequest{ExecutionID: "e", WorkflowID: "w", Params: chargeParams{Order: 42}})
		waited <- err
	}()
	h.await0("e")
	h.store.Close() // the process stops before the execution ran
	if err := <-waited; !errors.Is(err, execstore.ErrClosed) {
		t.Fatalf("TriggerAndWait = %v, want ErrClosed", err)
	}
	h.open()
	workflow.Register(h.worker, "w", func(x *workflow.Execution, p chargeParams) (int, error) { return p.Order, nil })
	h.dispatch(dispatcherOptions())
	rec := h.await("e")
	if got, err := workflow.Result[int](rec); err != nil || got != 42 {
		t.Fatalf("Result = %d, %v", got, err)
	}
}

// await0 waits until id has been admitted.
func (h *harness) await0(id string) {
	h.t.Helper()
	timeout := time.After(patience)
	for {
		ch := h.store.DueChanged()
		if _, err := h.store.Get(bg, id); err == nil {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			h.t.Fatalf("%q was not admitted", id)
		}
	}
}

func TestResultDecodesTheOutcome(t *testing.T) {
	failed := &execstore.WorkflowError{Name: "x", Message: "card declined", Code: "CARD_DECLINED"}
	tests := []struct {
		name    string
		rec     execstore.Record
		want    int
		wantErr bool
	}{
		{"completed", execstore.Record{Status: execstore.StatusCompleted, Outcome: &execstore.Outcome{Status: execstore.StatusCompleted, Result: []byte(`42`)}}, 42, false},
		{"completed without a result", execstore.Record{Status: execstore.StatusCompleted, Outcome: &execstore.Outcome{Status: execstore.StatusCompleted}}, 0, false},
		{"a result of another type", execstore.Record{Status: execstore.StatusCompleted, Outcome: &execstore.Outcome{Status: execstore.StatusCompleted, Result: []byte(`"x"`)}}, 0, true},
		{"failed", execstore.Record{Status: execstore.StatusFailed, Outcome: &execstore.Outcome{Status: execstore.StatusFailed, Error: failed}}, 0, true},
		{"not ended", execstore.Record{Status: execstore.StatusSuspended}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := workflow.Result[int](tt.rec)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Fatalf("Result = %d, %v", got, err)
			}
		})
	}
	if _, err := workflow.Result[int](tests[3].rec); err != error(failed) {
		t.Fatalf("a failed record's error = %v, want its recorded error", err)
	}
}
