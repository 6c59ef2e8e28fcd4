package main

import (
	"net/http"
	"testing"
)

// A schedule is put, read, listed and deleted over HTTP; the answer spells
// it as the body does, with the store's next occurrence.
func TestHTTPSchedulesArePutReadListedAndDeleted(t *testing.T) {
	s := newServer(t) // the store's clock stands at 2026-01-02T12:00:00Z
	body := `{"workflowId":"settle","params":{"shop":1},"cron":"0 2 * * *","cronOffset":"-05:00","start":"2026-01-01T00:00:00Z","catchUp":"all"}`
	put := s.expect("PUT", "/v1/schedules/nightly", body, http.StatusOK, "")
	want := map[string]any{"id": "nightly", "workflowId": "settle", "cron": "0 2 * * *", "cronOffset": "-05:00",
		"start": "2026-01-01T00:00:00Z", "catchUp": "all", "nextAt": "2026-01-03T07:00:00Z"}
	for k, v := range want {
		if put[k] != v {
			t.Errorf("PUT answered %s = %v, want %v", k, put[k], v)
		}
	}
	if got := s.expect("GET", "/v1/schedules/nightly", "", http.StatusOK, ""); got["nextAt"] != want["nextAt"] {
		t.Errorf("GET answered %v", got)
	}
	interval := s.expect("PUT", "/v1/schedules/hourly", `{"workflowId":"w","intervalMs":3600000,"start":"2026-01-02T12:30:00Z","end":"2026-01-09T00:00:00Z"}`, http.StatusOK, "")
	if interval["nextAt"] != "2026-01-02T12:30:00Z" || interval["catchUp"] != "latest" || interval["intervalMs"] != float64(3600000) {
		t.Errorf("PUT of an interval schedule answered %v", interval)
	}
	list := s.expect("GET", "/v1/schedules", "", http.StatusOK, "")
	if items, _ := list["schedules"].([]any); len(items) != 2 || items[0].(map[string]any)["id"] != "hourly" {
		t.Errorf("GET /v1/schedules answered %v", list)
	}
	s.expect("DELETE", "/v1/schedules/nightly", "", http.StatusOK, "")
	s.expect("GET", "/v1/schedules/nightly", "", http.StatusNotFound, "SCHEDULE_NOT_FOUND")
	s.expect("DELETE", "/v1/schedules/nightly", "", http.StatusNotFound, "SCHEDULE_NOT_FOUND")
}

// A schedule the store refuses, or a body that breaks the rules, is 400
// INVALID_ARGUMENT and stores nothing.
func TestHTTPScheduleRefusalsAre400(t *testing.T) {
	s := newServer(t)
	for _, body := range []string{
		`{"workflowId":"w","cron":"0 2 * * *","cronOffset":"Europe/Paris","start":"2026-01-01T00:00:00Z"}`,
		`{"workflowId":"w","cron":"0 2 * * *","intervalMs":1000,"start":"2026-01-01T00:00:00Z"}`,
		`{"workflowId":"w","cron":"CRON_TZ=Europe/Paris 0 2 * * *","start":"2026-01-01T00:00:00Z"}`,
		`{"workflowId":"w","cron":"0 2 * * *"}`,
		`{"workflowId":"w","cron":"0 2 * * *","start":"2026-01-01T00:00:00Z","catchUp":"sometimes"}`,
		`{"workflowId":"w","intervalMs":-1,"start":"2026-01-01T00:00:00Z"}`,
	} {
		s.expect("PUT", "/v1/schedules/x", body, http.StatusBadRequest, "INVALID_ARGUMENT")
	}
	s.expect("GET", "/v1/schedules/x", "", http.StatusNotFound, "SCHEDULE_NOT_FOUND")
}
