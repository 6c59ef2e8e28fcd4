package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/execstore/execstore"
)

// claimOne admits id and claims it, returning its lease as JSON.
func (s *server) claimOne(id string) string {
	s.t.Helper()
	s.expect("POST", "/v1/executions", `{"executionId":"`+id+`","workflowId":"w"}`, http.StatusCreated, "")
	out := s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000}`, http.StatusOK, "")
	leases, _ := out["leases"].([]any)
	if len(leases) != 1 {
		s.t.Fatalf("claim answered %v", out)
	}
	return string(must(json.Marshal(leases[0])))
}

// A path no route has answers 404 ROUTE_NOT_FOUND, a method its routes do
// not take 405 METHOD_NOT_ALLOWED with the Allow header, and a path that is
// not clean keeps the mux's redirect: all in JSON.
func TestHTTPUnknownRoutesAndWrongMethodsAnswerInJSON(t *testing.T) {
	s := newServer(t)
	s.expect("GET", "/v1/nothing-here", "", http.StatusNotFound, "ROUTE_NOT_FOUND")
	s.expect("GET", "/", "", http.StatusNotFound, "ROUTE_NOT_FOUND")
	s.expect("DELETE", "/v1/executions/e", "", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
	s.expect("GET", "/v1/claims", "", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
	req, _ := http.NewRequest("PATCH", s.url+"/v1/executions", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if allow := resp.Header.Get("Allow"); !strings.Contains(allow, "POST") {
		t.Errorf("405 without an Allow header naming POST: %q", allow)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noRedirect.Get(s.url + "/v1/executions/a/../e")
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if resp.StatusCode/100 != 3 || resp.Header.Get("Location") != "/v1/executions/e" ||
		out["code"] != "ROUTE_NOT_FOUND" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("unclean path: %d %q %v", resp.StatusCode, resp.Header.Get("Location"), out)
	}
}

// One rule for limits: a request over a documented limit answers 422
// LIMIT_EXCEEDED (413 for a body over its route's limit); the same route
// with a malformed request answers 400 with its own code.
func TestHTTPARequestOverALimitIs422AndAMalformedOneIs400(t *testing.T) {
	s := newServer(t)
	lease := s.claimOne("e")
	long := func(n int) string { return strings.Repeat("x", n) }
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"params over 1 MiB", "POST", "/v1/executions", `{"workflowId":"w","params":{"p":"` + long(3<<19) + `"}}`, 422, "LIMIT_EXCEEDED"},
		{"params not an object", "POST", "/v1/executions", `{"workflowId":"w","params":[]}`, 400, "INVALID_EXECUTION_EVENT"},
		{"an execution ID over 200 bytes", "POST", "/v1/executions", `{"executionId":"` + long(201) + `","workflowId":"w"}`, 422, "LIMIT_EXCEEDED"},
		{"an empty workflow ID", "POST", "/v1/executions", `{"workflowId":""}`, 400, "INVALID_EXECUTION_EVENT"},
		{"maxAttempts over 65535", "POST", "/v1/executions", `{"workflowId":"w","maxAttempts":65536}`, 422, "LIMIT_EXCEEDED"},
		{"a claim over 10,000", "POST", "/v1/claims", `{"limit":10001,"leaseDurationMs":1000}`, 422, "LIMIT_EXCEEDED"},
		{"a claim of none", "POST", "/v1/claims", `{"limit":0,"leaseDurationMs":1000}`, 400, "INVALID_ARGUMENT"},
		{"a lease over 24 h", "POST", "/v1/claims", `{"limit":1,"leaseDurationMs":86400001}`, 422, "LIMIT_EXCEEDED"},
		{"a step key over 1024 bytes", "POST", "/v1/leases/steps", `{"lease":` + lease + `,"key":"` + long(1025) + `","value":1}`, 422, "LIMIT_EXCEEDED"},
		{"a step value that is not JSON", "POST", "/v1/leases/steps", `{"lease":` + lease + `,"key":"k","value":1,"x":2}`, 400, "INVALID_ARGUMENT"},
		{"a watch of 65 keys", "POST", "/v1/executions/e/watches", `{"keys":["` + strings.Repeat(`k","`, 64) + `k"]}`, 422, "LIMIT_EXCEEDED"},
		{"a cancel reason over 4096 bytes", "POST", "/v1/executions/e/cancel", `{"reason":"` + long(4097) + `"}`, 422, "LIMIT_EXCEEDED"},
		{"an await over 60 s", "GET", "/v1/executions/e/await?timeout=61s", "", 422, "LIMIT_EXCEEDED"},
		{"an await of no time", "GET", "/v1/executions/e/await?timeout=0s", "", 400, "INVALID_ARGUMENT"},
		{"a step page over ClaimLimit, 10,000", "GET", "/v1/executions/e/steps?limit=10001", "", 422, "LIMIT_EXCEEDED"},
		{"a step page of ClaimLimit", "GET", "/v1/executions/e/steps?limit=10000", "", 200, ""},
		{"a step page of none", "GET", "/v1/executions/e/steps?limit=0", "", 400, "INVALID_ARGUMENT"},
		{"a step page of no number", "GET", "/v1/executions/e/steps?limit=ten", "", 400, "INVALID_ARGUMENT"},
		{"a body over its route's limit", "POST", "/v1/claims", padded(t, `{"limit":1,"leaseDurationMs":1000}`, routeLimit(t, s, "POST /v1/claims")+1), 413, "LIMIT_EXCEEDED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s.t = t
			s.expect(c.method, c.path, c.body, c.status, c.code)
		})
	}
}

// "A stale or repeated acknowledgement of a terminal execution answers with
// the recorded outcome and says so": applied is true for the
// acknowledgement that recorded it, false for a repeat, whose own result
// was not kept.
func TestHTTPARepeatedAcknowledgementAnswersTheRecordedOutcomeNotApplied(t *testing.T) {
	s := newServer(t)
	lease := s.claimOne("e")
	first := s.expect("POST", "/v1/leases/acknowledge", `{"lease":`+lease+`,"outcome":{"status":"completed","result":"first"}}`, 200, "")
	if first["applied"] != true || first["status"] != "completed" {
		t.Fatalf("first acknowledgement: %v", first)
	}
	for _, outcome := range []string{`{"status":"completed","result":"second"}`, `{"status":"suspended"}`} {
		again := s.expect("POST", "/v1/leases/acknowledge", `{"lease":`+lease+`,"outcome":`+outcome+`}`, 200, "")
		o, _ := again["outcome"].(map[string]any)
		if again["applied"] != false || o["result"] != "first" {
			t.Fatalf("repeated acknowledgement %s: %v, want the first outcome with applied false", outcome, again)
		}
	}
}

// "A step save of a key already saved answers with the value that is kept."
func TestHTTPASavedStepKeyAnswersTheKeptValueNotApplied(t *testing.T) {
	s := newServer(t)
	lease := s.claimOne("e")
	out := s.expect("POST", "/v1/leases/steps", `{"lease":`+lease+`,"key":"charge","value":{"receipt":"r-1"}}`, 200, "")
	if out["applied"] != true || fmt.Sprint(out["value"]) != "map[receipt:r-1]" {
		t.Fatalf("first save: %v", out)
	}
	out = s.expect("POST", "/v1/leases/steps", `{"lease":`+lease+`,"key":"charge","value":{"receipt":"r-2"}}`, 200, "")
	if out["applied"] != false || fmt.Sprint(out["value"]) != "map[receipt:r-1]" {
		t.Fatalf("second save: %v, want the first value with applied false", out)
	}
}

// "A duplicate trigger's 409 body says whether the existing execution's
// event equals the request": the same workflow, params in canonical form,
// context and maxAttempts.
func TestHTTPADuplicateTriggerSaysWhetherItsEventIsTheOneAdmitted(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"order-42","workflowId":"charge","params":{"order":42,"total":16},"context":{"tenant":"shop"}}`, 201, "")
	cases := []struct {
		body string
		same bool
	}{
		{`{"executionId":"order-42","workflowId":"charge","params":{"order":42,"total":16},"context":{"tenant":"shop"}}`, true},
		{`{"executionId":"order-42","workflowId":"charge","params":{ "total":16, "order":42 },"context":{"tenant":"shop"}}`, true},
		{`{"executionId":"order-42","workflowId":"charge","params":{"order":42,"total":17},"context":{"tenant":"shop"}}`, false},
		{`{"executionId":"order-42","workflowId":"refund","params":{"order":42,"total":16},"context":{"tenant":"shop"}}`, false},
		{`{"executionId":"order-42","workflowId":"charge","params":{"order":42,"total":16}}`, false},
		{`{"executionId":"order-42","workflowId":"charge","context":{"tenant":"shop"}}`, false},
		{`{"executionId":"order-42","workflowId":"charge","params":{"order":42,"total":16},"context":{"tenant":"shop"},"maxAttempts":3}`, false},
	}
	for _, c := range cases {
		out := s.expect("POST", "/v1/executions", c.body, 409, "EXECUTION_ID_CONFLICT")
		if out["sameEvent"] != c.same {
			t.Errorf("%s: sameEvent %v, want %v", c.body, out["sameEvent"], c.same)
		}
	}
}

// POST /v1/leases/acknowledge-batch gives each acknowledgement its own
// answer, in order: what /v1/leases/acknowledge would answer for it alone.
func TestHTTPAcknowledgeBatchAnswersEachAcknowledgement(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"a","workflowId":"w"}`, 201, "")
	s.expect("POST", "/v1/executions", `{"executionId":"b","workflowId":"w"}`, 201, "")
	out := s.expect("POST", "/v1/claims", `{"limit":2,"leaseDurationMs":30000}`, 200, "")
	leases, _ := out["leases"].([]any)
	la, lb := string(must(json.Marshal(leases[0]))), string(must(json.Marshal(leases[1])))
	ghost := `{"executionId":"ghost","token":1,"expiresAt":"2026-01-02T12:00:30Z"}`
	body := `{"acknowledgements":[` +
		`{"lease":` + la + `,"outcome":{"status":"completed","result":1}},` +
		`{"lease":` + la + `,"outcome":{"status":"completed","result":2}},` +
		`{"lease":` + lb + `,"outcome":{"status":"failed","error":{"name":"E","message":"declined","code":"DECLINED","cause":{"name":"C","message":"card"}}}},` +
		`{"lease":` + ghost + `,"outcome":{"status":"suspended"}},` +
		`{"lease":` + lb + `,"outcome":{"status":"bogus"}}]}`
	out = s.expect("POST", "/v1/leases/acknowledge-batch", body, 200, "")
	results, _ := out["results"].([]any)
	if len(results) != 5 {
		t.Fatalf("results %v", out)
	}
	r := func(i int) map[string]any { return results[i].(map[string]any) }
	if r(0)["applied"] != true || r(0)["executionId"] != "a" {
		t.Errorf("first: %v", r(0))
	}
	if o, _ := r(1)["outcome"].(map[string]any); r(1)["applied"] != false || o["result"] != 1.0 {
		t.Errorf("repeat: %v", r(1))
	}
	cause := r(2)["outcome"].(map[string]any)["error"].(map[string]any)["cause"].(map[string]any)
	if r(2)["status"] != "failed" || cause["message"] != "card" {
		t.Errorf("failed with a cause: %v", r(2))
	}
	if r(3)["code"] != "EXECUTION_NOT_FOUND" || r(4)["code"] != "INVALID_ARGUMENT" {
		t.Errorf("errors: %v, %v", r(3), r(4))
	}
}

// GET /v1/executions/{id}/steps lists the saved steps in key order, a page
// at a time; "next" names the key to continue after while more remain.
func TestHTTPStepsAreListedInPages(t *testing.T) {
	s := newServer(t)
	lease := s.claimOne("e")
	for _, k := range []string{"c", "a", "b"} {
		s.expect("POST", "/v1/leases/steps", `{"lease":`+lease+`,"key":"`+k+`","value":"`+k+k+`"}`, 200, "")
	}
	page := s.expect("GET", "/v1/executions/e/steps?limit=2", "", 200, "")
	if fmt.Sprint(page["steps"]) != "[map[key:a value:aa] map[key:b value:bb]]" || page["next"] != "b" {
		t.Fatalf("first page: %v", page)
	}
	page = s.expect("GET", "/v1/executions/e/steps?limit=2&after=b", "", 200, "")
	if fmt.Sprint(page["steps"]) != "[map[key:c value:cc]]" || page["next"] != nil {
		t.Fatalf("last page: %v", page)
	}
	s.expect("GET", "/v1/executions/nobody/steps", "", 404, "EXECUTION_NOT_FOUND")
}

// POST /v1/outcomes/check answers what an acknowledgement would record,
// writing nothing: a result over the value limit comes back failed with
// INVALID_STEP_VALUE.
func TestHTTPOutcomeCheckAnswersWhatAnAcknowledgementWouldRecord(t *testing.T) {
	s := newServer(t)
	out := s.expect("POST", "/v1/outcomes/check", `{"outcome":{"status":"completed","result":{"ok":true}}}`, 200, "")
	if fmt.Sprint(out["outcome"]) != "map[result:map[ok:true] status:completed]" {
		t.Errorf("a result that fits: %v", out)
	}
	big := `"` + strings.Repeat("x", 3<<19) + `"`
	out = s.expect("POST", "/v1/outcomes/check", `{"outcome":{"status":"completed","result":`+big+`}}`, 200, "")
	o, _ := out["outcome"].(map[string]any)
	if e, _ := o["error"].(map[string]any); o["status"] != "failed" || e["code"] != "INVALID_STEP_VALUE" {
		t.Errorf("a result over the limit: %v", o)
	}
	s.expect("POST", "/v1/outcomes/check", `{"outcome":{"status":"done"}}`, 400, "INVALID_ARGUMENT")
	if st, _ := s.store.Stats(t.Context()); st.WALLastIndex != 0 {
		t.Errorf("a check wrote to the log: %+v", st)
	}
}

// A renewal answers the lease with its new expiry.
func TestHTTPRenewAnswersTheNewExpiry(t *testing.T) {
	s := newServer(t) // the clock stands at 12:00:00
	lease := s.claimOne("e")
	out := s.expect("POST", "/v1/leases/renew", `{"lease":`+lease+`,"leaseDurationMs":90000}`, 200, "")
	if out["expiresAt"] != "2026-01-02T12:01:30Z" || out["token"] != 1.0 {
		t.Fatalf("renew answered %v", out)
	}
}

// Every code statusOf gives a store error, with its status, is one of
// errorCodes, the list the document's error codes are checked against.
func TestEveryStoreErrorAnswersAListedCodeAndStatus(t *testing.T) {
	errs := []error{execstore.ErrExecutionIDConflict, execstore.ErrInvalidExecutionEvent, execstore.ErrExecutionNotFound,
		execstore.ErrLeaseLost, execstore.ErrStartRequestMismatch, execstore.ErrClosed, execstore.ErrInvalidArgument,
		execstore.ErrLimitExceeded, execstore.ErrStorageFailed, execstore.ErrScheduleNotFound,
		context.Canceled, context.DeadlineExceeded, errors.New("a bug")}
	for _, err := range errs {
		code, status := statusOf(err)
		if !slices.Contains(errorCodes[code], status) {
			t.Errorf("%v answers %d %s, which errorCodes does not list", err, status, code)
		}
	}
}

// POST /v1/leases/acknowledge-and-claim answers as acknowledge-batch and
// claims would, in one body; invalid claim arguments refuse the whole call.
func TestHTTPAcknowledgeAndClaimAnswersBothInOneCall(t *testing.T) {
	s := newServer(t)
	for _, id := range []string{"a", "b", "c"} {
		s.expect("POST", "/v1/executions", `{"executionId":"`+id+`","workflowId":"w"}`, 201, "")
	}
	out := s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000}`, 200, "")
	la := string(must(json.Marshal(out["leases"].([]any)[0])))
	s.expect("POST", "/v1/leases/acknowledge-and-claim",
		`{"acknowledgements":[{"lease":`+la+`,"outcome":{"status":"completed"}}],"limit":0,"leaseDurationMs":30000}`, 400, "INVALID_ARGUMENT")
	if rec := s.expect("GET", "/v1/executions/a", "", 200, ""); rec["status"] != "admitted" {
		t.Fatalf("a refused call acknowledged a: %v", rec)
	}
	out = s.expect("POST", "/v1/leases/acknowledge-and-claim",
		`{"acknowledgements":[{"lease":`+la+`,"outcome":{"status":"completed","result":1}}],"limit":5,"leaseDurationMs":30000}`, 200, "")
	results, _ := out["results"].([]any)
	if len(results) != 1 || results[0].(map[string]any)["applied"] != true || results[0].(map[string]any)["status"] != "completed" {
		t.Fatalf("results %v", out["results"])
	}
	var claimed []string
	for _, l := range out["leases"].([]any) {
		claimed = append(claimed, l.(map[string]any)["executionId"].(string))
	}
	if !slices.Equal(claimed, []string{"b", "c"}) || out["now"] == nil {
		t.Fatalf("claimed %v, now %v; want [b c] and the store's time", claimed, out["now"])
	}
}
