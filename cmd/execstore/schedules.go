package main

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/execstore/execstore"
)

// The schedules: PUT, GET and DELETE /v1/schedules/{id}, and GET
// /v1/schedules for all of them.

// scheduleBody is a schedule as PUT takes it: the ID is the path's.
// cronOffset is a fixed offset from UTC as RFC 3339 writes one ("+02:00",
// "-05:00", "Z").
type scheduleBody struct {
	WorkflowID string          `json:"workflowId"`
	Params     json.RawMessage `json:"params,omitempty"`
	IntervalMs millis          `json:"intervalMs,omitempty"`
	Cron       string          `json:"cron,omitempty"`
	CronOffset string          `json:"cronOffset,omitempty"`
	Start      time.Time       `json:"start"`
	End        *time.Time      `json:"end,omitempty"`
	CatchUp    string          `json:"catchUp,omitempty"`
	Queue      *string         `json:"queue,omitempty"` // "" is refused
}

type scheduleJSON struct {
	ID         string          `json:"id"`
	WorkflowID string          `json:"workflowId"`
	Params     json.RawMessage `json:"params,omitempty"`
	IntervalMs int64           `json:"intervalMs,omitempty"`
	Cron       string          `json:"cron,omitempty"`
	CronOffset string          `json:"cronOffset,omitempty"`
	Start      time.Time       `json:"start"`
	End        *time.Time      `json:"end,omitempty"`
	CatchUp    string          `json:"catchUp"`
	Queue      string          `json:"queue,omitempty"`
	NextAt     *time.Time      `json:"nextAt,omitempty"`
	LastAt     *time.Time      `json:"lastAt,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func scheduleOut(sc execstore.Schedule) scheduleJSON {
	out := scheduleJSON{
		ID: sc.ID, WorkflowID: sc.WorkflowID, Params: sc.Params, IntervalMs: sc.Interval.Milliseconds(),
		Cron: sc.Cron, Start: sc.Start, End: timePtr(sc.End), CatchUp: string(sc.CatchUp),
		NextAt: timePtr(sc.NextAt), LastAt: timePtr(sc.LastAt), Queue: sc.Queue,
	}
	if sc.Cron != "" {
		out.CronOffset = time.Unix(0, 0).In(time.FixedZone("", int(sc.CronOffset/time.Second))).Format("Z07:00")
	}
	return out
}

func (a *api) putSchedule(w http.ResponseWriter, r *http.Request) {
	var body scheduleBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	sc := execstore.Schedule{
		ID: r.PathValue("id"), WorkflowID: body.WorkflowID, Params: body.Params,
		Interval: body.IntervalMs.duration(), Cron: body.Cron, Start: body.Start, CatchUp: execstore.CatchUp(body.CatchUp),
	}
	queue, ok := queueArg(w, body.Queue, execstore.ErrInvalidArgument)
	if !ok {
		return
	}
	sc.Queue = queue
	if body.End != nil {
		sc.End = *body.End
	}
	if body.CronOffset != "" {
		t, err := time.Parse("Z07:00", body.CronOffset)
		if err != nil {
			writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", `request body: "cronOffset" must be an offset such as "+02:00", "-05:00" or "Z"`)
			return
		}
		_, off := t.Zone()
		sc.CronOffset = time.Duration(off) * time.Second
	}
	got, err := a.store.PutSchedule(r.Context(), sc)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, scheduleOut(got))
}

func (a *api) getSchedule(w http.ResponseWriter, r *http.Request) {
	sc, err := a.store.GetSchedule(r.Context(), r.PathValue("id"))
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, scheduleOut(sc))
}

func (a *api) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if err := a.store.DeleteSchedule(r.Context(), r.PathValue("id")); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "deleted"})
}

func (a *api) listSchedules(w http.ResponseWriter, r *http.Request) {
	list, err := a.store.ListSchedules(r.Context())
	if err != nil {
		a.fail(w, err)
		return
	}
	out := make([]scheduleJSON, len(list))
	for i, sc := range list {
		out[i] = scheduleOut(sc)
	}
	writeJSON(w, http.StatusOK, map[string]any{"schedules": out})
}
