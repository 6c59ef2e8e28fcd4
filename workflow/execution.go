package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
)

// Execution is one delivery of a running execution, as its workflow function
// sees it. Every durable operation (Run, Sleep, Start, Await, WaitForKey,
// Poll) goes through it, under the delivery's lease.
//
// An Execution is used by the workflow function's goroutine only: it is not
// safe for concurrent use, and its operations may not be called from inside
// a step function.
type Execution struct {
	ctx context.Context
	w   *Worker
	d   dispatcher.Delivery

	keys      map[string]string // operation key → the operation that used it in this run
	inStep    bool
	suspended *suspension // set by the first suspension; every later operation returns it
	aborted   error       // set when the store refused a write; every later operation returns it
}

// ID returns the execution's ID.
func (x *Execution) ID() string { return x.d.ExecutionID }

// WorkflowID returns the workflow's ID.
func (x *Execution) WorkflowID() string { return x.d.WorkflowID }

// Attempt returns the number of deliveries of this execution so far, this one
// included. A rerun after a wake is a new delivery.
func (x *Execution) Attempt() int { return x.d.Attempt }

// EventContext returns a copy of the context map the execution was admitted
// with (a child gets its parent's).
func (x *Execution) EventContext() map[string]string { return maps.Clone(x.d.Context) }

// Context returns the delivery's context. It is cancelled, with
// execstore.ErrLeaseLost as its cause, when another worker takes the
// execution over; step functions receive it too.
func (x *Execution) Context() context.Context { return x.ctx }

func (x *Execution) store() *execstore.Store { return x.w.store }

// now is the store's time: every wake time is computed from it and compared
// with it (see the package documentation, "Time").
func (x *Execution) now() time.Time { return x.store().Now() }

// begin checks that an operation may run and claims its key for this run.
// Misuse that no rerun could fix panics (the panic fails the execution with
// the message): an empty or reserved key, a key used twice in one run, an
// operation inside a step function. After a suspension or an abort, begin
// returns it again, so a workflow that ignored one does nothing more.
func (x *Execution) begin(op, key string) error {
	if x.inStep {
		panic(fmt.Sprintf("workflow: %s(%q) was called inside a step function; steps cannot run workflow operations", op, key))
	}
	if key == "" || strings.HasPrefix(key, reservedPrefix) {
		panic(fmt.Sprintf("workflow: %s(%q): a key must be non-empty and must not start with %q", op, key, reservedPrefix))
	}
	if prev, dup := x.keys[key]; dup {
		panic(fmt.Sprintf("workflow: %s(%q): the key was already used by %s in this run; every operation needs its own key", op, key, prev))
	}
	x.keys[key] = op
	return x.interrupted(op, key)
}

// interrupted returns the suspension or abort that ended this run, if any.
func (x *Execution) interrupted(op, key string) error {
	if x.inStep {
		panic(fmt.Sprintf("workflow: %s was called inside a step function; steps cannot run workflow operations", op))
	}
	switch {
	case x.aborted != nil:
		return x.aborted
	case x.suspended != nil:
		return x.suspended
	}
	if cause := context.Cause(x.ctx); cause != nil {
		return x.abort(op, key, cause)
	}
	return nil
}

// reservedPrefix starts the step keys this package keeps for itself
// (retries, failures); user keys may not.
const reservedPrefix = "$"

func retryKey(key string, attempt int) string { return fmt.Sprintf("$retry/%s/%d", key, attempt) }
func failureKey(key string) string            { return "$error/" + key }

// suspend ends the run: the execution is acknowledged suspended, and runs
// again when a wake it requested, its child's end or a watched commit makes
// it due.
func (x *Execution) suspend(op, key, reason string) error {
	x.suspended = &suspension{op: op, key: key, reason: reason}
	return x.suspended
}

// abort ends the run without an outcome: the store refused an operation (a
// lost lease, a closed or failed store). While the context is cancelled, the
// store answers with the context's error; the cause says why.
func (x *Execution) abort(op, key string, err error) error {
	if cause := context.Cause(x.ctx); cause != nil && errors.Is(err, x.ctx.Err()) {
		err = cause
	}
	x.aborted = fmt.Errorf("workflow: %s(%q): %w", op, key, err)
	return x.aborted
}

// readStep returns a saved step value.
func (x *Execution) readStep(op, key, stepKey string) (json.RawMessage, bool, error) {
	v, ok, err := x.store().Step(x.ctx, x.ID(), stepKey)
	if err != nil {
		return nil, false, x.abort(op, key, err)
	}
	return v, ok, nil
}

// saveStep saves a step value under the lease. A value the store refuses
// (too large, too many steps) is returned as an invalid step value, which is
// the step's failure; any other refusal aborts the run.
func (x *Execution) saveStep(op, key, stepKey string, value json.RawMessage) error {
	err := x.store().SaveStep(x.ctx, x.d.Lease, stepKey, value)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, execstore.ErrInvalidArgument), errors.Is(err, execstore.ErrLimitExceeded):
		return invalidValue(key, err)
	}
	return x.abort(op, key, err)
}

// sleepUntil suspends the run until at: it requests a wake then, unless the
// store's time has reached it. A delivery the store made because a wake at
// or before its claim's time was due therefore never suspends for that wake
// again.
func (x *Execution) sleepUntil(op, key string, at time.Time, reason string) error {
	if !x.now().Before(at) {
		return nil
	}
	if _, err := x.store().RequestWake(x.ctx, x.ID(), at); err != nil {
		if errors.Is(err, execstore.ErrInvalidArgument) {
			return recordError(err) // a time the store cannot represent: the same on every rerun
		}
		return x.abort(op, key, err)
	}
	return x.suspend(op, key, reason+" until "+at.Format(time.RFC3339Nano))
}
