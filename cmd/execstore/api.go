package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/jsonv"
)

// maxBody bounds a request body: the largest event or value plus room for
// the JSON around it.
const maxBody = 4 << 20

// api serves the store over HTTP: JSON bodies, errors as
// {"code": "...", "message": "..."} (errors.go). openapi.yaml is the
// contract.
type api struct {
	store  *execstore.Store
	logger *slog.Logger
}

func newAPI(store *execstore.Store, logger *slog.Logger) http.Handler {
	a := &api{store: store, logger: logger}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/executions", a.admit)
	mux.HandleFunc("GET /v1/executions", a.list)
	mux.HandleFunc("GET /v1/changes", a.changes)
	mux.HandleFunc("GET /v1/executions/{id}", a.get)
	mux.HandleFunc("GET /v1/executions/{id}/await", a.await)
	mux.HandleFunc("POST /v1/executions/{id}/wakes", a.wake)
	mux.HandleFunc("POST /v1/executions/{id}/watches", a.watch)
	mux.HandleFunc("GET /v1/executions/{id}/steps/{key}", a.step)
	mux.HandleFunc("POST /v1/claims", a.claim)
	mux.HandleFunc("POST /v1/leases/renew", a.renew)
	mux.HandleFunc("POST /v1/leases/release", a.release)
	mux.HandleFunc("POST /v1/leases/acknowledge", a.acknowledge)
	mux.HandleFunc("POST /v1/leases/steps", a.saveStep)
	mux.HandleFunc("POST /v1/leases/start", a.start)
	mux.HandleFunc("POST /v1/store/commit", a.commit)
	mux.HandleFunc("GET /v1/store/{key}", a.read)
	mux.HandleFunc("GET /v1/stats", a.stats)
	mux.HandleFunc("GET /healthz", a.health)
	mux.HandleFunc("POST /v1/executions/{id}/cancel", a.cancel)
	a.scheduleRoutes(mux) // schedules.go
	a.answerRoutes(mux)   // answers.go
	a.clusterRoutes(mux)  // cluster.go
	return jsonFallback(mux)
}

// ---- wire types -------------------------------------------------------------

type leaseJSON struct {
	ExecutionID string    `json:"executionId"`
	Token       uint64    `json:"token"`
	ExpiresAt   time.Time `json:"expiresAt"`
}

func leaseOut(l execstore.Lease) leaseJSON {
	return leaseJSON{ExecutionID: l.ExecutionID, Token: l.Token, ExpiresAt: l.ExpiresAt}
}

func (l leaseJSON) lease() execstore.Lease {
	return execstore.Lease{ExecutionID: l.ExecutionID, Token: l.Token, ExpiresAt: l.ExpiresAt}
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

type outcomeJSON struct {
	Status execstore.Status `json:"status"`
	Result json.RawMessage  `json:"result,omitempty"`
	Error  *errorJSON       `json:"error,omitempty"`
}

type parentJSON struct {
	ExecutionID string `json:"executionId"`
	StepKey     string `json:"stepKey"`
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

// Request bodies. decodeBody reads them: a field is required unless its tag
// says omitempty (the README's "?"), and names match exactly.

type admitBody struct {
	ExecutionID string            `json:"executionId,omitempty"`
	WorkflowID  string            `json:"workflowId"`
	Params      json.RawMessage   `json:"params,omitempty"`
	Context     map[string]string `json:"context,omitempty"`
	MaxAttempts int               `json:"maxAttempts,omitempty"`
}

type wakeBody struct {
	At time.Time `json:"at"`
}

type watchBody struct {
	Keys []string `json:"keys"`
}

type claimBody struct {
	Limit           int    `json:"limit"`
	LeaseDurationMs millis `json:"leaseDurationMs"`
}

type renewBody struct {
	Lease           leaseJSON `json:"lease"`
	LeaseDurationMs millis    `json:"leaseDurationMs"`
}

type releaseBody struct {
	Lease        leaseJSON  `json:"lease"`
	RetryAfterMs millis     `json:"retryAfterMs"`
	Error        *errorJSON `json:"error,omitempty"` // why the delivery ended (Store.ReleaseWithCause)
}

type cancelBody struct {
	Reason string `json:"reason"`
}

type acknowledgeBody struct {
	Lease   leaseJSON   `json:"lease"`
	Outcome outcomeJSON `json:"outcome"`
}

type saveStepBody struct {
	Lease leaseJSON       `json:"lease"`
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

type startBody struct {
	Lease      leaseJSON       `json:"lease"`
	StepKey    string          `json:"stepKey"`
	WorkflowID string          `json:"workflowId"`
	Params     json.RawMessage `json:"params,omitempty"`
}

type commitBody struct {
	Writes []storeWriteJSON `json:"writes"`
}

// storeWriteJSON's Value is required like any field without omitempty: a
// write that leaves it out is refused rather than read as a delete, which
// takes an explicit null.
type storeWriteJSON struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// ---- handlers ----------------------------------------------------------------

func (a *api) admit(w http.ResponseWriter, r *http.Request) {
	var body admitBody
	if !a.decode(w, r, &body, execstore.ErrInvalidExecutionEvent) {
		return
	}
	id, err := a.store.Admit(r.Context(), execstore.AdmitRequest{
		ExecutionID: body.ExecutionID, WorkflowID: body.WorkflowID, Params: body.Params, Context: body.Context,
		MaxAttempts: body.MaxAttempts,
	})
	if err != nil {
		a.failAdmission(w, r, &body, err) // answers.go
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"executionId": id})
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

func (a *api) step(w http.ResponseWriter, r *http.Request) {
	v, ok, err := a.store.Step(r.Context(), r.PathValue("id"), r.PathValue("key"))
	if err != nil {
		a.fail(w, err)
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, "STEP_NOT_FOUND", "no saved value for this step")
		return
	}
	writeJSON(w, http.StatusOK, map[string]json.RawMessage{"value": v})
}

func (a *api) claim(w http.ResponseWriter, r *http.Request) {
	var body claimBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	leases, err := a.store.ClaimDue(r.Context(), body.Limit, body.LeaseDurationMs.duration())
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
	writeJSON(w, http.StatusOK, map[string]any{"leases": out, "now": a.store.Now()})
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
	writeJSON(w, http.StatusOK, acknowledgedOut(res[0])) // answers.go
}

func (a *api) saveStep(w http.ResponseWriter, r *http.Request) {
	var body saveStepBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	kept, saved, err := a.store.SaveStepKept(r.Context(), body.Lease.lease(), body.Key, body.Value)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, stepSavedJSON{Applied: saved, Value: kept}) // answers.go
}

func (a *api) start(w http.ResponseWriter, r *http.Request) {
	var body startBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	id, err := a.store.Start(r.Context(), body.Lease.lease(), body.StepKey, body.WorkflowID, body.Params)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"executionId": id})
}

func (a *api) commit(w http.ResponseWriter, r *http.Request) {
	var body commitBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	writes := make([]execstore.Write, len(body.Writes))
	for i, wr := range body.Writes {
		writes[i] = execstore.Write{Key: wr.Key, Value: wr.Value}
		if string(wr.Value) == "null" {
			writes[i].Value = nil // an explicit null deletes, as a nil Value does
		}
	}
	if err := a.store.Commit(r.Context(), writes...); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "committed"})
}

func (a *api) read(w http.ResponseWriter, r *http.Request) {
	v, ok, err := a.store.Read(r.Context(), r.PathValue("key"))
	if err != nil {
		a.fail(w, err)
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, "KEY_NOT_FOUND", "no such key")
		return
	}
	writeJSON(w, http.StatusOK, map[string]json.RawMessage{"value": v})
}

func (a *api) stats(w http.ResponseWriter, r *http.Request) {
	st, err := a.store.Stats(r.Context())
	if err != nil {
		a.fail(w, err)
		return
	}
	out := map[string]any{
		"executions": st.Executions, "terminal": st.Terminal, "pending": st.Pending,
		"walFirstIndex": st.WALFirstIndex, "walLastIndex": st.WALLastIndex, "now": st.Now,
		"clockBehindStamps": st.ClockBehindStamps, "clockBehindMaxMs": st.ClockBehindMax.Milliseconds(),
		"clockBehindMs": st.ClockBehind.Milliseconds(),
		"byStatus":      st.ByStatus, "byWorkflow": st.ByWorkflow, "workflowsOmitted": st.WorkflowsOmitted,
		"lastChange": st.LastChange,
		"queued":     st.Queued, "walBatches": st.WALBatches,
		"groupWaits": st.GroupWaits, "groupWaitsMissed": st.GroupWaitsMissed,
	}
	if !st.NextDue.IsZero() {
		out["nextDue"] = st.NextDue
	}
	if st.Failed != nil {
		out["failed"] = st.Failed.Error()
	}
	out["fallback"] = fallbackStatus(st)
	writeJSON(w, http.StatusOK, out)
}

// fallbackStatus says what the check of the fallback recovery path found:
// "checking", "ok", or what is damaged.
func fallbackStatus(st execstore.Stats) string {
	switch {
	case st.FallbackErr != nil:
		return st.FallbackErr.Error()
	case !st.FallbackChecked:
		return "checking"
	}
	return "ok"
}

// health answers 200 while the store accepts writes, 503 once it has failed
// or closed. A store whose fallback recovery path is damaged still accepts
// writes: it answers 200 with status "degraded" and what is damaged.
func (a *api) health(w http.ResponseWriter, r *http.Request) {
	st, err := a.store.Stats(r.Context())
	if err == nil {
		err = st.Failed
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	out := map[string]string{"status": "ok", "fallback": fallbackStatus(st)}
	if st.FallbackErr != nil {
		out["status"] = "degraded"
	}
	writeJSON(w, http.StatusOK, out)
}

// ---- plumbing ----------------------------------------------------------------

// decode reads a JSON body strictly: at most maxBody bytes, one JSON object
// with no duplicate keys or invalid UTF-8 (which encoding/json would
// silently drop or replace), then the rules of decodeBody (exact field
// names, required fields, values of the right kind). A body over maxBody
// answers 413 LIMIT_EXCEEDED; a bad body answers 400 with the code of
// invalid (the admission route's is INVALID_EXECUTION_EVENT).
func (a *api) decode(w http.ResponseWriter, r *http.Request, v any, invalid error) bool {
	code := execstore.ErrorCode(invalid)
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "LIMIT_EXCEEDED", fmt.Sprintf("request body over the limit of %d bytes", maxBody))
			return false
		}
		writeError(w, http.StatusBadRequest, code, "reading the request body: "+err.Error())
		return false
	}
	if err := jsonv.ValidateObject(b); err != nil {
		writeError(w, http.StatusBadRequest, code, "request body: "+err.Error())
		return false
	}
	if err := decodeBody(b, v); err != nil {
		var bad *bodyError
		if !errors.As(err, &bad) {
			// jsonv passed the body, so its reader cannot fail: a bug.
			a.logger.Error("execstore: decoding a checked request body", "err", err)
			writeError(w, http.StatusInternalServerError, "INTERNAL", "request body could not be decoded")
			return false
		}
		writeError(w, http.StatusBadRequest, code, "request body: "+bad.msg)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client may be gone; nothing useful to do
}
