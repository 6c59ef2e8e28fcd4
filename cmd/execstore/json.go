package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/jsonv"
)

// Reading request bodies and writing answers, for every JSON route. A
// request body is a struct of the route's file: a field is required unless
// its tag says omitempty (the README's "?"), and names match exactly
// (body.go).

// routeBody is a request's body as a JSON route reads it: at most its
// route's limit (http.MaxBytesReader), and the body type the route table
// declares for it.
type routeBody struct {
	io.ReadCloser
	declared requestBody
}

// withBody bounds a JSON route's request body by the largest body its body
// type can take under lim (none when the route declares no body), before h
// reads it.
func withBody(body requestBody, lim *execstore.Limits, h http.HandlerFunc) http.HandlerFunc {
	var n int64
	if body != nil {
		n = body.maxBytes(lim)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = &routeBody{ReadCloser: http.MaxBytesReader(w, r.Body, n), declared: body}
		h(w, r)
	}
}

// decode reads a JSON body strictly: at most its route's limit, one JSON
// object with no duplicate keys or invalid UTF-8 (which encoding/json would
// silently drop or replace), then the rules of decodeBody (exact field
// names, required fields, values of the right kind). A body over the limit
// answers 413 LIMIT_EXCEEDED; a bad body answers 400 with the code of
// invalid (the admission route's is INVALID_EXECUTION_EVENT). v MUST point
// to the body type the route table declares for the route: the limit is
// that type's.
func (a *api) decode(w http.ResponseWriter, r *http.Request, v any, invalid error) bool {
	code := execstore.ErrorCode(invalid)
	body, ok := r.Body.(*routeBody)
	if !ok || body.declared == nil || reflect.TypeOf(body.declared) != reflect.TypeOf(v).Elem() {
		a.logger.Error("execstore: a handler reads a body its route does not declare", "route", r.Pattern, "type", fmt.Sprintf("%T", v))
		writeError(w, http.StatusInternalServerError, "INTERNAL", "the route's body is not the one it declares")
		return false
	}
	b, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "LIMIT_EXCEEDED", fmt.Sprintf("request body over the limit of %d bytes", tooBig.Limit))
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
	if c, ok := v.(bodyChecker); ok {
		if err := c.checkBody(); err != nil {
			writeError(w, http.StatusBadRequest, code, "request body: "+err.Error())
			return false
		}
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
