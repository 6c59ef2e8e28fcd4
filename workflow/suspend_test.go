package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
)

func TestSleepSuspendsUntilItsWakeTimeAndTheRerunContinuesPastIt(t *testing.T) {
	h := newHarness(t)
	var after []time.Time
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		if err := x.Sleep("wait", 10*time.Minute); err != nil {
			return "", err
		}
		after = append(after, h.clock.Now())
		return "done", nil
	})
	h.trigger("e", "w", nil)
	d := h.deliver("e")
	suspended(t, d)
	if want := t0.Add(10 * time.Minute); !d.rec.DueAt.Equal(want) {
		t.Fatalf("due at %v, want %v", d.rec.DueAt, want)
	}
	if v, _, _ := h.store.Step(bg, "e", "wait"); string(v) != `"2026-01-02T12:10:00Z"` {
		t.Fatalf("saved wake time = %s", v)
	}
	h.clock.Advance(10*time.Minute - time.Nanosecond)
	h.notDue("e")
	h.clock.Advance(time.Nanosecond)
	if got := result[string](t, h.deliver("e")); got != "done" || len(after) != 1 {
		t.Fatalf("result %q, ran past the sleep %d times", got, len(after))
	}
}

// A wake that arrives early (a duplicate trigger's, a watch's) reruns the
// workflow before the sleep ends: the sleep keeps its first wake time.
func TestAnEarlyRerunSleepsUntilTheSameWakeTime(t *testing.T) {
	h := newHarness(t)
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		if err := x.Sleep("wait", 10*time.Minute); err != nil {
			return "", err
		}
		return "done", nil
	})
	h.trigger("e", "w", nil)
	suspended(t, h.deliver("e"))
	h.clock.Advance(time.Minute)
	h.store.RequestWake(bg, "e", h.clock.Now())
	d := h.deliver("e")
	suspended(t, d)
	if want := t0.Add(10 * time.Minute); !d.rec.DueAt.Equal(want) {
		t.Fatalf("due at %v, want the first wake time %v", d.rec.DueAt, want)
	}
}

func TestSleepUntilKeepsTheFirstRunsTime(t *testing.T) {
	h := newHarness(t)
	runs := 0
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		runs++
		// A careless workflow computes the time from the clock on every run.
		if err := x.SleepUntil("until", h.clock.Now().Add(time.Hour)); err != nil {
			return "", err
		}
		return "done", nil
	})
	h.trigger("e", "w", nil)
	suspended(t, h.deliver("e"))
	h.clock.Advance(time.Hour)
	if got := result[string](t, h.deliver("e")); got != "done" || runs != 2 {
		t.Fatalf("result %q after %d runs, want done after 2", got, runs)
	}
}

// Suspension is an error the workflow function must return. One that does
// not is detected, and the execution fails rather than completing with a
// result computed without what it waited for.
func TestASwallowedSuspensionFailsTheExecution(t *testing.T) {
	tests := []struct {
		name string
		fn   func(x *workflow.Execution) (string, error)
		want string // in the recorded message
	}{
		{"returns a result", func(x *workflow.Execution) (string, error) {
			x.Sleep("wait", time.Minute)
			return "charged", nil
		}, `instead of the suspension`},
		{"returns another error", func(x *workflow.Execution) (string, error) {
			if err := x.Sleep("wait", time.Minute); err != nil {
				return "", errors.New("could not wait")
			}
			return "", nil
		}, `returned the error "could not wait"`},
		{"returns a suspension it did not cause", func(x *workflow.Execution) (string, error) {
			return "", workflow.ErrSuspended
		}, "none of its operations made"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) { return tt.fn(x) })
			h.trigger("e", "w", nil)
			err := failure(t, h.deliver("e"))
			if err.Code != workflow.CodeSuspensionSwallowed || !strings.Contains(err.Message, tt.want) {
				t.Fatalf("recorded %+v, want %s mentioning %q", err, workflow.CodeSuspensionSwallowed, tt.want)
			}
		})
	}
}

// A suspension may be wrapped on its way out, and a workflow that ignores it
// and carries on does nothing more: every later operation returns it again.
func TestAfterASuspensionEveryOperationReturnsIt(t *testing.T) {
	h := newHarness(t)
	charged := 0
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		first := x.Sleep("wait", time.Minute)
		_, err := workflow.Run(x, "charge", func(context.Context) (string, error) {
			charged++
			return "r-1", nil
		})
		if err != first {
			return "", fmt.Errorf("Run returned %v, not the suspension", err)
		}
		return "", fmt.Errorf("charging: %w", err)
	})
	h.trigger("e", "w", nil)
	suspended(t, h.deliver("e"))
	if charged != 0 {
		t.Fatal("a step ran after the execution suspended")
	}
}

func TestAPanicBecomesAFailedOutcomeWithThePanicValue(t *testing.T) {
	tests := []struct {
		name  string
		value any
		want  execstore.WorkflowError
	}{
		{"a string", "out of stock", execstore.WorkflowError{Name: "WorkflowPanic", Message: "workflow: panic: out of stock", Code: workflow.CodeWorkflowPanic}},
		{"an error", errDeclined, execstore.WorkflowError{Name: "WorkflowPanic", Message: "workflow: panic: card declined: insufficient funds", Code: workflow.CodeWorkflowPanic,
			Cause: &execstore.WorkflowError{Name: "*workflow_test.declined", Message: "card declined: insufficient funds", Code: "CARD_DECLINED"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) { panic(tt.value) })
			h.trigger("e", "w", nil)
			if got := failure(t, h.deliver("e")); fmt.Sprint(*got) != fmt.Sprint(tt.want) || (got.Cause == nil) != (tt.want.Cause == nil) {
				t.Fatalf("recorded %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Misuse that no rerun could fix panics, and so fails the execution with a
// message that says what was wrong.
func TestMisusedOperationsFailTheExecutionWithTheReason(t *testing.T) {
	noop := func(context.Context) (int, error) { return 1, nil }
	tests := []struct {
		name string
		fn   func(x *workflow.Execution)
		want string
	}{
		{"an empty key", func(x *workflow.Execution) { workflow.Run(x, "", noop) }, "must be non-empty"},
		{"a reserved key", func(x *workflow.Execution) { workflow.Run(x, "$error/x", noop) }, `must not start with "$"`},
		{"a key used twice", func(x *workflow.Execution) {
			workflow.Run(x, "load", noop)
			workflow.Run(x, "load", noop)
		}, "already used by Run"},
		{"an operation inside a step", func(x *workflow.Execution) {
			workflow.Run(x, "outer", func(context.Context) (int, error) { return 0, x.Sleep("inner", time.Second) })
		}, "inside a step function"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
				tt.fn(x)
				return "", nil
			})
			h.trigger("e", "w", nil)
			if err := failure(t, h.deliver("e")); err.Code != workflow.CodeWorkflowPanic || !strings.Contains(err.Message, tt.want) {
				t.Fatalf("recorded %+v, want a panic mentioning %q", err, tt.want)
			}
		})
	}
}
