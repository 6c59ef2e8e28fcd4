package main

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/jsonv"
)

// The saved steps: saving one under a lease, reading one, and listing an
// execution's steps in pages.

type saveStepBody struct {
	Lease leaseRefJSON    `json:"lease"`
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// stepSavedJSON is a step save's answer: the value kept (the first one saved
// under the key), and whether it is this request's. Applied is true when
// this request saved it, and also, with Replayed, when an earlier request
// saved the same content (in canonical form): a retry after a lost answer
// reads as the save it repeats, and only a save that lost to a different
// value reads as not applied.
type stepSavedJSON struct {
	Applied  bool            `json:"applied"`
	Replayed bool            `json:"replayed,omitempty"`
	Value    json.RawMessage `json:"value"`
}

// sameJSON reports whether a and b are the same JSON value in canonical form
// (key order and insignificant whitespace aside).
func sameJSON(a, b json.RawMessage) bool {
	ca, err := jsonv.Canonical(nil, a)
	if err != nil {
		return false
	}
	cb, err := jsonv.Canonical(nil, b)
	return err == nil && bytes.Equal(ca, cb)
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
	out := stepSavedJSON{Applied: saved, Value: kept}
	if !saved && kept != nil && sameJSON(kept, body.Value) {
		out.Applied, out.Replayed = true, true
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) step(w http.ResponseWriter, r *http.Request) {
	v, ok, err := a.store.Step(r.Context(), r.PathValue("id"), r.PathValue("key"))
	if err != nil {
		a.fail(w, err)
		return
	}
	if !ok {
		writeJSON(w, http.StatusOK, stepLookupJSON{})
		return
	}
	writeJSON(w, http.StatusOK, stepLookupJSON{Saved: true, Value: v})
}

// stepLookupJSON answers a step lookup: a step not saved yet is an answer, not an
// error, since a worker asks before every step it runs.
type stepLookupJSON struct {
	Saved bool            `json:"saved"`
	Value json.RawMessage `json:"value,omitempty"`
}

// stepsPageBytes bounds the values of one page of GET
// /v1/executions/{id}/steps: their total; a page holds at least one step.
const stepsPageBytes = 4 << 20

type savedStepJSON struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// listSteps answers a page of an execution's saved steps in key order:
// ?after=KEY starts after that key, ?limit=N bounds the count, and the
// values of one page stop at about 4 MiB. "next", present when more steps
// remain, is the after of the next page. The count is the store's to bound
// (Store.ListSteps: 1 to Limits.ClaimLimit, 422 past it); left out, it is
// the store's page size, Limits.ListPageDefault.
func (a *api) listSteps(w http.ResponseWriter, r *http.Request) {
	p, err := queryParams(r, "after", "limit")
	limit := 0
	if err == nil {
		limit, err = parseLimit(p["limit"])
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	if limit == 0 {
		lim := a.store.Limits()
		limit = min(lim.ListPageDefault, lim.ClaimLimit)
	}
	steps, more, err := a.store.ListSteps(r.Context(), r.PathValue("id"), p["after"], limit, stepsPageBytes)
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
