package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
	"github.com/google/go-cmp/cmp"
)

type order struct {
	ID     int    `json:"id"`
	Status string `json:"status"`
	hidden string // not JSON: a rerun would not see it, so the first run does not either
}

func TestRunSavesItsResultAndARerunReturnsItWithoutCallingTheStep(t *testing.T) {
	h := newHarness(t)
	calls := 0
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (order, error) {
		o, err := workflow.Run(x, "load", func(context.Context) (order, error) {
			calls++
			return order{ID: 42, Status: "open", hidden: "lost"}, nil
		})
		if err != nil {
			return order{}, err
		}
		if err := x.Sleep("wait", time.Minute); err != nil {
			return order{}, err
		}
		return o, nil
	})
	h.trigger("e", "w", nil)
	suspended(t, h.deliver("e"))
	if v, ok, _ := h.store.Step(bg, "e", "load"); !ok || string(v) != `{"id":42,"status":"open"}` {
		t.Fatalf("saved step = %s, %v", v, ok)
	}
	h.clock.Advance(time.Minute)
	got := result[order](t, h.deliver("e"))
	if calls != 1 {
		t.Fatalf("the step ran %d times, want once", calls)
	}
	if want := (order{ID: 42, Status: "open"}); got != want {
		t.Fatalf("result = %+v, want %+v", got, want)
	}
}

// The first run and every rerun must see the same value, so Run returns the
// value decoded from what it saved even on the first run.
func TestRunReturnsTheSavedFormOnTheFirstRunToo(t *testing.T) {
	h := newHarness(t)
	var first order
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (struct{}, error) {
		o, err := workflow.Run(x, "load", func(context.Context) (order, error) {
			return order{ID: 42, hidden: "lost"}, nil
		})
		first = o
		return struct{}{}, err
	})
	h.trigger("e", "w", nil)
	result[struct{}](t, h.deliver("e"))
	if first.hidden != "" {
		t.Fatalf("the first run saw %+v, which no rerun could", first)
	}
}

// A step's error is saved: a rerun gets the same error without running the
// step again, in the recorded form both times.
func TestAFailedStepIsSavedAndEveryRerunReturnsTheSameError(t *testing.T) {
	h := newHarness(t)
	calls := 0
	var seen []error
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		_, err := workflow.Run(x, "charge", func(context.Context) (string, error) {
			calls++
			return "", errDeclined
		})
		seen = append(seen, err)
		if err := x.Sleep("wait", time.Minute); err != nil {
			return "", err
		}
		return "notified the customer", nil
	})
	h.trigger("e", "w", nil)
	suspended(t, h.deliver("e"))
	h.clock.Advance(time.Minute)
	result[string](t, h.deliver("e"))
	if calls != 1 || len(seen) != 2 {
		t.Fatalf("the step ran %d times over %d runs, want once over 2", calls, len(seen))
	}
	want := &execstore.WorkflowError{Name: "*workflow_test.declined", Message: "card declined: insufficient funds", Code: "CARD_DECLINED"}
	for i, err := range seen {
		if diff := cmp.Diff(error(want), err); diff != "" {
			t.Fatalf("run %d: error (-want +got):\n%s", i+1, diff)
		}
	}
}

// A step error the workflow returns fails the execution with that error.
func TestAStepErrorReturnedByTheWorkflowFailsIt(t *testing.T) {
	h := newHarness(t)
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		return workflow.Run(x, "charge", func(context.Context) (string, error) { return "", errDeclined })
	})
	h.trigger("e", "w", nil)
	if err := failure(t, h.deliver("e")); err.Code != "CARD_DECLINED" || err.Message != "card declined: insufficient funds" {
		t.Fatalf("recorded %+v", err)
	}
}

func TestARetryableStepIsRetriedAtItsIntervalUpToItsAttempts(t *testing.T) {
	tests := []struct {
		name      string
		failures  int // attempts that fail before one succeeds
		attempts  int // MaxAttempts
		wantCalls int
		wantOK    bool
	}{
		{"succeeds on the first attempt", 0, 3, 1, true},
		{"succeeds on the last attempt", 2, 3, 3, true},
		{"runs out of attempts", 5, 3, 3, false},
		{"one attempt never retries", 5, 1, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			var at []time.Time
			workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
				return workflow.Run(x, "charge", func(context.Context) (string, error) {
					at = append(at, h.clock.Now())
					if len(at) <= tt.failures {
						return "", workflow.Retryable(errDeclined, tt.attempts, 5*time.Second)
					}
					return "r-1", nil
				})
			})
			h.trigger("e", "w", nil)
			d := h.deliver("e")
			for d.rec.Status == execstore.StatusSuspended {
				h.clock.Advance(5*time.Second - time.Nanosecond)
				h.notDue("e")
				h.clock.Advance(time.Nanosecond)
				d = h.deliver("e")
			}
			if len(at) != tt.wantCalls {
				t.Fatalf("attempts = %d, want %d", len(at), tt.wantCalls)
			}
			for i := range at {
				if want := t0.Add(time.Duration(i) * 5 * time.Second); !at[i].Equal(want) {
					t.Fatalf("attempt %d at %v, want %v", i+1, at[i], want)
				}
			}
			if tt.wantOK {
				if got := result[string](t, d); got != "r-1" {
					t.Fatalf("result = %q", got)
				}
				return
			}
			// The step fails with the error inside the RetryableError.
			if err := failure(t, d); err.Code != "CARD_DECLINED" || err.Name != "*workflow_test.declined" {
				t.Fatalf("recorded %+v, want the declined error", err)
			}
		})
	}
}

// A rerun that comes before the retry time (another wake) does not run the
// step early: it waits for the retry time again.
func TestAnEarlyRerunWaitsForTheRetryTime(t *testing.T) {
	h := newHarness(t)
	calls := 0
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		return workflow.Run(x, "charge", func(context.Context) (string, error) {
			calls++
			if calls == 1 {
				return "", workflow.Retryable(errors.New("gateway timeout"), 2, time.Minute)
			}
			return "r-1", nil
		})
	})
	h.trigger("e", "w", nil)
	suspended(t, h.deliver("e"))
	if _, err := h.store.RequestWake(bg, "e", t0); err != nil { // an unrelated wake, now
		t.Fatal(err)
	}
	suspended(t, h.deliver("e"))
	if calls != 1 {
		t.Fatalf("the step ran %d times before its retry time", calls)
	}
	if rec := h.get("e"); !rec.DueAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("due at %v, want the retry time", rec.DueAt)
	}
	h.clock.Advance(time.Minute)
	if got := result[string](t, h.deliver("e")); got != "r-1" || calls != 2 {
		t.Fatalf("result %q after %d calls", got, calls)
	}
}

func TestPollChecksAtItsIntervalUntilTheConditionHolds(t *testing.T) {
	tests := []struct {
		name     string
		doneAt   int // the check that reports done; 0: never
		wantCode string
	}{
		{"holds at once", 1, ""},
		{"holds on the third check", 3, ""},
		{"never holds", 0, workflow.CodePollExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			checks := 0
			workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
				return workflow.Poll(x, "settled", time.Minute, 4, func(context.Context) (string, bool, error) {
					checks++
					return "settled", checks == tt.doneAt, nil
				})
			})
			h.trigger("e", "w", nil)
			d := h.deliver("e")
			for d.rec.Status == execstore.StatusSuspended {
				h.notDue("e")
				h.clock.Advance(time.Minute)
				d = h.deliver("e")
			}
			if tt.wantCode != "" {
				if err := failure(t, d); err.Code != tt.wantCode || checks != 4 {
					t.Fatalf("recorded %+v after %d checks, want %s after 4", err, checks, tt.wantCode)
				}
				return
			}
			if got := result[string](t, d); got != "settled" || checks != tt.doneAt {
				t.Fatalf("result %q after %d checks, want settled after %d", got, checks, tt.doneAt)
			}
		})
	}
}

// A step value the store cannot save (over its size limit) fails the step
// rather than losing it silently, and the failure is saved.
func TestAStepValueThatCannotBeSavedFailsTheStep(t *testing.T) {
	h := newHarness(t)
	calls := 0
	workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
		return workflow.Run(x, "big", func(context.Context) (string, error) {
			calls++
			return string(make([]byte, 2<<20)), nil
		})
	})
	h.trigger("e", "w", nil)
	if err := failure(t, h.deliver("e")); err.Code != workflow.CodeInvalidStepValue {
		t.Fatalf("recorded %+v, want %s", err, workflow.CodeInvalidStepValue)
	}
	if v, ok, _ := h.store.Step(bg, "e", "$error/big"); !ok {
		t.Fatalf("the failure was not saved (%s)", v)
	}
}

// A retry whose time has come by the time its failure is saved (an interval
// of zero, or a clock that jumped meanwhile) runs again in the same
// delivery: it neither suspends nor passes for a step that returned nothing.
func TestARetryAlreadyDueRunsAgainInTheSameDelivery(t *testing.T) {
	for _, interval := range []time.Duration{0, -time.Minute} {
		t.Run(interval.String(), func(t *testing.T) {
			h := newHarness(t)
			calls := 0
			workflow.Register(h.worker, "w", func(x *workflow.Execution, _ struct{}) (string, error) {
				return workflow.Run(x, "charge", func(context.Context) (string, error) {
					if calls++; calls < 3 {
						return "", workflow.Retryable(errDeclined, 3, interval)
					}
					return "r-1", nil
				})
			})
			h.trigger("e", "w", nil)
			if got := result[string](t, h.deliver("e")); got != "r-1" || calls != 3 {
				t.Fatalf("result %q after %d calls, want r-1 after 3 in one delivery", got, calls)
			}
		})
	}
}
