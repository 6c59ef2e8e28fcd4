package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/execstore/execstore"
)

// Listing and the change feed over HTTP. Query parameters are read
// strictly: a parameter the route does not know, one given twice, or a
// value that does not parse answers 400 INVALID_ARGUMENT. An empty value
// is the same as leaving the parameter out.

// changesWaitMax caps ?wait= of GET /v1/changes, as ?timeout= of await is
// capped: a request holds a connection and a goroutine while it waits.
const changesWaitMax = 60 * time.Second

// queryParams checks a request's query against the parameters a route
// takes, and returns each one's value ("" when left out).
func queryParams(r *http.Request, known ...string) (map[string]string, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("query: %v", err)
	}
	out := make(map[string]string, len(known))
	for name, vals := range q {
		ok := false
		for _, k := range known {
			ok = ok || k == name
		}
		switch {
		case !ok:
			return nil, fmt.Errorf("unknown query parameter %q", name)
		case len(vals) > 1:
			return nil, fmt.Errorf("query parameter %q given %d times", name, len(vals))
		}
		out[name] = vals[0]
	}
	return out, nil
}

func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: not an RFC 3339 time: %q", name, v)
	}
	return t, nil
}

func parseInt(name, v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: not a whole number: %q", name, v)
	}
	return n, nil
}

type changeJSON struct {
	Position    uint64           `json:"position"`
	ExecutionID string           `json:"executionId"`
	Status      execstore.Status `json:"status"`
	At          time.Time        `json:"at"`
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
		q.Limit, err = parseInt("limit", p["limit"])
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	page, err := a.store.List(r.Context(), q)
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

// changes serves GET /v1/changes: the changes after ?after= (default 0),
// waiting up to ?wait= (a Go duration, default 0, at most 60s) for one when
// there is none; a wait that ends without a change answers 200 with none.
func (a *api) changes(w http.ResponseWriter, r *http.Request) {
	p, err := queryParams(r, "after", "limit", "wait")
	var after uint64
	if err == nil && p["after"] != "" {
		if after, err = strconv.ParseUint(p["after"], 10, 64); err != nil {
			err = fmt.Errorf("after: not a position: %q", p["after"])
		}
	}
	limit := 0
	if err == nil {
		limit, err = parseInt("limit", p["limit"])
	}
	wait := time.Duration(0)
	if err == nil && p["wait"] != "" {
		if wait, err = time.ParseDuration(p["wait"]); err != nil || wait < 0 {
			err = fmt.Errorf("wait: want a duration from 0 to %v, got %q", changesWaitMax, p["wait"])
		}
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	if wait > changesWaitMax {
		// Over a limit, as await's timeout over its cap: 422.
		writeError(w, http.StatusUnprocessableEntity, "LIMIT_EXCEEDED", fmt.Sprintf("wait is longer than the limit of %v", changesWaitMax))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	page, err := a.store.Changes(ctx, after, limit)
	if err != nil && !(errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil) {
		a.fail(w, err)
		return
	}
	out := make([]changeJSON, len(page.Changes))
	for i, c := range page.Changes {
		out[i] = changeJSON{Position: c.Position, ExecutionID: c.ExecutionID, Status: c.Status, At: c.At}
	}
	writeJSON(w, http.StatusOK, map[string]any{"changes": out, "next": page.Next, "last": page.Last})
}
