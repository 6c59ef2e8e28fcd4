package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// A queue's settings over HTTP: put answers the queue with its counts, a
// claim takes no more than its limit, a pause takes nothing, the list pages
// by name, delete lifts them; bad settings are refused.
func TestHTTPQueueSettingsBoundClaims(t *testing.T) {
	s := newServer(t)
	for i := range 4 {
		s.expect("POST", "/v1/executions", fmt.Sprintf(`{"executionId":"c-%d","workflowId":"charge"}`, i), 201, "")
	}
	q := s.expect("PUT", "/v1/queues/charge", `{"concurrency":2}`, 200, "")
	if q["name"] != "charge" || q["concurrency"] != 2.0 || q["paused"] != false || q["live"] != 4.0 || q["due"] != 4.0 || q["leased"] != 0.0 {
		t.Fatalf("put answered %v", q)
	}
	claimed := s.expect("POST", "/v1/claims", `{"limit":10,"leaseDurationMs":30000}`, 200, "")
	if n := len(claimed["leases"].([]any)); n != 2 {
		t.Fatalf("a claim at a limit of 2 leased %d", n)
	}
	s.expect("PUT", "/v1/queues/charge", `{"concurrency":5,"paused":true}`, 200, "")
	if n := len(s.expect("POST", "/v1/claims", `{"limit":10,"leaseDurationMs":30000}`, 200, "")["leases"].([]any)); n != 0 {
		t.Fatalf("a claim of a paused queue leased %d", n)
	}
	s.expect("PUT", "/v1/queues/mail", `{"paused":true}`, 200, "")
	list := s.expect("GET", "/v1/queues", "", 200, "")["queues"].([]any)
	if len(list) != 2 || list[0].(map[string]any)["name"] != "charge" || list[0].(map[string]any)["leased"] != 2.0 || list[1].(map[string]any)["name"] != "mail" {
		t.Fatalf("GET /v1/queues answered %v", list)
	}
	if page := s.expect("GET", "/v1/queues?after=charge", "", 200, "")["queues"].([]any); len(page) != 1 {
		t.Fatalf("GET /v1/queues?after=charge answered %v", page)
	}
	s.expect("GET", "/v1/queues?before=x", "", 400, "INVALID_ARGUMENT")
	s.expect("DELETE", "/v1/queues/charge", "", 200, "")
	if got := s.expect("GET", "/v1/queues/charge", "", 200, ""); got["paused"] != false || got["concurrency"] != 0.0 {
		t.Fatalf("after delete: %v", got)
	}
	if n := len(s.expect("POST", "/v1/claims", `{"limit":10,"leaseDurationMs":30000}`, 200, "")["leases"].([]any)); n != 2 {
		t.Fatalf("a claim after the settings were deleted leased %d, want the other 2", n)
	}
	s.expect("PUT", "/v1/queues/charge", `{"concurrency":-1}`, 400, "INVALID_ARGUMENT")
	s.expect("PUT", "/v1/queues/charge", `{"concurrency":1000001}`, 422, "LIMIT_EXCEEDED")
	s.expect("PUT", "/v1/queues/charge", `{"concurrency":1,"extra":1}`, 400, "INVALID_ARGUMENT")
}

// A rate limit over HTTP: put answers it, a claim grants at most the rate
// in the window and the queue reports what it granted; bad rates and
// periods are refused as the document says.
func TestHTTPARateLimitBoundsClaims(t *testing.T) {
	s := newServer(t)
	for i := range 4 {
		s.expect("POST", "/v1/executions", fmt.Sprintf(`{"executionId":"a-%d","workflowId":"api"}`, i), 201, "")
	}
	q := s.expect("PUT", "/v1/queues/api", `{"rate":3,"ratePeriodMs":60000}`, 200, "")
	if q["rate"] != 3.0 || q["ratePeriodMs"] != 60000.0 || q["granted"] != 0.0 {
		t.Fatalf("put answered %v", q)
	}
	if n := len(s.expect("POST", "/v1/claims", `{"limit":10,"leaseDurationMs":30000}`, 200, "")["leases"].([]any)); n != 3 {
		t.Fatalf("a claim at a rate of 3 a minute leased %d", n)
	}
	if q := s.expect("GET", "/v1/queues/api", "", 200, ""); q["granted"] != 3.0 || q["due"] != 1.0 {
		t.Fatalf("after the claim: %v", q)
	}
	s.expect("PUT", "/v1/queues/api", `{"rate":1}`, 400, "INVALID_ARGUMENT")
	s.expect("PUT", "/v1/queues/api", `{"rate":1,"ratePeriodMs":-5}`, 400, "INVALID_ARGUMENT")
	s.expect("PUT", "/v1/queues/api", `{"ratePeriodMs":1000}`, 400, "INVALID_ARGUMENT")
	s.expect("PUT", "/v1/queues/api", `{"rate":10001,"ratePeriodMs":1000}`, 422, "LIMIT_EXCEEDED")
	s.expect("PUT", "/v1/queues/api", `{"rate":1,"ratePeriodMs":86400001}`, 422, "LIMIT_EXCEEDED")
	s.expect("PUT", "/v1/queues/api", `{"rate":1,"ratePeriodMs":9223372036854775807}`, 422, "LIMIT_EXCEEDED")
	if q := s.expect("GET", "/v1/queues/api", "", 200, ""); q["rate"] != 3.0 {
		t.Fatalf("refused puts changed the settings: %v", q)
	}
}

// A claim naming the most queues, each of the longest name written at its
// widest (every byte as \u00XX), is within the claim route's body limit.
func TestHTTPAClaimOfTheMostQueuesAtTheirWidestIsRead(t *testing.T) {
	s := newServer(t)
	names := make([]string, 64)
	for i := range names {
		names[i] = escaped(fmt.Sprintf("%03d", i) + strings.Repeat("q", 197))
	}
	body := `{"limit":1,"leaseDurationMs":30000,"queues":[` + strings.Join(names, ",") + `]}`
	if out := s.expect("POST", "/v1/claims", body, http.StatusOK, ""); len(out["leases"].([]any)) != 0 {
		t.Fatalf("claim answered %v", out)
	}
}

// Priorities over HTTP: an admission's priority orders the claims, the
// record reports it, and one out of range is refused.
func TestHTTPPrioritiesOrderClaims(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"low","workflowId":"w","priority":5}`, 201, "")
	s.expect("POST", "/v1/executions", `{"executionId":"plain","workflowId":"w"}`, 201, "")
	s.expect("POST", "/v1/executions", `{"executionId":"high","workflowId":"w","priority":1}`, 201, "")
	leases := s.expect("POST", "/v1/claims", `{"limit":10,"leaseDurationMs":30000}`, 200, "")["leases"].([]any)
	var got []string
	for _, l := range leases {
		got = append(got, l.(map[string]any)["executionId"].(string))
	}
	if strings.Join(got, " ") != "high plain low" {
		t.Fatalf("claimed %v, want high plain low", got)
	}
	if rec := s.expect("GET", "/v1/executions/plain", "", 200, ""); rec["priority"] != nil {
		t.Fatalf("a record admitted without a priority: %v", rec)
	}
	if rec := s.expect("GET", "/v1/executions/low", "", 200, ""); rec["priority"] != 5.0 {
		t.Fatalf("a record admitted with priority 5: %v", rec)
	}
	s.expect("POST", "/v1/executions", `{"executionId":"bad","workflowId":"w","priority":6}`, 400, "INVALID_EXECUTION_EVENT")
	s.expect("GET", "/v1/executions/bad", "", 404, "")
}

// A deadline over HTTP: an admission whose deadline has passed fails with
// DEADLINE_EXCEEDED as soon as the writer runs, and the record said its
// deadline until then; a child's deadline is taken by a start.
func TestHTTPADeadlineFailsTheExecution(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"late","workflowId":"w","deadline":"2000-01-01T00:00:00Z"}`, 201, "")
	rec := s.expect("GET", "/v1/executions/late/await?timeoutMs=10000", "", 200, "")
	outcome, _ := rec["outcome"].(map[string]any)
	errBody, _ := outcome["error"].(map[string]any)
	if rec["status"] != "failed" || errBody["code"] != "DEADLINE_EXCEEDED" || rec["deadline"] != nil {
		t.Fatalf("an execution past its deadline: %v", rec)
	}
	s.expect("POST", "/v1/executions", `{"executionId":"far","workflowId":"w","deadline":"2099-01-01T00:00:00Z"}`, 201, "")
	if rec := s.expect("GET", "/v1/executions/far", "", 200, ""); rec["deadline"] != "2099-01-01T00:00:00Z" {
		t.Fatalf("a record with a deadline: %v", rec)
	}
	s.expect("POST", "/v1/executions", `{"executionId":"bad","workflowId":"w","deadline":"soon"}`, 400, "INVALID_EXECUTION_EVENT")
}

// Concurrency keys over HTTP: a queue's key limit bounds the leases of each
// key, the records and the keys route report them, and bad keys and limits
// are refused.
func TestHTTPKeyLimitsBoundClaims(t *testing.T) {
	s := newServer(t)
	q := s.expect("PUT", "/v1/queues/shop", `{"keyLimit":1,"keyMode":"live"}`, 200, "")
	if q["keyLimit"] != 1.0 || q["keyMode"] != "live" || q["parked"] != 0.0 {
		t.Fatalf("put answered %v", q)
	}
	for i := range 3 {
		s.expect("POST", "/v1/executions", fmt.Sprintf(`{"executionId":"c1-%d","workflowId":"shop","concurrencyKey":"customer-1"}`, i), 201, "")
	}
	s.expect("POST", "/v1/executions", `{"executionId":"c2-0","workflowId":"shop","concurrencyKey":"customer-2"}`, 201, "")
	leases := s.expect("POST", "/v1/claims", `{"limit":10,"leaseDurationMs":30000}`, 200, "")["leases"].([]any)
	if len(leases) != 2 {
		t.Fatalf("a claim under a key limit of 1 leased %v", leases)
	}
	if rec := s.expect("GET", "/v1/executions/c1-1", "", 200, ""); rec["concurrencyKey"] != "customer-1" {
		t.Fatalf("record %v", rec)
	}
	if q := s.expect("GET", "/v1/queues/shop", "", 200, ""); q["parked"] != 2.0 || q["due"] != 0.0 {
		t.Fatalf("queue %v, want two parked and none due", q)
	}
	keys := s.expect("GET", "/v1/queues/shop/keys?limit=1", "", 200, "")["keys"].([]any)
	if len(keys) != 1 || keys[0].(map[string]any)["key"] != "customer-1" || keys[0].(map[string]any)["parked"] != 2.0 {
		t.Fatalf("keys %v, want customer-1 with two parked first", keys)
	}
	s.expect("GET", "/v1/queues/shop/keys?limit=1001", "", 400, "INVALID_ARGUMENT")
	s.expect("POST", "/v1/executions", `{"workflowId":"shop","concurrencyKey":""}`, 400, "INVALID_EXECUTION_EVENT")
	s.expect("POST", "/v1/executions", `{"workflowId":"shop","concurrencyKey":"`+strings.Repeat("k", 201)+`"}`, 422, "LIMIT_EXCEEDED")
	s.expect("PUT", "/v1/queues/shop", `{"keyMode":"live"}`, 400, "INVALID_ARGUMENT")
	s.expect("PUT", "/v1/queues/shop", `{"keyLimit":1,"keyMode":"serial"}`, 400, "INVALID_ARGUMENT")
	s.expect("PUT", "/v1/queues/shop", `{"keyLimit":-1}`, 400, "INVALID_ARGUMENT")
	s.expect("PUT", "/v1/queues/shop", `{"keyLimit":1000001}`, 422, "LIMIT_EXCEEDED")
}
