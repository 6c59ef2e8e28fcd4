package main

import (
	"encoding/json"
	"net/http"

	"github.com/execstore/execstore"
)

// The key-value store: a commit of writes, and reading a key. (An
// execution's watch of keys is a route of the executions: executions.go.)

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
