package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/jsonv"
)

// Reading request bodies and writing answers, for every JSON route. A
// request body is a struct of the route's file: a field is required unless
// its tag says omitempty (the README's "?"), and names match exactly
// (body.go).

// maxBody bounds a request body: the largest event or value plus room for
// the JSON around it.
const maxBody = 4 << 20

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
