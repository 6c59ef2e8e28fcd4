package main

import (
	"context"
	"errors"
	"net/http"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/replica"
)

// Every answer is JSON; an error is {"code": "...", "message": "..."} (a
// duplicate trigger's conflict adds "sameEvent"). The rule for the status:
//
//   - a request over a documented limit is LIMIT_EXCEEDED: 413 for a body
//     over its route's limit (limits.go), 422 for everything else (a size
//     or count of Limits, an ID's length, maxAttempts, await's timeout);
//   - any other request the server or the store refuses as it stands is 400,
//     with the route's code (INVALID_EXECUTION_EVENT for an admission's or a
//     child start's event, INVALID_ARGUMENT otherwise);
//   - 404 for what does not exist (an execution, a schedule, a step, a key,
//     a route), 405 for a route that exists for other methods, 409 for a
//     conflict with the recorded state, 408 for an await that ran out of
//     time, 503 once the store has failed or closed, 500 for a bug.
//
// openapi.yaml lists each code with its statuses; TestEveryErrorCodeIsDocumented
// checks the list below against it.

// errorCodes is every code the server sends, with the statuses it comes with.
var errorCodes = map[string][]int{
	"INVALID_EXECUTION_EVENT": {http.StatusBadRequest},
	"INVALID_ARGUMENT":        {http.StatusBadRequest},
	"UNAUTHORIZED":            {http.StatusUnauthorized},
	"LIMIT_EXCEEDED":          {http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity},
	"EXECUTION_NOT_FOUND":     {http.StatusNotFound},
	"SCHEDULE_NOT_FOUND":      {http.StatusNotFound},
	"KEY_NOT_FOUND":           {http.StatusNotFound},
	"ROUTE_NOT_FOUND":         {http.StatusNotFound},
	"METHOD_NOT_ALLOWED":      {http.StatusMethodNotAllowed},
	"EXECUTION_ID_CONFLICT":   {http.StatusConflict},
	"LEASE_LOST":              {http.StatusConflict},
	"START_REQUEST_MISMATCH":  {http.StatusConflict},
	"TIMEOUT":                 {http.StatusRequestTimeout},
	"CLOSED":                  {http.StatusServiceUnavailable},
	"NOT_LEADER":              {http.StatusServiceUnavailable},
	"OUTCOME_UNKNOWN":         {http.StatusServiceUnavailable},
	"STORAGE_FAILED":          {http.StatusServiceUnavailable},
	"CANCELLED":               {http.StatusServiceUnavailable},
	"INTERNAL":                {http.StatusInternalServerError},
}

// errorJSONBody is an error answer.
type errorJSONBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// SameEvent, on a duplicate trigger's EXECUTION_ID_CONFLICT: whether the
	// existing execution was admitted with the request's workflow, params
	// (compared in canonical form), context and maxAttempts.
	SameEvent *bool `json:"sameEvent,omitempty"`
	// Leader, on NOT_LEADER: the leader's API URL when the node knows it.
	Leader string `json:"leader,omitempty"`
}

// statusOf returns the code and status an error from the store answers
// with. A lease on an execution that does not exist is not current either,
// so its error matches both ErrExecutionNotFound and ErrLeaseLost: it
// answers 404, whichever code the error carries itself. A request over a
// limit matches ErrLimitExceeded besides its route's sentinel: 422.
func statusOf(err error) (string, int) {
	code := execstore.ErrorCode(err)
	switch {
	case errors.Is(err, execstore.ErrExecutionNotFound):
		code = "EXECUTION_NOT_FOUND"
	case errors.Is(err, execstore.ErrLimitExceeded):
		code = "LIMIT_EXCEEDED"
	case errors.Is(err, execstore.ErrNotLeader):
		var nl *execstore.NotLeaderError
		if errors.As(err, &nl) && nl.Uncertain {
			return "OUTCOME_UNKNOWN", http.StatusServiceUnavailable
		}
		return "NOT_LEADER", http.StatusServiceUnavailable
	case errors.Is(err, replica.ErrNodeOptions):
		return "INVALID_ARGUMENT", http.StatusBadRequest
	}
	switch code {
	case "INVALID_EXECUTION_EVENT", "INVALID_ARGUMENT":
		return code, http.StatusBadRequest
	case "EXECUTION_NOT_FOUND", "SCHEDULE_NOT_FOUND":
		return code, http.StatusNotFound
	case "EXECUTION_ID_CONFLICT", "LEASE_LOST", "START_REQUEST_MISMATCH":
		return code, http.StatusConflict
	case "LIMIT_EXCEEDED":
		return code, http.StatusUnprocessableEntity
	case "CLOSED", "STORAGE_FAILED":
		return code, http.StatusServiceUnavailable
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "CANCELLED", http.StatusServiceUnavailable
	}
	return "INTERNAL", http.StatusInternalServerError
}

// fail answers with the error's code and the HTTP status that fits it.
func (a *api) fail(w http.ResponseWriter, err error) {
	code, status := statusOf(err)
	if code == "NOT_LEADER" {
		w.Header().Set("Retry-After", "1") // an election takes about a second
	}
	if code == "INTERNAL" {
		a.logger.Error("execstore: request failed", "err", err)
	}
	writeError(w, status, code, err.Error())
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, errorJSONBody{Code: code, Message: message})
}

// jsonFallback answers in JSON what the mux answers in plain text or HTML:
// a path no route has (404 ROUTE_NOT_FOUND), a method the path's routes do
// not take (405 METHOD_NOT_ALLOWED, with the Allow header), and a path that
// is not in its clean form (the mux's redirect, its status and Location
// kept, with the code ROUTE_NOT_FOUND: the path as sent names no route).
// The JSON API's handlers answer with writeJSON, which sets the JSON
// content type before the status, and the pages answer past it (asIs); any
// other answer is one of the mux's own.
func jsonFallback(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&jsonOnly{ResponseWriter: w, r: r}, r)
	})
}

// asIs lets a page answer in its own format from behind jsonFallback.
func asIs(page http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if j, ok := w.(*jsonOnly); ok {
			w = j.ResponseWriter
		}
		page(w, r)
	}
}

// jsonOnly rewrites an answer that is not JSON into an error in JSON.
type jsonOnly struct {
	http.ResponseWriter
	r       *http.Request
	written bool // the status is sent
	rewrote bool // the answer was replaced: its body is dropped
}

func (j *jsonOnly) WriteHeader(status int) {
	if j.written {
		return
	}
	j.written = true
	h := j.Header()
	if h.Get("Content-Type") == "application/json" {
		j.ResponseWriter.WriteHeader(status)
		return
	}
	j.rewrote = true
	h.Del("X-Content-Type-Options")
	route := j.r.Method + " " + j.r.URL.Path
	switch {
	case status == http.StatusMethodNotAllowed:
		writeError(j.ResponseWriter, status, "METHOD_NOT_ALLOWED", "no route for "+route+"; the methods allowed are "+h.Get("Allow"))
	case status >= 300 && status < 400:
		writeError(j.ResponseWriter, status, "ROUTE_NOT_FOUND", "no route for "+route+"; its clean form is "+h.Get("Location"))
	default:
		writeError(j.ResponseWriter, status, "ROUTE_NOT_FOUND", "no route for "+route)
	}
}

func (j *jsonOnly) Write(b []byte) (int, error) {
	if !j.written {
		j.WriteHeader(http.StatusOK)
	}
	if j.rewrote {
		return len(b), nil
	}
	return j.ResponseWriter.Write(b)
}
