package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/execstore/execstore"
)

// The change feed: GET /v1/changes.

// changesWaitMax caps ?wait= of GET /v1/changes, as ?timeout= of await is
// capped: a request holds a connection and a goroutine while it waits.
const changesWaitMax = 60 * time.Second

type changeJSON struct {
	Position    uint64           `json:"position"`
	ExecutionID string           `json:"executionId"`
	Status      execstore.Status `json:"status"`
	At          time.Time        `json:"at"`
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
		limit, err = parseLimit(p["limit"])
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
