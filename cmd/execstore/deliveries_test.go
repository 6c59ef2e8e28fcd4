package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A claim with withExecutions answers each lease's execution as a delivery
// needs it, in the leases' order: workflow, params, context, parent, the
// attempt, and the steps saved so far. Without it, the answer is the leases
// alone, as before.
func TestHTTPAClaimCanCarryWhatEachDeliveryNeeds(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"a","workflowId":"charge","params":{"order":42},"context":{"tenant":"shop"}}`, http.StatusCreated, "")
	s.expect("POST", "/v1/executions", `{"executionId":"b","workflowId":"ship","maxAttempts":3}`, http.StatusCreated, "")
	out := s.expect("POST", "/v1/claims", `{"limit":2,"leaseDurationMs":30000}`, http.StatusOK, "")
	if _, ok := out["executions"]; ok {
		t.Fatalf("a claim without withExecutions answered executions: %v", out)
	}
	leases := out["leases"].([]any)
	la := string(must(json.Marshal(leases[0])))
	s.expect("POST", "/v1/leases/steps", `{"lease":`+la+`,"key":"reserve","value":{"hold":"h-7"}}`, http.StatusOK, "")
	for _, l := range leases {
		s.expect("POST", "/v1/leases/release", `{"lease":`+string(must(json.Marshal(l)))+`,"retryAfterMs":0}`, http.StatusOK, "")
	}

	out = s.expect("POST", "/v1/claims", `{"limit":2,"leaseDurationMs":30000,"withExecutions":true}`, http.StatusOK, "")
	want := []any{
		map[string]any{"executionId": "a", "workflowId": "charge", "params": map[string]any{"order": 42.0}, "context": map[string]any{"tenant": "shop"},
			"attempt": 2.0, "maxAttempts": 0.0, "steps": []any{map[string]any{"key": "reserve", "value": map[string]any{"hold": "h-7"}}}},
		map[string]any{"executionId": "b", "workflowId": "ship", "attempt": 2.0, "maxAttempts": 3.0, "steps": []any{}},
	}
	if diff := cmp.Diff(want, out["executions"]); diff != "" {
		t.Fatalf("executions (-want +got):\n%s", diff)
	}
	for i, l := range out["leases"].([]any) {
		if id := l.(map[string]any)["executionId"]; id != want[i].(map[string]any)["executionId"] {
			t.Fatalf("lease %d is %v's, its execution %v's", i, id, want[i].(map[string]any)["executionId"])
		}
	}

	// acknowledge-and-claim carries them the same way.
	lb := string(must(json.Marshal(out["leases"].([]any)[1])))
	la = string(must(json.Marshal(out["leases"].([]any)[0])))
	s.expect("POST", "/v1/leases/release", `{"lease":`+la+`,"retryAfterMs":0}`, http.StatusOK, "")
	out = s.expect("POST", "/v1/leases/acknowledge-and-claim",
		`{"acknowledgements":[{"lease":`+lb+`,"outcome":{"status":"completed"}}],"limit":5,"leaseDurationMs":30000,"withExecutions":true}`, http.StatusOK, "")
	execs, _ := out["executions"].([]any)
	if len(execs) != 1 || execs[0].(map[string]any)["executionId"] != "a" || execs[0].(map[string]any)["attempt"] != 3.0 {
		t.Fatalf("acknowledge-and-claim's executions: %v", out["executions"])
	}
}

// The steps a claim carries are bounded: an execution's first steps up to
// 1 MiB of values (a larger one alone), the rest left out and said so with
// moreSteps.
func TestHTTPAClaimCarriesStepsUpToItsBound(t *testing.T) {
	s := newServer(t)
	lease := s.claimOne("e")
	big := `"` + strings.Repeat("x", 400<<10) + `"`
	for i := range 4 {
		s.expect("POST", "/v1/leases/steps", fmt.Sprintf(`{"lease":%s,"key":"s%d","value":%s}`, lease, i, big), http.StatusOK, "")
	}
	s.expect("POST", "/v1/leases/release", `{"lease":`+lease+`,"retryAfterMs":0}`, http.StatusOK, "")
	out := s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000,"withExecutions":true}`, http.StatusOK, "")
	d := out["executions"].([]any)[0].(map[string]any)
	steps := d["steps"].([]any)
	if len(steps) != 2 || d["moreSteps"] != true {
		t.Fatalf("carried %d steps of 400 KiB (moreSteps %v), want 2 and moreSteps", len(steps), d["moreSteps"])
	}
	for i, st := range steps {
		if key := st.(map[string]any)["key"]; key != fmt.Sprintf("s%d", i) {
			t.Fatalf("step %d is %v, want the first ones in key order", i, key)
		}
	}
}

// A claim with waitMs that finds nothing due waits for something to be:
// a pending wake's time (the store said when), or a new admission (the store
// signals it), and then answers its lease; waitMs over 60 s is 422.
func TestHTTPAClaimWaitsForWorkWhenAskedTo(t *testing.T) {
	s := newServerOn(t, time.Now)
	lease := s.claimOne("e")
	at := time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	s.expect("POST", "/v1/executions/e/wakes", `{"at":"`+at+`"}`, http.StatusOK, "")
	s.expect("POST", "/v1/leases/acknowledge", `{"lease":`+lease+`,"outcome":{"status":"suspended"}}`, http.StatusOK, "")

	// Nothing is due now: without waitMs the claim answers no lease; with it,
	// the lease of e once its wake comes.
	if out := s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000}`, http.StatusOK, ""); len(out["leases"].([]any)) != 0 {
		t.Fatalf("a claim before the wake leased %v", out["leases"])
	}
	out := s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000,"waitMs":30000}`, http.StatusOK, "")
	if leases := out["leases"].([]any); len(leases) != 1 || leases[0].(map[string]any)["executionId"] != "e" {
		t.Fatalf("a waiting claim answered %v, want e's lease at its wake", out)
	}
	// acknowledge-and-claim waits the same way, after its acknowledgements;
	// an admission during the wait ends it.
	lease = string(must(json.Marshal(out["leases"].([]any)[0])))
	done := make(chan map[string]any, 1)
	go func() {
		_, out := s.call("POST", "/v1/leases/acknowledge-and-claim",
			`{"acknowledgements":[{"lease":`+lease+`,"outcome":{"status":"completed"}}],"limit":1,"leaseDurationMs":30000,"waitMs":30000}`)
		done <- out
	}()
	s.expect("POST", "/v1/executions", `{"executionId":"f","workflowId":"w"}`, http.StatusCreated, "")
	select {
	case out = <-done:
	case <-time.After(patience):
		t.Fatal("the waiting acknowledge-and-claim did not answer after an admission")
	}
	if leases, _ := out["leases"].([]any); len(leases) != 1 || leases[0].(map[string]any)["executionId"] != "f" {
		t.Fatalf("acknowledge-and-claim answered %v, want f's lease", out)
	}
	if rec := s.expect("GET", "/v1/executions/e", "", http.StatusOK, ""); rec["status"] != "completed" {
		t.Fatalf("e after the acknowledgement: %v", rec)
	}
	s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000,"waitMs":60001}`, http.StatusUnprocessableEntity, "LIMIT_EXCEEDED")
}

// An acknowledge-and-claim whose acknowledgements were written answers
// them, even when the claim it then waits to make fails (here the store
// closes while it waits): an error would make the worker send them again.
func TestHTTPAWaitingAcknowledgeAndClaimAnswersItsAcknowledgementsWhenTheClaimFails(t *testing.T) {
	s := newServerOn(t, time.Now)
	lease := s.claimOne("e")
	done := make(chan struct {
		code int
		out  map[string]any
	}, 1)
	go func() {
		code, out := s.call("POST", "/v1/leases/acknowledge-and-claim",
			`{"acknowledgements":[{"lease":`+lease+`,"outcome":{"status":"completed"}}],"limit":1,"leaseDurationMs":30000,"waitMs":60000}`)
		done <- struct {
			code int
			out  map[string]any
		}{code, out}
	}()
	// Once e is completed, the request has written its acknowledgement and
	// waits for work (or is about to: the due signal it took before the
	// claim fires at Close).
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if _, err := s.store.Await(ctx, "e"); err != nil {
		t.Fatalf("e was not completed: %v", err)
	}
	if err := s.store.Close(); err != nil {
		t.Fatal(err)
	}
	var a struct {
		code int
		out  map[string]any
	}
	select {
	case a = <-done:
	case <-time.After(patience):
		t.Fatal("the waiting acknowledge-and-claim did not answer when the store closed")
	}
	results, _ := a.out["results"].([]any)
	if a.code != http.StatusOK || len(results) != 1 || results[0].(map[string]any)["applied"] != true {
		t.Fatalf("acknowledge-and-claim answered %d %v, want its applied acknowledgement", a.code, a.out)
	}
	if leases, ok := a.out["leases"].([]any); !ok || len(leases) != 0 {
		t.Fatalf("acknowledge-and-claim answered leases %v, want none", a.out["leases"])
	}
}

// A claim with a requestKey repeated after a lost answer answers the same
// leases (with their executions when asked) and writes nothing; so does a
// repeated acknowledge-and-claim, its acknowledgements replayed. A repeat
// with other arguments is 400, an empty key 400, one over 128 bytes 422.
func TestHTTPAClaimWithARequestKeyAnswersTheSameLeasesOnARetry(t *testing.T) {
	s := newServerOn(t, time.Now)
	for _, id := range []string{"a", "b", "c", "d"} {
		s.expect("POST", "/v1/executions", `{"executionId":"`+id+`","workflowId":"w","params":{"id":"`+id+`"}}`, http.StatusCreated, "")
	}
	const claim = `{"limit":2,"leaseDurationMs":30000,"withExecutions":true,"requestKey":"worker-1/round-1"}`
	first := s.expect("POST", "/v1/claims", claim, http.StatusOK, "")
	index := s.store.Stats
	before, _ := index(context.Background())
	again := s.expect("POST", "/v1/claims", claim, http.StatusOK, "")
	if diff := cmp.Diff(first["leases"], again["leases"]); diff != "" || len(first["leases"].([]any)) != 2 {
		t.Fatalf("the repeat answered other leases (-first +repeat):\n%s", diff)
	}
	if diff := cmp.Diff(first["executions"], again["executions"]); diff != "" {
		t.Fatalf("the repeat answered other executions (-first +repeat):\n%s", diff)
	}
	if after, _ := index(context.Background()); after.WALLastIndex != before.WALLastIndex {
		t.Fatalf("the repeat wrote to the log (%d -> %d)", before.WALLastIndex, after.WALLastIndex)
	}
	s.expect("POST", "/v1/claims", `{"limit":3,"leaseDurationMs":30000,"requestKey":"worker-1/round-1"}`, http.StatusBadRequest, "INVALID_ARGUMENT")
	s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000,"requestKey":""}`, http.StatusBadRequest, "INVALID_ARGUMENT")
	s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000,"requestKey":"`+strings.Repeat("k", 129)+`"}`, http.StatusUnprocessableEntity, "LIMIT_EXCEEDED")

	// acknowledge-and-claim: the first lease completed, the next claimed.
	lease := string(must(json.Marshal(first["leases"].([]any)[0])))
	round := `{"acknowledgements":[{"lease":` + lease + `,"outcome":{"status":"completed","result":{"ok":true}}}],"limit":2,"leaseDurationMs":30000,"requestKey":"worker-1/round-2"}`
	out := s.expect("POST", "/v1/leases/acknowledge-and-claim", round, http.StatusOK, "")
	repeat := s.expect("POST", "/v1/leases/acknowledge-and-claim", round, http.StatusOK, "")
	results, _ := repeat["results"].([]any)
	if len(results) != 1 || results[0].(map[string]any)["applied"] != true || results[0].(map[string]any)["replayed"] != true {
		t.Fatalf("the repeated round's acknowledgement: %v, want applied and replayed", repeat["results"])
	}
	if diff := cmp.Diff(out["leases"], repeat["leases"]); diff != "" || len(out["leases"].([]any)) != 2 {
		t.Fatalf("the repeated round answered other leases (-first +repeat):\n%s", diff)
	}
}
