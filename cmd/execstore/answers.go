package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strconv"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/jsonv"
)

// Answers that say what happened, and the routes that give a worker in
// another language what the Go API gives: acknowledgements in batches, an
// execution's saved steps, and a check of an outcome before it is recorded.

func (a *api) answerRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/leases/acknowledge-batch", a.acknowledgeBatch)
	mux.HandleFunc("POST /v1/leases/acknowledge-and-claim", a.acknowledgeAndClaim)
	mux.HandleFunc("GET /v1/executions/{id}/steps", a.listSteps)
	mux.HandleFunc("POST /v1/outcomes/check", a.checkOutcome)
	a.openAPIRoute(mux) // openapi.go
}

// acknowledgedJSON is an acknowledgement's answer: the record afterwards and
// whether this acknowledgement recorded its outcome. applied is false for a
// late or repeated acknowledgement that found the execution terminal
// already: the record holds the outcome recorded before.
type acknowledgedJSON struct {
	recordJSON
	Applied bool `json:"applied"`
}

func acknowledgedOut(res execstore.AckResult) acknowledgedJSON {
	return acknowledgedJSON{recordJSON: recordOut(res.Record), Applied: res.Applied}
}

// stepSavedJSON is a step save's answer: whether this request saved its
// value, and the value kept (the first one saved under the key).
type stepSavedJSON struct {
	Applied bool            `json:"applied"`
	Value   json.RawMessage `json:"value"`
}

func (o *outcomeJSON) runOutcome() execstore.RunOutcome {
	out := execstore.RunOutcome{Status: o.Status, Result: o.Result}
	if e := o.Error.workflowError(); e != nil {
		out.Err = e
	}
	return out
}

func outcomeOut(o execstore.Outcome) outcomeJSON {
	return outcomeJSON{Status: o.Status, Result: o.Result, Error: errorOut(o.Error)}
}

// failAdmission answers a refused admission. A conflict says whether the
// execution that holds the ID was admitted with this request's event, so a
// client that retried after losing the first answer knows that the first
// attempt was admitted. The server keeps every record whole (it runs
// without retention), so the comparison always has the event to compare.
func (a *api) failAdmission(w http.ResponseWriter, r *http.Request, body *admitBody, err error) {
	if !errors.Is(err, execstore.ErrExecutionIDConflict) {
		a.fail(w, err)
		return
	}
	out := errorJSONBody{Code: "EXECUTION_ID_CONFLICT", Message: err.Error()}
	if rec, getErr := a.store.Get(r.Context(), body.ExecutionID); getErr == nil {
		same := sameEvent(&rec, body)
		out.SameEvent = &same
	}
	writeJSON(w, http.StatusConflict, out)
}

// sameEvent reports whether rec was admitted with body's workflow, params
// (in canonical form: key order and insignificant whitespace aside),
// context (none and an empty one alike) and attempt bound.
func sameEvent(rec *execstore.Record, body *admitBody) bool {
	if rec.WorkflowID != body.WorkflowID || rec.MaxAttempts != body.MaxAttempts || !maps.Equal(rec.Context, body.Context) {
		return false
	}
	if rec.Params == nil || body.Params == nil {
		return rec.Params == nil && body.Params == nil
	}
	had, err1 := jsonv.Canonical(nil, rec.Params)
	sent, err2 := jsonv.Canonical(nil, body.Params)
	return err1 == nil && err2 == nil && bytes.Equal(had, sent)
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
	acks := make([]execstore.Ack, len(body.Acknowledgements))
	for i, b := range body.Acknowledgements {
		acks[i] = execstore.Ack{Lease: b.Lease.lease(), Outcome: b.Outcome.runOutcome()}
	}
	results, err := a.store.AcknowledgeBatch(r.Context(), acks)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": ackResultsOut(results)})
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
	acks := make([]execstore.Ack, len(body.Acknowledgements))
	for i, b := range body.Acknowledgements {
		acks[i] = execstore.Ack{Lease: b.Lease.lease(), Outcome: b.Outcome.runOutcome()}
	}
	results, leases, err := a.store.AcknowledgeAndClaim(r.Context(), acks, body.Limit, body.LeaseDurationMs.duration())
	if err != nil {
		a.fail(w, err)
		return
	}
	out := make([]leaseJSON, len(leases))
	for i, l := range leases {
		out[i] = leaseOut(l)
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": ackResultsOut(results), "leases": out, "now": a.store.Now()})
}

// Bounds of one page of GET /v1/executions/{id}/steps.
const (
	stepsPageDefault = 100
	stepsPageMax     = 1000
	stepsPageBytes   = 4 << 20 // the values' total; a page holds at least one step
)

type savedStepJSON struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// listSteps answers a page of an execution's saved steps in key order:
// ?after=KEY starts after that key, ?limit=N (1 to 1000, default 100) bounds
// the count, and the values of one page stop at about 4 MiB. "next", present
// when more steps remain, is the after of the next page.
func (a *api) listSteps(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := stepsPageDefault
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil || n < 1:
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "limit must be a whole number from 1 to 1000")
			return
		case n > stepsPageMax:
			writeError(w, http.StatusUnprocessableEntity, "LIMIT_EXCEEDED", "limit is more than the limit of 1000")
			return
		}
		limit = n
	}
	steps, more, err := a.store.ListSteps(r.Context(), r.PathValue("id"), q.Get("after"), limit, stepsPageBytes)
	if err != nil {
		a.fail(w, err)
		return
	}
	out := struct {
		Steps []savedStepJSON `json:"steps"`
		Next  *string         `json:"next,omitempty"`
	}{Steps: make([]savedStepJSON, len(steps))}
	for i, s := range steps {
		out.Steps[i] = savedStepJSON{Key: s.Key, Value: s.Value}
	}
	if more {
		out.Next = &steps[len(steps)-1].Key
	}
	writeJSON(w, http.StatusOK, out)
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
