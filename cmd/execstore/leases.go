package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/execstore/execstore"
)

// The leases: claiming due executions, renewing and releasing a lease,
// acknowledging how a delivery ended (alone, in a batch, or with the next
// claim in the same write of the log), checking an outcome before it is
// recorded, and starting a child under a lease.

type leaseJSON struct {
	ExecutionID string    `json:"executionId"`
	Token       uint64    `json:"token"`
	ExpiresAt   time.Time `json:"expiresAt"`
}

func leaseOut(l execstore.Lease) leaseJSON {
	return leaseJSON{ExecutionID: l.ExecutionID, Token: l.Token, ExpiresAt: l.ExpiresAt}
}

// leaseRefJSON is a lease as a worker sends it back: the execution and the
// token name it. expiresAt may come back as it was received, at any
// precision (a client that holds milliseconds rounds it), and is not read.
type leaseRefJSON struct {
	ExecutionID string    `json:"executionId"`
	Token       uint64    `json:"token"`
	ExpiresAt   time.Time `json:"expiresAt,omitempty"`
}

func (l leaseRefJSON) lease() execstore.Lease {
	return execstore.Lease{ExecutionID: l.ExecutionID, Token: l.Token}
}

type claimBody struct {
	Limit           int    `json:"limit"`
	LeaseDurationMs millis `json:"leaseDurationMs"`
	// WithExecutions asks for each lease's execution as a delivery needs it
	// (deliveries.go), so that running it takes no further read.
	WithExecutions bool `json:"withExecutions,omitempty"`
	// WaitMs, when nothing is due, holds the claim until something is, for
	// up to this long (claimWaiting).
	WaitMs millis `json:"waitMs,omitempty"`
	// RequestKey makes a retry answer the same leases
	// (execstore.ClaimRequest.RequestKey); absent: none, "" is refused.
	RequestKey *string `json:"requestKey,omitempty"`
	// Queues names the queues the claim serves
	// (execstore.ClaimRequest.Queues); absent or empty: every queue.
	Queues []string `json:"queues,omitempty"`
}

// claimRequest is the store's claim request for a body's arguments.
func claimRequest(limit int, leaseDuration millis, key *string, queues []string) execstore.ClaimRequest {
	req := execstore.ClaimRequest{Limit: limit, LeaseDuration: leaseDuration.duration(), Queues: queues}
	if key != nil {
		req.RequestKey = *key
	}
	return req
}

// checkRequestKey refuses an empty request key: a client's missing value
// sent as "" would otherwise turn the retry's safety off unseen.
func (a *api) checkRequestKey(w http.ResponseWriter, key *string) bool {
	if key != nil && *key == "" {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "requestKey is empty: leave it out for a claim without one")
		return false
	}
	return true
}

func (a *api) claim(w http.ResponseWriter, r *http.Request) {
	var body claimBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	if !a.checkWait(w, body.WaitMs) || !a.checkRequestKey(w, body.RequestKey) {
		return
	}
	req := claimRequest(body.Limit, body.LeaseDurationMs, body.RequestKey, body.Queues)
	claim := func() ([]execstore.Lease, error) {
		return a.store.Claim(r.Context(), req)
	}
	leases, err := a.claimWaiting(r.Context(), claim, claim, body.WaitMs.duration(), req.Queues)
	if err != nil {
		a.fail(w, err)
		return
	}
	out := make([]leaseJSON, len(leases))
	for i, l := range leases {
		out[i] = leaseOut(l)
	}
	// now is the store's time after the claim (Store.Now): a worker decides
	// with it, not with its own clock, whether a wake it waits for has come.
	answer := map[string]any{"leases": out, "now": a.store.Now()}
	if body.WithExecutions {
		if d := a.deliveries(r.Context(), leases); d != nil {
			answer["executions"] = d
		}
	}
	writeJSON(w, http.StatusOK, answer)
}

type renewBody struct {
	Lease           leaseRefJSON `json:"lease"`
	LeaseDurationMs millis       `json:"leaseDurationMs"`
}

func (a *api) renew(w http.ResponseWriter, r *http.Request) {
	var body renewBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	l, err := a.store.Renew(r.Context(), body.Lease.lease(), body.LeaseDurationMs.duration())
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, leaseOut(l))
}

type releaseBody struct {
	Lease        leaseRefJSON `json:"lease"`
	RetryAfterMs millis       `json:"retryAfterMs"`
	Error        *errorJSON   `json:"error,omitempty"` // why the delivery ended (Store.ReleaseWithCause)
}

func (a *api) release(w http.ResponseWriter, r *http.Request) {
	var body releaseBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	var cause error
	if e := body.Error.workflowError(); e != nil {
		cause = e
	}
	if err := a.store.ReleaseWithCause(r.Context(), body.Lease.lease(), body.RetryAfterMs.duration(), cause); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "released"})
}

type acknowledgeBody struct {
	Lease   leaseRefJSON `json:"lease"`
	Outcome outcomeJSON  `json:"outcome"`
}

// acknowledgedJSON is an acknowledgement's answer: the record afterwards and
// whether the outcome recorded is this acknowledgement's (AckResult.Applied
// and Replayed): applied is false for a late acknowledgement that found the
// execution terminal with another outcome; a repeat of the one that recorded
// it is applied and replayed.
type acknowledgedJSON struct {
	recordJSON
	Applied  bool `json:"applied"`
	Replayed bool `json:"replayed,omitempty"`
}

func acknowledgedOut(res execstore.AckResult) acknowledgedJSON {
	return acknowledgedJSON{recordJSON: recordOut(res.Record), Applied: res.Applied, Replayed: res.Replayed}
}

func (o *outcomeJSON) runOutcome() execstore.RunOutcome {
	out := execstore.RunOutcome{Status: o.Status, Result: o.Result}
	if e := o.Error.workflowError(); e != nil {
		out.Err = e
	}
	return out
}

func (a *api) acknowledge(w http.ResponseWriter, r *http.Request) {
	var body acknowledgeBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	// A batch of one is Acknowledge, and also says whether it was applied.
	res, err := a.store.AcknowledgeBatch(r.Context(), []execstore.Ack{{Lease: body.Lease.lease(), Outcome: body.Outcome.runOutcome()}})
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, acknowledgedOut(res[0]))
}

type acknowledgeBatchBody struct {
	Acknowledgements []acknowledgeBody `json:"acknowledgements"`
}

// ackResultJSON is one acknowledgement's answer in a batch: what
// /v1/leases/acknowledge would answer for it alone, its record with applied,
// or its error.
type ackResultJSON struct {
	*acknowledgedJSON
	*errorJSONBody
}

// acknowledgeBatch acknowledges several deliveries in one call: they share
// the log's entries and its fsync, and each gets its own answer, in order.
func (a *api) acknowledgeBatch(w http.ResponseWriter, r *http.Request) {
	var body acknowledgeBatchBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	acks, merge := batchAcks(body.Acknowledgements)
	results, err := a.store.AcknowledgeBatch(r.Context(), acks)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": ackResultsOut(merge(results))})
}

// ackResultsOut is each acknowledgement's answer in a batch.
func ackResultsOut(results []execstore.AckResult) []ackResultJSON {
	out := make([]ackResultJSON, len(results))
	for i, res := range results {
		if res.Err != nil {
			code, _ := statusOf(res.Err)
			out[i].errorJSONBody = &errorJSONBody{Code: code, Message: res.Err.Error()}
			continue
		}
		ack := acknowledgedOut(res)
		out[i].acknowledgedJSON = &ack
	}
	return out
}

type acknowledgeAndClaimBody struct {
	Acknowledgements []acknowledgeBody `json:"acknowledgements"`
	Limit            int               `json:"limit"`
	LeaseDurationMs  millis            `json:"leaseDurationMs"`
	WithExecutions   bool              `json:"withExecutions,omitempty"` // as claimBody's
	WaitMs           millis            `json:"waitMs,omitempty"`         // as claimBody's
	RequestKey       *string           `json:"requestKey,omitempty"`     // as claimBody's
	Queues           []string          `json:"queues,omitempty"`         // as claimBody's
}

// acknowledgeAndClaim acknowledges deliveries and claims more in one batch
// of the log (Store.AcknowledgeAndClaim): one fsync for a worker's round.
// It answers as /v1/leases/acknowledge-batch and /v1/claims would, in one
// body.
func (a *api) acknowledgeAndClaim(w http.ResponseWriter, r *http.Request) {
	var body acknowledgeAndClaimBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	if !a.checkWait(w, body.WaitMs) || !a.checkRequestKey(w, body.RequestKey) {
		return
	}
	acks, merge := batchAcks(body.Acknowledgements)
	req := claimRequest(body.Limit, body.LeaseDurationMs, body.RequestKey, body.Queues)
	var results []execstore.AckResult
	acked := false
	first := func() (leases []execstore.Lease, err error) {
		results, leases, err = a.store.AcknowledgeAndClaimWith(r.Context(), acks, req)
		acked = err == nil
		return leases, err
	}
	again := func() ([]execstore.Lease, error) {
		return a.store.Claim(r.Context(), req)
	}
	leases, err := a.claimWaiting(r.Context(), first, again, body.WaitMs.duration(), req.Queues)
	if err != nil && !acked {
		a.fail(w, err)
		return
	}
	// A claim that failed after the acknowledgements were written (the store
	// closed, or stopped leading, while the request waited for work) has
	// claimed nothing, and the answer must still say what the
	// acknowledgements did: an error here would make the worker send them
	// again and read its own writes as a stale worker's.
	out := make([]leaseJSON, len(leases))
	for i, l := range leases {
		out[i] = leaseOut(l)
	}
	answer := map[string]any{"results": ackResultsOut(merge(results)), "leases": out, "now": a.store.Now()}
	if body.WithExecutions {
		if d := a.deliveries(r.Context(), leases); d != nil {
			answer["executions"] = d
		}
	}
	writeJSON(w, http.StatusOK, answer)
}

type checkOutcomeBody struct {
	Outcome outcomeJSON `json:"outcome"`
}

// checkOutcome answers the outcome that acknowledging this one would record,
// writing nothing: a completed result the store cannot keep (over the value
// limit) comes back failed with code INVALID_STEP_VALUE, as the
// acknowledgement would record it.
func (a *api) checkOutcome(w http.ResponseWriter, r *http.Request) {
	var body checkOutcomeBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	o, err := a.store.CheckOutcome(body.Outcome.runOutcome())
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]outcomeJSON{"outcome": outcomeOut(o)})
}

type startBody struct {
	Lease      leaseRefJSON    `json:"lease"`
	StepKey    string          `json:"stepKey"`
	WorkflowID string          `json:"workflowId"`
	Params     json.RawMessage `json:"params,omitempty"`
	Queue      *string         `json:"queue,omitempty"` // the child's (execstore.StartRequest.Queue); "" is refused
	Deadline   *time.Time      `json:"deadline,omitempty"`
	// ConcurrencyKey: the child's; nil, none; "" is refused.
	ConcurrencyKey *string `json:"concurrencyKey,omitempty"`
}

func (a *api) start(w http.ResponseWriter, r *http.Request) {
	var body startBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	queue, ok := queueArg(w, body.Queue, execstore.ErrInvalidExecutionEvent)
	if !ok {
		return
	}
	key, ok := keyArg(w, body.ConcurrencyKey, execstore.ErrInvalidExecutionEvent)
	if !ok {
		return
	}
	id, err := a.store.StartWith(r.Context(), body.Lease.lease(),
		execstore.StartRequest{StepKey: body.StepKey, WorkflowID: body.WorkflowID, Params: body.Params, Queue: queue, Deadline: timeArg(body.Deadline),
			ConcurrencyKey: key})
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"executionId": id})
}

// bodyChecker is a request body with a rule beyond its fields' own: decode
// applies it after the walk, and answers its error as 400.
type bodyChecker interface{ checkBody() error }

// check applies an outcome's rule, which its fields cannot say alone: a
// result only with completed, an error with failed and only with it. path
// names the outcome in the body.
func (o *outcomeJSON) check(path string) error {
	switch o.Status {
	case execstore.StatusSuspended, execstore.StatusCompleted, execstore.StatusFailed:
	default:
		return &bodyError{fmt.Sprintf("%q must be suspended, completed or failed, not %q", path+".status", o.Status)}
	}
	if o.Result != nil && o.Status != execstore.StatusCompleted {
		return &bodyError{fmt.Sprintf("%q is only for a completed outcome, not a %s one", path+".result", o.Status)}
	}
	if (o.Error != nil) != (o.Status == execstore.StatusFailed) {
		if o.Error == nil {
			return &bodyError{fmt.Sprintf("missing required field %q in %q (a failed outcome needs one)", "error", path)}
		}
		return &bodyError{fmt.Sprintf("%q is only for a failed outcome, not a %s one", path+".error", o.Status)}
	}
	return nil
}

func (b *acknowledgeBody) checkBody() error { return b.Outcome.check("outcome") }

func (b *checkOutcomeBody) checkBody() error { return b.Outcome.check("outcome") }

// batchAcks converts a batch's acknowledgements for the store. One whose
// outcome breaks the outcome rule is not passed on: it gets its own error
// (INVALID_ARGUMENT), as the store answers an acknowledgement it refuses,
// and the others go ahead. merge puts the store's answers and those errors
// back in the batch's order.
func batchAcks(body []acknowledgeBody) (acks []execstore.Ack, merge func([]execstore.AckResult) []execstore.AckResult) {
	var refused map[int]error
	acks = make([]execstore.Ack, 0, len(body))
	for i, b := range body {
		if err := b.Outcome.check(fmt.Sprintf("acknowledgements[%d].outcome", i)); err != nil {
			if refused == nil {
				refused = map[int]error{}
			}
			refused[i] = fmt.Errorf("%w: %s", execstore.ErrInvalidArgument, err.Error())
			continue
		}
		acks = append(acks, execstore.Ack{Lease: b.Lease.lease(), Outcome: b.Outcome.runOutcome()})
	}
	merge = func(results []execstore.AckResult) []execstore.AckResult {
		if refused == nil {
			return results
		}
		all := make([]execstore.AckResult, len(body))
		for i := range all {
			if err, ok := refused[i]; ok {
				all[i].Err = err
				continue
			}
			all[i], results = results[0], results[1:]
		}
		return all
	}
	return acks, merge
}

// claimWaitMax caps a claim's waitMs, as ?wait= of GET /v1/changes is
// capped: a waiting claim holds a connection and a goroutine.
const claimWaitMax = changesWaitMax

// checkWait answers 422 for a claim's waitMs over claimWaitMax.
func (a *api) checkWait(w http.ResponseWriter, wait millis) bool {
	if wait.duration() > claimWaitMax {
		writeError(w, http.StatusUnprocessableEntity, "LIMIT_EXCEEDED", fmt.Sprintf("waitMs is longer than the limit of %d", claimWaitMax.Milliseconds()))
		return false
	}
	return true
}

// claimWaiting runs first, a claim (with acknowledgements before it, for
// acknowledge-and-claim). If it leased nothing and wait is positive, it
// waits until an execution may have become due (the store's DueChanged, or
// the time of the earliest pending wake of the queues it claims from), at most wait in all, and claims
// again with again, until a claim leases something or the wait is over. A
// request that ends while it waits has claimed nothing, and so has one
// waiting when the server starts shutting down: it answers at once, so that
// the shutdown does not wait for it.
func (a *api) claimWaiting(ctx context.Context, first, again func() ([]execstore.Lease, error), wait time.Duration, queues []string) ([]execstore.Lease, error) {
	deadline := time.Now().Add(wait)
	claim := first
	for {
		changed := a.store.DueChanged() // before the claim, so that no change between is missed
		leases, err := claim()
		if err != nil || len(leases) > 0 || wait <= 0 {
			return leases, err
		}
		claim = again
		left := time.Until(deadline)
		if left <= 0 {
			return leases, nil
		}
		if next, err := a.store.NextDueIn(ctx, queues); err == nil && !next.IsZero() {
			left = min(left, max(next.Sub(a.store.Now()), time.Millisecond))
		}
		t := time.NewTimer(left)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return leases, nil
		case <-a.drain:
			t.Stop()
			return leases, nil
		}
		t.Stop()
	}
}
