package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
)

// Options configure a Worker.
type Options struct {
	// Now is ignored.
	//
	// Deprecated: a worker takes every time from its store
	// (execstore.Store.Now), so that it and the store agree on when a wake is
	// due even when clocks disagree; see the package documentation, "Time".
	// Set the clock with execstore.Options.Now or Options.Clock.
	Now func() time.Time
	// Logger receives the worker's logs (panics with their stacks,
	// unregistered workflows). Nil discards them.
	Logger *slog.Logger
	// Queues are queues the worker serves beside its workflows' own (see
	// Worker.Queues): name those that executions of its workflows are
	// admitted to by name (execstore.AdmitRequest.Queue,
	// TriggerRequest.Queue).
	Queues []string
}

// Worker runs registered workflows. It is a dispatcher.Invoker: give it to
// dispatcher.New, which delivers due executions to it.
type Worker struct {
	store  *execstore.Store
	logger *slog.Logger

	mu        sync.RWMutex
	workflows map[string]runFunc
	extra     []string // Options.Queues
}

// Queues returns the queues the worker serves, sorted: each registered
// workflow's own queue (the queue named after its ID, which executions
// admitted without a queue are in) and Options.Queues. Give them to the
// dispatcher (dispatcher.Options.Queues) so that it claims only what this
// worker can run: another worker's workflows, in their own queues, never
// reach it. Call it after registering.
func (w *Worker) Queues() []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	out := slices.AppendSeq(slices.Clone(w.extra), maps.Keys(w.workflows))
	slices.Sort(out)
	return slices.Compact(out)
}

// runFunc runs a workflow function with JSON params and returns its JSON
// result.
type runFunc func(x *Execution, params json.RawMessage) (json.RawMessage, error)

var _ dispatcher.Invoker = (*Worker)(nil)

// NewWorker returns a worker with no workflows, writing to store.
func NewWorker(store *execstore.Store, opts Options) *Worker {
	w := &Worker{store: store, logger: opts.Logger, workflows: make(map[string]runFunc), extra: slices.Clone(opts.Queues)}
	if w.logger == nil {
		w.logger = slog.New(slog.DiscardHandler)
	}
	return w
}

// Register makes w run fn for executions of workflowID. Params are decoded
// from the execution's JSON params into P (absent params leave P's zero
// value); the result is encoded as JSON. Register workflows BEFORE starting
// the dispatcher: an execution of an unregistered workflow is released and
// retried later (it may be a deployment mistake, not the execution's fault).
// Registering an ID twice panics.
func Register[P, R any](w *Worker, workflowID string, fn func(x *Execution, params P) (R, error)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.workflows[workflowID]; dup || workflowID == "" {
		panic(fmt.Sprintf("workflow: Register(%q): the ID is empty or already registered", workflowID))
	}
	w.workflows[workflowID] = func(x *Execution, raw json.RawMessage) (json.RawMessage, error) {
		var p P
		if raw != nil {
			if err := json.Unmarshal(raw, &p); err != nil {
				return nil, coded("InvalidParamsError", CodeInvalidParams, err, "params of %s do not decode into %T: %v", workflowID, p, err)
			}
		}
		r, err := fn(x, p)
		if err != nil {
			return nil, err
		}
		out, err := json.Marshal(r)
		if err != nil {
			return nil, invalidValue(execstore.WorkflowResultStepKey, err)
		}
		return out, nil
	}
}

// Invoke runs one delivery of an execution: its workflow function from the
// top, with every finished step returning its saved result. It implements
// dispatcher.Invoker.
//
// It returns an outcome for what the workflow did (completed, failed,
// suspended) and an error when the delivery could not run to an outcome:
// the workflow is not registered, or the store refused a write (a lost
// lease, a closed or failed store). Then nothing is acknowledged.
func (w *Worker) Invoke(ctx context.Context, d dispatcher.Delivery) (execstore.RunOutcome, error) {
	w.mu.RLock()
	fn, ok := w.workflows[d.WorkflowID]
	w.mu.RUnlock()
	if !ok {
		w.logger.Error("workflow: no workflow is registered under this ID; the execution will be retried", "workflow_id", d.WorkflowID, "execution_id", d.ExecutionID)
		return execstore.RunOutcome{}, fmt.Errorf("workflow: %q is not registered with this worker", d.WorkflowID)
	}
	x := &Execution{ctx: ctx, w: w, d: d, keys: make(map[string]string)}
	result, err := x.call(fn)
	return x.outcome(result, err)
}

// call runs the workflow function, turning a panic into a PanicError.
func (x *Execution) call(fn runFunc) (result json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			pe := &PanicError{Value: p, Stack: debug.Stack()}
			x.w.logger.Error("workflow: the workflow panicked", "execution_id", x.d.ExecutionID, "panic", p, "stack", string(pe.Stack))
			result, err = nil, pe
		}
	}()
	return fn(x, x.d.Params)
}

// outcome decides how the delivery ended. An abort (the store refused a
// write, the lease was lost) wins over anything the function returned: its
// steps may not have been saved, so no outcome may be recorded.
func (x *Execution) outcome(result json.RawMessage, err error) (execstore.RunOutcome, error) {
	if x.aborted != nil {
		return execstore.RunOutcome{}, x.aborted
	}
	if cause := context.Cause(x.ctx); cause != nil {
		return execstore.RunOutcome{}, cause
	}
	var pe *PanicError
	if errors.As(err, &pe) {
		return execstore.Failed(err), nil
	}
	if s := x.suspended; s != nil {
		if errors.Is(err, ErrSuspended) {
			return execstore.Suspended(), nil
		}
		return execstore.Failed(coded("SuspensionSwallowedError", CodeSuspensionSwallowed, err,
			"%s(%q) suspended the execution, but the workflow function returned %v instead of the suspension", s.op, s.key, describe(err))), nil
	}
	if errors.Is(err, ErrSuspended) {
		// A suspension from somewhere else: nothing asked for a wake, so
		// suspending would never end.
		return execstore.Failed(coded("SuspensionSwallowedError", CodeSuspensionSwallowed, err,
			"the workflow function returned a suspension that none of its operations made in this run")), nil
	}
	if err != nil {
		return execstore.Failed(err), nil
	}
	return execstore.Completed(result), nil
}

func describe(err error) string {
	if err == nil {
		return "a result"
	}
	return fmt.Sprintf("the error %q", err.Error())
}
