package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

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
