package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/execstore/execstore"
)

// Client triggers executions and waits for their outcomes.
type Client struct {
	store *execstore.Store
}

// NewClient returns a client of store.
func NewClient(store *execstore.Store) *Client { return &Client{store: store} }

// TriggerRequest is an execution to trigger.
type TriggerRequest struct {
	// ExecutionID names the execution; "" lets the store choose a new one.
	// Build it from what makes the request unique (an order number) so that
	// a repeated trigger is refused instead of running twice.
	ExecutionID string
	// WorkflowID names the registered workflow to run. Required.
	WorkflowID string
	// Params are the execution's params: nil for none, a json.RawMessage
	// byte for byte, anything else encoded with encoding/json. They must
	// encode to a JSON object.
	Params any
	// Context is stored with the execution and handed to its children.
	Context map[string]string
	// Queue is the execution's queue (execstore.AdmitRequest.Queue): ""
	// is the workflow's own, which a worker that registered the workflow
	// serves (Worker.Queues).
	Queue string
	// Priority, Deadline and ConcurrencyKey are the execution's, as
	// execstore.AdmitRequest's: its claim order in its queue, when it fails
	// unless it has ended, and the key its queue's KeyLimit counts (a
	// customer, so that one customer's executions run one at a time).
	Priority       int
	Deadline       time.Time
	ConcurrencyKey string
}

// Trigger admits an execution and returns its ID once the admission is
// durable; it does not wait for the execution to run. An ID that was ever
// used returns execstore.ErrExecutionIDConflict: nothing is queued, and the
// existing execution is untouched (build a new ID for a new request).
func (c *Client) Trigger(ctx context.Context, req TriggerRequest) (string, error) {
	raw, err := encodeParams(req.Params)
	if err != nil {
		return "", err
	}
	return c.store.Admit(ctx, execstore.AdmitRequest{
		ExecutionID: req.ExecutionID,
		WorkflowID:  req.WorkflowID,
		Params:      raw,
		Context:     req.Context,
		Queue:       req.Queue,

		Priority:       req.Priority,
		Deadline:       req.Deadline,
		ConcurrencyKey: req.ConcurrencyKey,
	})
}

// TriggerAndWait triggers an execution and waits for its terminal record. It
// waits on the durable record (execstore.Store.Await), so if this process
// restarts, Wait with the same ID on the reopened store picks up where it
// left off. The returned error is about triggering or waiting; how the
// execution ended is in the record (see Result).
func (c *Client) TriggerAndWait(ctx context.Context, req TriggerRequest) (execstore.Record, error) {
	id, err := c.Trigger(ctx, req)
	if err != nil {
		return execstore.Record{}, err
	}
	return c.Wait(ctx, id)
}

// Wait waits for an execution's terminal record.
func (c *Client) Wait(ctx context.Context, executionID string) (execstore.Record, error) {
	return c.store.Await(ctx, executionID)
}

// Result decodes a terminal record's outcome: a completed execution's result
// into R, or a failed or cancelled one's recorded error (an
// *execstore.WorkflowError; a cancelled one's matches execstore.ErrCancelled
// and carries the reason as its message). A record that is not terminal yet
// is an error.
func Result[R any](rec execstore.Record) (R, error) {
	var v R
	if !rec.Status.Terminal() || rec.Outcome == nil {
		return v, fmt.Errorf("workflow: execution %s has not ended (it is %s)", rec.ExecutionID, rec.Status)
	}
	if rec.Outcome.Status == execstore.StatusFailed || rec.Outcome.Status == execstore.StatusCancelled {
		if rec.Outcome.Error == nil {
			return v, fmt.Errorf("workflow: execution %s %s without a recorded error", rec.ExecutionID, rec.Outcome.Status)
		}
		return v, rec.Outcome.Error
	}
	if rec.Outcome.Result == nil {
		return v, nil
	}
	if err := json.Unmarshal(rec.Outcome.Result, &v); err != nil {
		return v, recordError(invalidValue(execstore.WorkflowResultStepKey, err))
	}
	return v, nil
}
