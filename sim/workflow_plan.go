package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
)

// The plans of the workflow check and the outcomes they determine. A parent
// execution's params are its plan: the operations its workflow function
// performs, in order, and how it ends. The function takes its whole path
// from the plan and from what the operations return, as a workflow must, so
// the plan alone fixes the outcome: wfExpect computes it without running
// anything, and the check compares it with what the store recorded.

// Operations of a plan.
const (
	wfRun   = "run"   // a step that returns a value at once
	wfSlow  = "slow"  // a step that takes wfSlowStep of the clock's time
	wfFail  = "fail"  // a step that fails; the workflow carries on with the recorded error
	wfRetry = "retry" // a step whose first Fails attempts fail and are retried, Max attempts in all
	wfSleep = "sleep" // Sleep for D
	wfKey   = "key"   // WaitForKey of a key the check commits at round At
	wfChild = "child" // Start a child of kind Child, and Await it
)

// How a parent ends after its operations.
const (
	wfEndComplete = "complete" // returns its trail as the result
	wfEndFail     = "fail"     // returns an error with codeWorkflowFailed
	wfEndPanic    = "panic"    // its last step function panics
)

// Kinds of child.
const (
	wfChildOK    = "ok"           // runs a step and completes with its value
	wfChildFails = "fail"         // fails with codeChildFailed
	wfChildWaits = "cancel-wait"  // waits for a key nobody writes until the check cancels it
	wfChildBlock = "cancel-block" // blocks in a step function until the check cancels it
)

// Codes of the errors the plans make.
const (
	codeStepFailed     = "SIM_STEP_FAILED"
	codeAttemptFailed  = "SIM_ATTEMPT_FAILED"
	codeWorkflowFailed = "SIM_WORKFLOW_FAILED"
	codeChildFailed    = "SIM_CHILD_FAILED"
)

// wfSlowStep is how long a slow step takes by the clock: a jump of the clock
// past the lease can fall in the middle of it.
const wfSlowStep = 2 * time.Second

// wfOp is one operation of a plan; Key names it within its execution.
type wfOp struct {
	Kind  string        `json:"kind"`
	Key   string        `json:"key"`
	V     int           `json:"v,omitempty"`     // the value a step, key or child returns
	D     time.Duration `json:"d,omitempty"`     // a sleep's duration; the interval between a retried step's attempts
	Fails int           `json:"fails,omitempty"` // retry: attempts that fail
	Max   int           `json:"max,omitempty"`   // retry: attempts in all
	Child string        `json:"child,omitempty"` // child: its kind
	// At is the round at which the check commits a key's value, or from
	// which it cancels a child (once the child exists).
	At int `json:"at,omitempty"`
}

// wfPlan is a parent's params.
type wfPlan struct {
	Ops []wfOp `json:"ops"`
	End string `json:"end"`
}

// wfChildParams is a child's params.
type wfChildParams struct {
	Kind string `json:"kind"`
	V    int    `json:"v"`
}

// wfChildResult is a completed child's result.
type wfChildResult struct {
	V int `json:"v"`
}

// wfResult is a completed parent's result: what each operation returned.
type wfResult struct {
	Trail []string `json:"trail"`
}

// wfStepValue is what a step function returns, and a committed key's value.
// By names the delivery whose step function returned it ("(token N)"), so
// that a saved step tells which lease saved it.
type wfStepValue struct {
	V       int    `json:"v"`
	Attempt int    `json:"attempt"`
	By      string `json:"by"`
}

// wfError is an error the plans make on purpose, with a code that survives
// recording.
type wfError struct{ code, msg string }

func (e *wfError) Error() string { return e.msg }
func (e *wfError) Code() string  { return e.code }

// wfPlanner draws plans from the seed, keeping the deliveries and children
// that hold a dispatcher slot until their lease is lost or they are
// cancelled below maxStuck, so that a free slot is always left to take them
// over.
type wfPlanner struct {
	rng   *rand.Rand
	stuck int
}

func (pl *wfPlanner) takeStuck() bool {
	if pl.stuck >= maxStuck {
		return false
	}
	pl.stuck++
	return true
}

// plan draws a parent's plan.
func (pl *wfPlanner) plan() wfPlan {
	kinds := []string{wfRun, wfRun, wfSlow, wfFail, wfRetry, wfSleep, wfSleep, wfKey, wfChild, wfChild}
	var p wfPlan
	for i := range 2 + pl.rng.IntN(4) {
		kind := kinds[pl.rng.IntN(len(kinds))]
		op := wfOp{Kind: kind, Key: fmt.Sprintf("%s%d", kind, i), V: pl.rng.IntN(1000)}
		switch kind {
		case wfRetry:
			op.Max = 2 + pl.rng.IntN(2)
			op.Fails = pl.rng.IntN(op.Max + 1) // Max: every attempt fails
			op.D = time.Duration(1+pl.rng.IntN(3)) * time.Second
		case wfSleep:
			op.D = time.Duration(1+pl.rng.IntN(5)) * time.Second
			if pl.rng.IntN(2) == 0 {
				op.D += dispatchLease // past a lease
			}
		case wfKey:
			op.At = pl.rng.IntN(40)
		case wfChild:
			op.Child = pl.child()
			op.At = 1 + pl.rng.IntN(40)
		}
		p.Ops = append(p.Ops, op)
	}
	switch r := pl.rng.IntN(5); {
	case r == 0:
		p.End = wfEndFail
	case r == 1:
		p.End = wfEndPanic
	default:
		p.End = wfEndComplete
	}
	return p
}

func (pl *wfPlanner) child() string {
	switch r := pl.rng.IntN(10); {
	case r < 4:
		return wfChildOK
	case r < 7:
		return wfChildFails
	case r < 9 || !pl.takeStuck():
		return wfChildWaits
	}
	return wfChildBlock
}

// deliveries draws how the first deliveries of a parent go; later ones are
// normal.
func (pl *wfPlanner) deliveries() []wfDelivery {
	ds := make([]wfDelivery, 2+pl.rng.IntN(5))
	for i := range ds {
		if pl.rng.IntN(5) < 3 {
			continue
		}
		d := wfDelivery(1 + pl.rng.IntN(int(wfDeliveryKinds)-1))
		if (d == wfStallOnLoss || d == wfHangOnLoss) && !pl.takeStuck() {
			d = wfErrAfterRun
		}
		ds[i] = d
	}
	return ds
}

// wfEntry is what op adds to its parent's trail when it goes as planned.
func wfEntry(op wfOp) string {
	switch op.Kind {
	case wfFail:
		return "fail:" + codeStepFailed
	case wfRetry:
		if op.Fails < op.Max {
			return fmt.Sprintf("retry:%d@%d", op.V, op.Fails+1)
		}
		return "retry-failed:" + codeAttemptFailed
	case wfSleep:
		return "sleep"
	case wfKey:
		return fmt.Sprintf("key:%d", op.V)
	case wfChild:
		switch op.Child {
		case wfChildOK:
			return fmt.Sprintf("child:%d", op.V)
		case wfChildFails:
			return "child-failed:" + codeChildFailed
		}
		return "child-cancelled"
	}
	return fmt.Sprintf("run:%d", op.V)
}

// wfWant is an outcome a plan determines: a completed one's result, or a
// failed one's code and message, or a cancellation.
type wfWant struct {
	status    execstore.Status
	result    string
	code, msg string
}

// wfExpect returns the outcome of a parent that follows p.
func wfExpect(p wfPlan) wfWant {
	trail := make([]string, len(p.Ops))
	for i, op := range p.Ops {
		trail[i] = wfEntry(op)
	}
	done := strings.Join(trail, " ")
	switch p.End {
	case wfEndFail:
		return wfWant{status: execstore.StatusFailed, code: codeWorkflowFailed, msg: wfFailure(done)}
	case wfEndPanic:
		return wfWant{status: execstore.StatusFailed, code: workflow.CodeWorkflowPanic, msg: "workflow: panic: " + wfPanic(done)}
	}
	raw, _ := json.Marshal(wfResult{Trail: trail})
	return wfWant{status: execstore.StatusCompleted, result: string(raw)}
}

// wfExpectChild returns the outcome of a child of kind.
func wfExpectChild(kind string, v int) wfWant {
	switch kind {
	case wfChildOK:
		raw, _ := json.Marshal(wfChildResult{V: v})
		return wfWant{status: execstore.StatusCompleted, result: string(raw)}
	case wfChildFails:
		return wfWant{status: execstore.StatusFailed, code: codeChildFailed, msg: wfChildFailure}
	}
	return wfWant{status: execstore.StatusCancelled}
}

func wfFailure(trail string) string { return "sim: planned failure after [" + trail + "]" }
func wfPanic(trail string) string   { return "sim: planned panic after [" + trail + "]" }

const wfChildFailure = "sim: the child failed as planned"

// check returns a violation if rec's outcome is not w.
func (w wfWant) check(rec execstore.Record) error {
	o := rec.Outcome
	switch {
	case rec.Status != w.status || o == nil:
		return violationf("%s ended %s, its plan says %s", rec.ExecutionID, rec.Status, w.status)
	case w.status == execstore.StatusCompleted && string(o.Result) != w.result:
		return violationf("%s completed with %s, its plan says %s", rec.ExecutionID, o.Result, w.result)
	case w.status == execstore.StatusFailed && (o.Error == nil || o.Error.Code != w.code || o.Error.Message != w.msg):
		return violationf("%s failed with %+v, its plan says code %s, message %q", rec.ExecutionID, o.Error, w.code, w.msg)
	}
	return nil
}
