package workflow

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/execstore/execstore"
)

// Start starts a child execution of workflowID with params, once: the store
// records the start under (this execution, key), so a rerun gets the same
// child ID and starts nothing. A rerun with a different workflow ID or params
// gets execstore.ErrStartRequestMismatch. The child gets the parent's context
// (EventContext) and is due at once; when it ends, the store wakes the parent.
//
// params is encoded like TriggerRequest.Params. The child is in its own
// workflow's queue, which the workers that registered that workflow serve;
// StartIn names another.
func (x *Execution) Start(key, workflowID string, params any) (string, error) {
	return x.StartIn(key, "", workflowID, params)
}

// StartIn is Start with the child's queue named (execstore.StartRequest.Queue):
// "" is the child workflow's own.
func (x *Execution) StartIn(key, queue, workflowID string, params any) (string, error) {
	if err := x.begin("Start", key); err != nil {
		return "", err
	}
	raw, err := encodeParams(params)
	if err != nil {
		return "", err
	}
	id, err := x.store().StartWith(x.ctx, x.d.Lease, execstore.StartRequest{StepKey: key, WorkflowID: workflowID, Params: raw, Queue: queue})
	switch {
	case err == nil:
		return id, nil
	case errors.Is(err, execstore.ErrStartRequestMismatch), errors.Is(err, execstore.ErrInvalidExecutionEvent):
		return "", err // the workflow's own doing: the same on every rerun
	}
	return "", x.abort("Start", key, err)
}

// Await returns the outcome of a child this execution started: its result
// decoded into R, or a *ChildError with its recorded error; a cancelled
// child's matches execstore.ErrCancelled (errors.Is). Until the child
// ends, Await suspends (returning an error matching ErrSuspended, which the
// workflow function MUST return); the store wakes this execution when the
// child ends, and the rerun's Await returns the outcome. The outcome is read
// from the child's immutable record, so every rerun sees the same one.
func Await[R any](x *Execution, childID string) (R, error) {
	var zero R
	op := "Await"
	if err := x.interrupted(op, childID); err != nil {
		return zero, err
	}
	rec, err := x.store().Get(x.ctx, childID)
	switch {
	case errors.Is(err, execstore.ErrExecutionNotFound):
		return zero, coded("NotAChildError", CodeNotAChild, err, "Await(%q): no such execution", childID)
	case err != nil:
		return zero, x.abort(op, childID, err)
	case rec.Parent == nil || rec.Parent.ExecutionID != x.ID():
		return zero, coded("NotAChildError", CodeNotAChild, nil, "Await(%q): this execution did not start it, so nothing would wake it when it ends", childID)
	case !rec.Status.Terminal():
		return zero, x.suspend(op, childID, "waiting for the child to end")
	}
	v, err := Result[R](rec)
	var failed *execstore.WorkflowError
	if errors.As(err, &failed) && failed == rec.Outcome.Error {
		return zero, &ChildError{ChildID: childID, WorkflowID: rec.WorkflowID, Err: failed}
	}
	return v, err
}

// Call starts a child (Start) and waits for its outcome (Await).
func Call[R any](x *Execution, key, workflowID string, params any) (R, error) {
	id, err := x.Start(key, workflowID, params)
	if err != nil {
		var zero R
		return zero, err
	}
	return Await[R](x, id)
}

// encodeParams encodes params for an admission or a child start: nil means
// no params, a json.RawMessage is used byte for byte, anything else is
// encoded with encoding/json. The store requires a JSON object.
func encodeParams(params any) (json.RawMessage, error) {
	switch p := params.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return p, nil
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("workflow: params: %w (%w)", err, execstore.ErrInvalidExecutionEvent)
	}
	return raw, nil
}
