package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/jsonv"
)

// The executions: admission, a record, the listing, waiting for the
// outcome, wakes and watches, cancellation; and the record as every route
// that answers one writes it.

type admitBody struct {
	ExecutionID *string `json:"executionId,omitempty"` // nil (left out, or null): the store chooses

	WorkflowID  string            `json:"workflowId"`
	Params      json.RawMessage   `json:"params,omitempty"`
	Context     map[string]string `json:"context,omitempty"`
	MaxAttempts int               `json:"maxAttempts,omitempty"`
	Queue       *string           `json:"queue,omitempty"` // nil: the workflow's own; "" is refused
	Priority    int               `json:"priority,omitempty"`
	Deadline    *time.Time        `json:"deadline,omitempty"`
	// ConcurrencyKey: nil, none; "" is refused, as an empty queue is.
	ConcurrencyKey *string `json:"concurrencyKey,omitempty"`
}

// keyArg is a body's concurrency key: "" when left out. An empty string
// given is refused, as an empty queue is.
func keyArg(w http.ResponseWriter, k *string, sentinel error) (string, bool) {
	if k == nil {
		return "", true
	}
	if *k == "" {
		writeError(w, http.StatusBadRequest, execstore.ErrorCode(sentinel), "request body: concurrencyKey is empty: leave it out for none")
		return "", false
	}
	return *k, true
}

// timeArg is a body's optional time: zero when left out.
func timeArg(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// queueArg is a body's queue: "" when left out. An empty string given is
// refused (as the document's minLength says): a client's missing value sent
// as "" must not pass for a choice.
func queueArg(w http.ResponseWriter, q *string, sentinel error) (string, bool) {
	if q == nil {
		return "", true
	}
	if *q == "" {
		writeError(w, http.StatusBadRequest, execstore.ErrorCode(sentinel), "request body: queue is empty: leave it out for the workflow's own queue")
		return "", false
	}
	return *q, true
}

func (a *api) admit(w http.ResponseWriter, r *http.Request) {
	var body admitBody
	if !a.decode(w, r, &body, execstore.ErrInvalidExecutionEvent) {
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
	given := ""
	if body.ExecutionID != nil {
		given = *body.ExecutionID
		if msg := urlSegmentID(given); msg != "" {
			writeError(w, http.StatusBadRequest, execstore.ErrorCode(execstore.ErrInvalidExecutionEvent), "request body: executionId "+msg)
			return
		}
	}
	id, err := a.store.Admit(r.Context(), execstore.AdmitRequest{
		ExecutionID: given, WorkflowID: body.WorkflowID, Params: body.Params, Context: body.Context,
		MaxAttempts: body.MaxAttempts, Queue: queue, Priority: body.Priority, Deadline: timeArg(body.Deadline),
		ConcurrencyKey: key,
	})
	if err != nil {
		a.failAdmission(w, r, &body, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"executionId": id})
}

// urlSegmentID says why an execution ID given over HTTP cannot be one, or
// "". The store itself takes "" to mean "choose an ID", and takes any ID of
// 1 to 200 bytes of UTF-8 without control characters; over HTTP an empty
// string is more likely a client's missing value than a request for a new
// ID (which leaving the field out makes), and an ID must survive as the
// {id} of /v1/executions/{id}, percent-encoded: "." and "..", which clients
// and servers remove from a path, and "/" do not, and such an execution
// could never be read back.
func urlSegmentID(id string) string {
	if id == "" {
		return "is empty: leave the field out to have the store choose an ID"
	}
	if !survivesURL(id) {
		return "is " + strconv.Quote(id) + ", which a URL path cannot carry as /v1/executions/{id}: the execution could never be read back"
	}
	return ""
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
	// A conflict comes with an ID the caller gave (a store-chosen one is new).
	if body.ExecutionID != nil {
		if rec, getErr := a.store.Get(r.Context(), *body.ExecutionID); getErr == nil {
			same := sameEvent(&rec, body)
			out.SameEvent = &same
		}
	}
	writeJSON(w, http.StatusConflict, out)
}

// sameEvent reports whether rec was admitted with body's workflow, params
// (in canonical form: key order and insignificant whitespace aside),
// context (none and an empty one alike), attempt bound and queue.
func sameEvent(rec *execstore.Record, body *admitBody) bool {
	queue := "" // the workflow's own, by name or left out: the default
	if body.Queue != nil && *body.Queue != body.WorkflowID {
		queue = *body.Queue
	}
	if rec.WorkflowID != body.WorkflowID || rec.MaxAttempts != body.MaxAttempts || rec.Queue != queue || !maps.Equal(rec.Context, body.Context) {
		return false
	}
	if rec.Params == nil || body.Params == nil {
		return rec.Params == nil && body.Params == nil
	}
	had, err1 := jsonv.Canonical(nil, rec.Params)
	sent, err2 := jsonv.Canonical(nil, body.Params)
	return err1 == nil && err2 == nil && bytes.Equal(had, sent)
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	rec, err := a.store.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, recordOut(rec))
}

// awaitTimeoutMax is the longest an await waits, and its default.
const awaitTimeoutMax = 60 * time.Second

// await waits for the execution to be terminal, up to ?timeout= (a Go
// duration, default and maximum 60s); on timeout it answers 408 with the
// code "TIMEOUT".
func (a *api) await(w http.ResponseWriter, r *http.Request) {
	timeout := awaitTimeoutMax
	if s := r.URL.Query().Get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil || d <= 0:
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "timeout must be a positive duration such as 30s or 1500ms")
			return
		case d > awaitTimeoutMax:
			writeError(w, http.StatusUnprocessableEntity, "LIMIT_EXCEEDED", "timeout is longer than the limit of 60s")
			return
		}
		timeout = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	rec, err := a.store.Await(ctx, r.PathValue("id"))
	if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
		writeError(w, http.StatusRequestTimeout, "TIMEOUT", "the execution is not terminal yet")
		return
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, recordOut(rec))
}

// list serves GET /v1/executions: a page of records and the cursor of the
// next ("" when the listing is complete).
func (a *api) list(w http.ResponseWriter, r *http.Request) {
	p, err := queryParams(r, "status", "workflowId", "parentId", "admittedAfter", "admittedBefore", "order", "limit", "cursor")
	q := execstore.ListQuery{Status: execstore.Status(p["status"]), WorkflowID: p["workflowId"], ParentID: p["parentId"],
		Order: execstore.Order(p["order"]), Cursor: p["cursor"]}
	if err == nil {
		q.AdmittedAfter, err = parseTime("admittedAfter", p["admittedAfter"])
	}
	if err == nil {
		q.AdmittedBefore, err = parseTime("admittedBefore", p["admittedBefore"])
	}
	if err == nil {
		q.Limit, err = parseLimit(p["limit"])
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	page, err := a.store.List(r.Context(), q)
	a.writePage(w, page, err)
}

// writePage answers a page of records, or the error that stopped it.
func (a *api) writePage(w http.ResponseWriter, page execstore.ListPage, err error) {
	if err != nil {
		a.fail(w, err)
		return
	}
	out := make([]recordJSON, len(page.Records))
	for i, rec := range page.Records {
		out[i] = recordOut(rec)
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": out, "cursor": page.Cursor})
}

// listArchived serves GET /v1/archive: a page of archived records, by when
// they ended, and the cursor of the next ("" when the listing is complete).
func (a *api) listArchived(w http.ResponseWriter, r *http.Request) {
	p, err := queryParams(r, "workflowId", "status", "endedAfter", "endedBefore", "limit", "cursor")
	q := execstore.ArchiveQuery{WorkflowID: p["workflowId"], Status: execstore.Status(p["status"]), Cursor: p["cursor"]}
	if err == nil {
		q.EndedAfter, err = parseTime("endedAfter", p["endedAfter"])
	}
	if err == nil {
		q.EndedBefore, err = parseTime("endedBefore", p["endedBefore"])
	}
	if err == nil {
		q.Limit, err = parseLimit(p["limit"])
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	page, err := a.store.ListArchived(r.Context(), q)
	a.writePage(w, page, err)
}

type wakeBody struct {
	At time.Time `json:"at"`
}

func (a *api) wake(w http.ResponseWriter, r *http.Request) {
	var body wakeBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	res, err := a.store.RequestWake(r.Context(), r.PathValue("id"), body.At)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]execstore.WakeResult{"status": res})
}

type watchBody struct {
	Keys []string `json:"keys"`
}

func (a *api) watch(w http.ResponseWriter, r *http.Request) {
	var body watchBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	res, err := a.store.Watch(r.Context(), r.PathValue("id"), body.Keys...)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]execstore.WakeResult{"status": res})
}

type cancelBody struct {
	Reason string `json:"reason"`
}

// cancel cancels an execution (and the children it started) and answers
// with its record: the cancelled one, or the terminal one it already had.
func (a *api) cancel(w http.ResponseWriter, r *http.Request) {
	var body cancelBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	rec, err := a.store.Cancel(r.Context(), r.PathValue("id"), body.Reason)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, recordOut(rec))
}

type recordJSON struct {
	ExecutionID string            `json:"executionId"`
	WorkflowID  string            `json:"workflowId"`
	Params      json.RawMessage   `json:"params,omitempty"`
	Context     map[string]string `json:"context,omitempty"`
	Status      execstore.Status  `json:"status"`
	Outcome     *outcomeJSON      `json:"outcome,omitempty"`
	Parent      *parentJSON       `json:"parent,omitempty"`
	AdmittedAt  time.Time         `json:"admittedAt"`
	UpdatedAt   time.Time         `json:"updatedAt"`
	DueAt       *time.Time        `json:"dueAt,omitempty"`
	Lease       *leaseJSON        `json:"lease,omitempty"`
	Attempts    int               `json:"attempts"`
	MaxAttempts int               `json:"maxAttempts"`
	Queue       string            `json:"queue,omitempty"`
	Priority    int               `json:"priority,omitempty"`
	Deadline    *time.Time        `json:"deadline,omitempty"`

	ConcurrencyKey string `json:"concurrencyKey,omitempty"`
	Archived       bool   `json:"archived,omitempty"`
}

func recordOut(r execstore.Record) recordJSON {
	out := recordJSON{
		ExecutionID: r.ExecutionID,
		WorkflowID:  r.WorkflowID,
		Params:      r.Params,
		Context:     r.Context,
		Status:      r.Status,
		AdmittedAt:  r.AdmittedAt,
		UpdatedAt:   r.UpdatedAt,
		Attempts:    r.Attempts,
		MaxAttempts: r.MaxAttempts,
		Archived:    r.Archived,
		Queue:       r.Queue,
		Priority:    r.Priority,

		ConcurrencyKey: r.ConcurrencyKey,
	}
	if !r.Deadline.IsZero() {
		d := r.Deadline
		out.Deadline = &d
	}
	if o := r.Outcome; o != nil {
		out.Outcome = &outcomeJSON{Status: o.Status, Result: o.Result, Error: errorOut(o.Error)}
	}
	if p := r.Parent; p != nil {
		out.Parent = &parentJSON{ExecutionID: p.ExecutionID, StepKey: p.StepKey}
	}
	if !r.DueAt.IsZero() {
		due := r.DueAt
		out.DueAt = &due
	}
	if r.Lease != nil {
		l := leaseOut(*r.Lease)
		out.Lease = &l
	}
	return out
}

type parentJSON struct {
	ExecutionID string `json:"executionId"`
	StepKey     string `json:"stepKey"`
}

type outcomeJSON struct {
	Status execstore.Status `json:"status"`
	Result json.RawMessage  `json:"result,omitempty"`
	Error  *errorJSON       `json:"error,omitempty"`
}

func outcomeOut(o execstore.Outcome) outcomeJSON {
	return outcomeJSON{Status: o.Status, Result: o.Result, Error: errorOut(o.Error)}
}

type errorJSON struct {
	Name    string     `json:"name"`
	Message string     `json:"message"`
	Code    string     `json:"code,omitempty"`
	Cause   *errorJSON `json:"cause,omitempty"`
}

func errorOut(e *execstore.WorkflowError) *errorJSON {
	if e == nil {
		return nil
	}
	return &errorJSON{Name: e.Name, Message: e.Message, Code: e.Code, Cause: errorOut(e.Cause)}
}

func (e *errorJSON) workflowError() *execstore.WorkflowError {
	if e == nil {
		return nil
	}
	return &execstore.WorkflowError{Name: e.Name, Message: e.Message, Code: e.Code, Cause: e.Cause.workflowError()}
}
