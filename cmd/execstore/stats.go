package main

import (
	"net/http"

	"github.com/execstore/execstore"
)

// The store's state for operators: GET /v1/stats, and GET /healthz for load
// balancers.

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
	if st.ArchiveErr != nil {
		out["status"], out["archive"] = "degraded", st.ArchiveErr.Error()
	}
	writeJSON(w, http.StatusOK, out)
}
