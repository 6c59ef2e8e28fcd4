package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

func ids(out map[string]any, field, key string) []string {
	var got []string
	list, _ := out[field].([]any)
	for _, r := range list {
		got = append(got, r.(map[string]any)[key].(string))
	}
	return got
}

// GET /v1/executions returns a page of records and the next cursor, and
// follows the cursor to the end.
func TestHTTPListExecutionsPagesWithACursor(t *testing.T) {
	s := newServer(t)
	for _, id := range []string{"a", "b", "c"} {
		s.expect("POST", "/v1/executions", `{"executionId":"`+id+`","workflowId":"w"}`, http.StatusCreated, "")
	}
	s.expect("POST", "/v1/executions", `{"executionId":"x","workflowId":"other"}`, http.StatusCreated, "")
	out := s.expect("GET", "/v1/executions?workflowId=w&status=admitted&order=newest&limit=2&admittedAfter=2026-01-02T12:00:00Z&parentId=", "", http.StatusOK, "")
	if got := ids(out, "records", "executionId"); len(got) != 2 || got[0] != "c" || got[1] != "b" {
		t.Fatalf("first page %v", got)
	}
	cursor, _ := out["cursor"].(string)
	out = s.expect("GET", "/v1/executions?workflowId=w&status=admitted&order=newest&limit=2&admittedAfter=2026-01-02T12:00:00Z&parentId=&cursor="+cursor, "", http.StatusOK, "")
	if got := ids(out, "records", "executionId"); len(got) != 1 || got[0] != "a" || out["cursor"] != "" {
		t.Fatalf("second page %v, cursor %v", got, out["cursor"])
	}
	rec := out["records"].([]any)[0].(map[string]any)
	if rec["workflowId"] != "w" || rec["status"] != "admitted" || rec["admittedAt"] != "2026-01-02T12:00:00Z" {
		t.Fatalf("a listed record is not the record GET returns: %v", rec)
	}
}

// Strict query parsing: an unknown or repeated parameter, or a value that
// does not parse, answers 400; a limit or wait over its cap, 422.
func TestHTTPListAndChangesRefuseUnknownOrBadParameters(t *testing.T) {
	s := newServer(t)
	for _, path := range []string{
		"/v1/executions?state=admitted",
		"/v1/executions?status=admitted&status=failed",
		"/v1/executions?status=running",
		"/v1/executions?order=sideways",
		"/v1/executions?limit=ten",
		"/v1/executions?limit=-1",
		"/v1/executions?admittedAfter=yesterday",
		"/v1/executions?admittedBefore=2026-01-02",
		"/v1/executions?cursor=nope",
		"/v1/executions?%zz",
		"/v1/changes?since=1",
		"/v1/changes?after=-1",
		"/v1/changes?after=1&after=2",
		"/v1/changes?wait=forever",
		"/v1/changes?wait=-1s",
	} {
		s.expect("GET", path, "", http.StatusBadRequest, "INVALID_ARGUMENT")
	}
	// Over a limit: 422, as every limit.
	for _, path := range []string{"/v1/executions?limit=1001", "/v1/changes?limit=2000", "/v1/changes?wait=61s"} {
		s.expect("GET", path, "", http.StatusUnprocessableEntity, "LIMIT_EXCEEDED")
	}
}

// GET /v1/changes returns the changes after a position; with ?wait= it waits
// for the next one (at most 60s) and answers 200 with none if there is
// none.
func TestHTTPChangesReadsTheFeedAndWaitsForTheNextChange(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"a","workflowId":"w"}`, http.StatusCreated, "")
	out := s.expect("GET", "/v1/changes", "", http.StatusOK, "")
	if got := ids(out, "changes", "executionId"); len(got) != 1 || got[0] != "a" || out["next"] != 1.0 || out["last"] != 1.0 {
		t.Fatalf("changes %v", out)
	}
	c := out["changes"].([]any)[0].(map[string]any)
	if c["position"] != 1.0 || c["status"] != "admitted" || c["at"] != "2026-01-02T12:00:00Z" {
		t.Fatalf("change %v", c)
	}
	out = s.expect("GET", "/v1/changes?after=1&wait=10ms", "", http.StatusOK, "")
	if got := ids(out, "changes", "executionId"); len(got) != 0 || out["next"] != 1.0 {
		t.Fatalf("a wait that ended without a change: %v", out)
	}
	done := make(chan map[string]any, 1)
	go func() {
		_, out := s.call("GET", "/v1/changes?after=1&wait=60s", "")
		done <- out
	}()
	// The admission may come before or after the request starts waiting:
	// either way the request answers with it.
	s.expect("POST", "/v1/executions", `{"executionId":"b","workflowId":"w"}`, http.StatusCreated, "")
	select {
	case out := <-done:
		if got := ids(out, "changes", "executionId"); len(got) != 1 || got[0] != "b" {
			t.Fatalf("woken with %v", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting request did not answer after a change")
	}
	st, err := s.store.Stats(context.Background())
	if err != nil || st.LastChange != 2 {
		t.Fatalf("stats %v, %v", st.LastChange, err)
	}
	out = s.expect("GET", "/v1/stats", "", http.StatusOK, "")
	if bs, _ := out["byStatus"].(map[string]any); bs[string(execstore.StatusAdmitted)] != 2.0 || out["lastChange"] != 2.0 {
		t.Fatalf("stats %v", out)
	}
}
