package main

import (
	"net/http"
	"time"

	"github.com/execstore/execstore"
)

// The queues: their settings (a concurrency limit, a rate limit, a key
// limit, a pause), counts and concurrency keys.

type queueBody struct {
	// Concurrency: at most this many of the queue's executions leased at
	// once; absent or 0: no limit.
	Concurrency int  `json:"concurrency,omitempty"`
	Paused      bool `json:"paused,omitempty"`
	// Rate: at most this many leases granted in any window of RatePeriodMs
	// milliseconds; absent or 0: no limit.
	Rate         int   `json:"rate,omitempty"`
	RatePeriodMs int64 `json:"ratePeriodMs,omitempty"`
	// KeyLimit: at most this many executions of one concurrency key hold a
	// slot at once; KeyMode: "leased" (the default) or "live".
	KeyLimit int               `json:"keyLimit,omitempty"`
	KeyMode  execstore.KeyMode `json:"keyMode,omitempty"`
}

type queueJSON struct {
	Name         string `json:"name"`
	Concurrency  int    `json:"concurrency"`
	Paused       bool   `json:"paused"`
	Rate         int    `json:"rate"`
	RatePeriodMs int64  `json:"ratePeriodMs"`
	Live         int    `json:"live"`
	Due          int    `json:"due"`
	Leased       int    `json:"leased"`
	Expired      int    `json:"expired"`
	Granted      int    `json:"granted"`
	KeyLimit     int    `json:"keyLimit"`
	// KeyMode is "leased" or "live" with a key limit, left out without one.
	KeyMode execstore.KeyMode `json:"keyMode,omitempty"`
	Parked  int               `json:"parked"`
}

func queueOut(q execstore.QueueInfo) queueJSON {
	return queueJSON{Name: q.Name, Concurrency: q.Concurrency, Paused: q.Paused, Rate: q.Rate, RatePeriodMs: q.RatePeriod.Milliseconds(),
		Live: q.Live, Due: q.Due, Leased: q.Leased, Expired: q.Expired, Granted: q.Granted,
		KeyLimit: q.KeyLimit, KeyMode: q.KeyMode, Parked: q.Parked}
}

type keyJSON struct {
	Key     string `json:"key"`
	Holding int    `json:"holding"`
	Ready   int    `json:"ready"`
	Parked  int    `json:"parked"`
}

// queueKeys answers a queue's concurrency keys, the most waiting first, at
// most ?limit= of them (default 100).
func (a *api) queueKeys(w http.ResponseWriter, r *http.Request) {
	p, err := queryParams(r, "limit")
	limit := 0
	if err == nil {
		limit, err = parseLimit(p["limit"])
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	if limit == 0 {
		limit = 100
	}
	keys, err := a.store.QueueKeys(r.Context(), r.PathValue("name"), limit)
	if err != nil {
		a.fail(w, err)
		return
	}
	out := make([]keyJSON, len(keys))
	for i, k := range keys {
		out[i] = keyJSON{Key: k.Key, Holding: k.Holding, Ready: k.Ready, Parked: k.Parked}
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
}

// putQueue sets a queue's settings and answers the queue as getQueue does.
func (a *api) putQueue(w http.ResponseWriter, r *http.Request) {
	var body queueBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	name := r.PathValue("name")
	period := time.Duration(body.RatePeriodMs) * time.Millisecond
	switch { // out of bounds without overflowing
	case body.RatePeriodMs > execstore.MaxRatePeriod.Milliseconds():
		period = execstore.MaxRatePeriod + time.Millisecond
	case body.RatePeriodMs < 0:
		period = -1
	}
	st := execstore.QueueSettings{Name: name, Concurrency: body.Concurrency, Paused: body.Paused, Rate: body.Rate, RatePeriod: period,
		KeyLimit: body.KeyLimit, KeyMode: body.KeyMode}
	if _, err := a.store.PutQueue(r.Context(), st); err != nil {
		a.fail(w, err)
		return
	}
	a.getQueue(w, r)
}

func (a *api) getQueue(w http.ResponseWriter, r *http.Request) {
	q, err := a.store.Queue(r.Context(), r.PathValue("name"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, queueOut(q))
}

func (a *api) deleteQueue(w http.ResponseWriter, r *http.Request) {
	if err := a.store.DeleteQueue(r.Context(), r.PathValue("name")); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "deleted"})
}

// listQueues answers the queues with settings or live executions, in name
// order, from the first after ?after=; "next" is the name to continue
// after when the page is full.
func (a *api) listQueues(w http.ResponseWriter, r *http.Request) {
	p, err := queryParams(r, "after")
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	list, err := a.store.ListQueues(r.Context(), p["after"])
	if err != nil {
		a.fail(w, err)
		return
	}
	out := make([]queueJSON, len(list))
	for i, q := range list {
		out[i] = queueOut(q)
	}
	answer := map[string]any{"queues": out}
	if len(list) == execstore.ListQueuesMax {
		answer["next"] = list[len(list)-1].Name
	}
	writeJSON(w, http.StatusOK, answer)
}
