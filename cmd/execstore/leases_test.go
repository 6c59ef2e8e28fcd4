package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// A remote worker decides due-ness with the store's time: a claim answers
// it, and the stats count stamps held back by a clock behind it.
func TestHTTPClaimsAnswerTheStoresTimeAndStatsCountAClockBehindIt(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := t0
	set := func(t time.Time) { mu.Lock(); clock = t; mu.Unlock() }
	s := newServerOn(t, func() time.Time { mu.Lock(); defer mu.Unlock(); return clock })
	s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w"}`, http.StatusCreated, "")
	set(t0.Add(time.Hour))
	s.expect("POST", "/v1/store/commit", `{"writes":[{"key":"k","value":1}]}`, http.StatusOK, "")
	set(t0.Add(time.Minute))
	out := s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000}`, http.StatusOK, "")
	if out["now"] != "2026-01-02T13:00:00Z" || len(out["leases"].([]any)) != 1 {
		t.Fatalf("claims answer %v, want one lease and now at the store's time 13:00", out)
	}
	out = s.expect("GET", "/v1/stats", "", http.StatusOK, "")
	if out["clockBehindStamps"] != 1.0 || out["clockBehindMaxMs"] != float64(59*time.Minute/time.Millisecond) || out["clockBehindMs"] != float64(59*time.Minute/time.Millisecond) {
		t.Fatalf("stats %v, want one stamp held back by 59 minutes", out)
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

// An admission's maxAttempts bounds its deliveries; a release's error becomes
// the cause of the ATTEMPTS_EXHAUSTED failure of its last allowed attempt.
func TestHTTPMaxAttemptsAndTheReleasesError(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w","maxAttempts":1}`, 201, "")
	s.expect("POST", "/v1/executions", `{"executionId":"x","workflowId":"w","maxAttempts":65536}`, 422, "LIMIT_EXCEEDED")
	claimed := s.expect("POST", "/v1/claims", `{"limit":10,"leaseDurationMs":60000}`, 200, "")
	leases, _ := claimed["leases"].([]any)
	if len(leases) != 1 {
		t.Fatalf("claims answered %v", claimed)
	}
	lease, _ := json.Marshal(leases[0])
	s.expect("POST", "/v1/leases/release", `{"lease":`+string(lease)+`,"retryAfterMs":0,"error":{"name":"E","message":"card declined","code":"DECLINED"}}`, 200, "")
	rec := s.expect("GET", "/v1/executions/e", "", 200, "")
	outcome, _ := rec["outcome"].(map[string]any)
	errObj, _ := outcome["error"].(map[string]any)
	cause, _ := errObj["cause"].(map[string]any)
	if rec["status"] != "failed" || rec["maxAttempts"] != 1.0 || errObj["code"] != "ATTEMPTS_EXHAUSTED" || cause["code"] != "DECLINED" {
		t.Fatalf("after the last release: %v", rec)
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
		if again["applied"] != false || again["replayed"] != nil || o["result"] != "first" {
			t.Fatalf("repeated acknowledgement %s: %v, want the first outcome with applied false", outcome, again)
		}
	}
	// The same outcome again (a retry whose answer was lost) is a replay.
	again := s.expect("POST", "/v1/leases/acknowledge", `{"lease":`+lease+`,"outcome":{"status":"completed","result":"first"}}`, 200, "")
	if again["applied"] != true || again["replayed"] != true {
		t.Fatalf("the acknowledgement repeated: %v, want applied and replayed", again)
	}

	// A suspension repeated under its own lease, with no claim since, is a
	// replay too; after a later claim, a stale worker's: 409.
	lease = s.claimOne("s")
	s.expect("POST", "/v1/leases/acknowledge", `{"lease":`+lease+`,"outcome":{"status":"suspended"}}`, 200, "")
	again = s.expect("POST", "/v1/leases/acknowledge", `{"lease":`+lease+`,"outcome":{"status":"suspended"}}`, 200, "")
	if again["applied"] != true || again["replayed"] != true || again["status"] != "suspended" {
		t.Fatalf("the suspension repeated: %v, want applied and replayed", again)
	}
	s.expect("POST", "/v1/executions/s/wakes", `{"at":"2000-01-01T00:00:00Z"}`, 200, "")
	if out := s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000}`, 200, ""); len(out["leases"].([]any)) != 1 {
		t.Fatalf("the claim after the wake answered %v", out)
	}
	s.expect("POST", "/v1/leases/acknowledge", `{"lease":`+lease+`,"outcome":{"status":"suspended"}}`, 409, "LEASE_LOST")
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

// An outcome's fields follow its status: a result only with completed, an
// error with failed and only with it. Alone, a body that breaks the rule is
// 400 and writes nothing; in a batch, that acknowledgement alone is refused.
func TestHTTPAnOutcomeCarriesOnlyTheFieldsOfItsStatus(t *testing.T) {
	s := newServer(t)
	lease := s.claimOne("e")
	for _, outcome := range []string{
		`{"status":"failed"}`,
		`{"status":"failed","result":1,"error":{"name":"E","message":"m"}}`,
		`{"status":"completed","error":{"name":"E","message":"m"}}`,
		`{"status":"suspended","result":1}`,
		`{"status":"complete"}`,
	} {
		s.expect("POST", "/v1/leases/acknowledge", `{"lease":`+lease+`,"outcome":`+outcome+`}`, http.StatusBadRequest, "INVALID_ARGUMENT")
		s.expect("POST", "/v1/outcomes/check", `{"outcome":`+outcome+`}`, http.StatusBadRequest, "INVALID_ARGUMENT")
	}
	if rec := s.expect("GET", "/v1/executions/e", "", http.StatusOK, ""); rec["status"] != "admitted" || rec["lease"] == nil {
		t.Fatalf("after refused acknowledgements: %v, want the lease still held", rec)
	}
	out := s.expect("POST", "/v1/leases/acknowledge-batch",
		`{"acknowledgements":[{"lease":`+lease+`,"outcome":{"status":"failed"}},{"lease":`+lease+`,"outcome":{"status":"completed","result":7}}]}`,
		http.StatusOK, "")
	results := out["results"].([]any)
	first, second := results[0].(map[string]any), results[1].(map[string]any)
	if first["code"] != "INVALID_ARGUMENT" || !strings.Contains(first["message"].(string), `"acknowledgements[0].outcome"`) {
		t.Errorf("the refused acknowledgement answered %v", first)
	}
	if second["applied"] != true || second["status"] != "completed" {
		t.Errorf("the valid acknowledgement answered %v", second)
	}
}

// A lease sent back is named by its execution and token: expiresAt may be
// left out, or rounded to milliseconds as JavaScript's Date holds it.
func TestHTTPALeaseSentBackNeedsNoExactExpiry(t *testing.T) {
	s := newServer(t)
	s.claimOne("e")
	rec := s.expect("GET", "/v1/executions/e", "", http.StatusOK, "")
	token := rec["lease"].(map[string]any)["token"]
	s.expect("POST", "/v1/leases/renew", fmt.Sprintf(`{"lease":{"executionId":"e","token":%v},"leaseDurationMs":1000}`, token), http.StatusOK, "")
	s.expect("POST", "/v1/leases/acknowledge",
		fmt.Sprintf(`{"lease":{"executionId":"e","token":%v,"expiresAt":"2026-01-02T12:00:01.123Z"},"outcome":{"status":"completed"}}`, token), http.StatusOK, "")
}

// Queues over HTTP: an admission names its queue or takes its workflow's; a
// claim's queues lease only theirs, with or without acknowledgements first,
// and a waiting claim waits for its own queues' work; the record says the
// queue named; a duplicate trigger's sameEvent compares it; bad names are
// refused.
func TestHTTPQueuesRouteClaims(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"a","workflowId":"charge"}`, 201, "")
	s.expect("POST", "/v1/executions", `{"executionId":"b","workflowId":"email","queue":"bulk"}`, 201, "")
	s.expect("POST", "/v1/executions", `{"executionId":"c","workflowId":"email"}`, 201, "")
	if rec := s.expect("GET", "/v1/executions/b", "", 200, ""); rec["queue"] != "bulk" {
		t.Fatalf("record of b: %v", rec)
	}
	if rec := s.expect("GET", "/v1/executions/a", "", 200, ""); rec["queue"] != nil {
		t.Fatalf("record of a in its default queue: %v", rec)
	}
	conflict := s.expect("POST", "/v1/executions", `{"executionId":"b","workflowId":"email"}`, 409, "EXECUTION_ID_CONFLICT")
	if conflict["sameEvent"] != false {
		t.Fatalf("a trigger of b in another queue: %v", conflict)
	}
	conflict = s.expect("POST", "/v1/executions", `{"executionId":"a","workflowId":"charge","queue":"charge"}`, 409, "EXECUTION_ID_CONFLICT")
	if conflict["sameEvent"] != true {
		t.Fatalf("a trigger of a in its workflow's queue by name: %v", conflict)
	}
	s.expect("POST", "/v1/executions", `{"executionId":"d","workflowId":"w","queue":"bad\u0000"}`, 400, "INVALID_EXECUTION_EVENT")
	s.expect("POST", "/v1/executions", `{"executionId":"d","workflowId":"w","queue":""}`, 400, "INVALID_EXECUTION_EVENT")
	s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000,"queues":[""]}`, 400, "INVALID_ARGUMENT")
	leaseIDs := func(out map[string]any) []string {
		var got []string
		for _, l := range out["leases"].([]any) {
			got = append(got, l.(map[string]any)["executionId"].(string))
		}
		return got
	}
	claimed := s.expect("POST", "/v1/claims", `{"limit":10,"leaseDurationMs":30000,"queues":["email","bulk"]}`, 200, "")
	if got := leaseIDs(claimed); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("claim of email and bulk leased %v", got)
	}
	lease, _ := json.Marshal(claimed["leases"].([]any)[0])
	// Only "a" is due, in queue charge: a claim of email waits its whole
	// waitMs and leases nothing, and the acknowledgement is answered.
	out := s.expect("POST", "/v1/leases/acknowledge-and-claim",
		`{"acknowledgements":[{"lease":`+string(lease)+`,"outcome":{"status":"completed"}}],"limit":5,"leaseDurationMs":30000,"waitMs":50,"queues":["email"]}`, 200, "")
	if got := leaseIDs(out); len(got) != 0 || out["results"].([]any)[0].(map[string]any)["applied"] != true {
		t.Fatalf("acknowledge-and-claim of email answered %v", out)
	}
	if got := leaseIDs(s.expect("POST", "/v1/claims", `{"limit":10,"leaseDurationMs":30000,"queues":["charge"]}`, 200, "")); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("claim of charge leased %v", got)
	}
	sc := s.expect("PUT", "/v1/schedules/nightly", `{"workflowId":"settle","intervalMs":3600000,"start":"2026-01-03T00:00:00Z","queue":"batch"}`, 200, "")
	if sc["queue"] != "batch" {
		t.Fatalf("a schedule put with a queue answered %v", sc)
	}
	s.expect("PUT", "/v1/schedules/bad", `{"workflowId":"settle","intervalMs":3600000,"start":"2026-01-03T00:00:00Z","queue":""}`, 400, "INVALID_ARGUMENT")
}
