package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/fsm"
)

// routeLimit is the body limit of the route pattern under the limits s's
// store enforces.
func routeLimit(t *testing.T, s *server, pattern string) int64 {
	t.Helper()
	lim := s.store.Limits()
	for _, rt := range routeTable(&api{}, &webUI{}, http.NotFoundHandler()) {
		if rt.pattern == pattern && rt.body != nil {
			return rt.body.maxBytes(&lim)
		}
	}
	t.Fatalf("no route %s with a body", pattern)
	return 0
}

// padded is body followed by spaces to n bytes, which JSON reads as the
// body alone.
func padded(t *testing.T, body string, n int64) string {
	t.Helper()
	if int64(len(body)) > n {
		t.Fatalf("a body of %d bytes does not pad to %d", len(body), n)
	}
	return body + strings.Repeat(" ", int(n)-len(body))
}

// escaped writes s as a JSON string whose every byte is \u00XX: the widest
// an encoder writes it.
func escaped(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, `\u%04x`, s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// A commit whose keys and values total CommitBytes is committed over HTTP at
// the default Limits, however it is written: as eight values of almost a MiB
// each, and as 1024 writes with every byte of every key escaped as \u00XX,
// the widest JSON writes them. One byte more is the store's to refuse (422),
// not the body limit's (413).
func TestHTTPACommitOfCommitBytesIsCommittedEvenWrittenAtItsWidest(t *testing.T) {
	lim := execstore.DefaultLimits
	cases := []struct {
		name  string
		write func(i int, extra bool) (key, keyJSON, value string)
		count int
	}{
		{"eight values of a MiB", func(i int, extra bool) (string, string, string) {
			key := string(rune('a' + i))
			if extra {
				key += "+"
			}
			size := lim.CommitBytes/8 - 1 // the key takes a byte
			return key, `"` + key + `"`, `"` + strings.Repeat("v", size-2) + `"`
		}, 8},
		{"every key byte escaped", func(i int, extra bool) (string, string, string) {
			var key strings.Builder // i in ten bits of < and >, then &: all escaped by HTML-safe encoders
			for bit := range 10 {
				key.WriteByte("<>"[i>>bit&1])
			}
			key.WriteString(strings.Repeat("&", lim.KeyBytes-10))
			size := (lim.CommitBytes - lim.WritesPerCommit*lim.KeyBytes) / lim.WritesPerCommit
			if extra {
				size++
			}
			return key.String(), escaped(key.String()), `"` + strings.Repeat("v", size-2) + `"`
		}, lim.WritesPerCommit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t)
			body := func(extra bool) (string, int) {
				var b strings.Builder
				total := 0
				b.WriteString(`{"writes":[`)
				for i := range c.count {
					key, keyJSON, value := c.write(i, extra && i == 0)
					if i > 0 {
						b.WriteByte(',')
					}
					b.WriteString(`{"key":` + keyJSON + `,"value":` + value + `}`)
					total += len(key) + len(value)
				}
				b.WriteString(`]}`)
				return b.String(), total
			}
			over, total := body(true)
			if total != lim.CommitBytes+1 {
				t.Fatalf("the commit one byte over holds %d bytes, want %d", total, lim.CommitBytes+1)
			}
			out := s.expect("POST", "/v1/store/commit", over, http.StatusUnprocessableEntity, "LIMIT_EXCEEDED")
			if msg, _ := out["message"].(string); !strings.Contains(msg, "the limit of one commit") {
				t.Fatalf("one byte over was refused for another limit: %q", msg)
			}
			at, total := body(false)
			if total != lim.CommitBytes {
				t.Fatalf("the commit holds %d bytes, want %d", total, lim.CommitBytes)
			}
			if len(at) <= 4<<20 {
				t.Fatalf("the body is %d bytes: it proves nothing a fixed 4 MiB limit would not", len(at))
			}
			s.expect("POST", "/v1/store/commit", at, http.StatusOK, "")
			key, _, value := c.write(c.count-1, false)
			if got, ok, err := s.store.Read(t.Context(), key); err != nil || !ok || string(got) != value {
				t.Fatalf("the last write reads back %d bytes, %v, %v", len(got), ok, err)
			}
		})
	}
}

// A body of exactly its route's limit is read: here a commit at the default
// Limits, padded with whitespace to the commit route's limit, is committed.
// One byte more answers 413 LIMIT_EXCEEDED, whose message gives the limit,
// and commits nothing.
func TestHTTPABodyOfExactlyItsRoutesLimitIsRead(t *testing.T) {
	s := newServer(t)
	limit := routeLimit(t, s, "POST /v1/store/commit")
	if limit < 13<<20 {
		t.Fatalf("the commit route's limit at the default Limits is %d bytes, less than a commit of CommitBytes can take", limit)
	}
	out := s.expect("POST", "/v1/store/commit", padded(t, `{"writes":[{"key":"k","value":1}]}`, limit+1), http.StatusRequestEntityTooLarge, "LIMIT_EXCEEDED")
	if want := fmt.Sprintf("request body over the limit of %d bytes", limit); out["message"] != want {
		t.Errorf("message %q, want %q", out["message"], want)
	}
	if _, ok, _ := s.store.Read(t.Context(), "k"); ok {
		t.Fatal("a body over the limit was committed")
	}
	s.expect("POST", "/v1/store/commit", padded(t, `{"writes":[{"key":"k","value":2}]}`, limit), http.StatusOK, "")
	if v, ok, _ := s.store.Read(t.Context(), "k"); !ok || string(v) != "2" {
		t.Fatalf("the body of exactly the limit committed %q, %v", v, ok)
	}
}

// smallLimits make every route's body limit a few kilobytes.
var smallLimits = execstore.Limits{EventBytes: 64, ValueBytes: 32, KeyBytes: 8, ContextEntries: 2, WritesPerCommit: 2,
	CommitBytes: 40, KeysPerWatch: 2, ClaimLimit: 3, AcknowledgeBatchBytes: 100, LeaseDuration: time.Hour, RetryAfter: time.Hour,
	ErrorMessageBytes: 32, ErrorCauseDepth: 1, CancelReasonBytes: 8}

// bodyOfEveryRoute is a body each route that reads one takes, on a body
// fixture, and the path it is sent to.
var bodyOfEveryRoute = map[string]struct{ path, body string }{
	"POST /v1/executions":                   {"/v1/executions", `{"executionId":"x","workflowId":"w"}`},
	"POST /v1/executions/{id}/wakes":        {"/v1/executions/f/wakes", `{"at":"2026-01-02T12:10:00Z"}`},
	"POST /v1/executions/{id}/watches":      {"/v1/executions/f/watches", `{"keys":["k"]}`},
	"POST /v1/executions/{id}/cancel":       {"/v1/executions/f/cancel", `{"reason":"r"}`},
	"POST /v1/leases/steps":                 {"/v1/leases/steps", `{"lease":LEASE,"key":"s","value":1}`},
	"POST /v1/claims":                       {"/v1/claims", `{"limit":1,"leaseDurationMs":1000}`},
	"POST /v1/leases/renew":                 {"/v1/leases/renew", `{"lease":LEASE,"leaseDurationMs":1000}`},
	"POST /v1/leases/release":               {"/v1/leases/release", `{"lease":LEASE,"retryAfterMs":0}`},
	"POST /v1/leases/acknowledge":           {"/v1/leases/acknowledge", `{"lease":LEASE,"outcome":{"status":"completed","result":1}}`},
	"POST /v1/leases/acknowledge-batch":     {"/v1/leases/acknowledge-batch", `{"acknowledgements":[{"lease":LEASE,"outcome":{"status":"suspended"}}]}`},
	"POST /v1/leases/acknowledge-and-claim": {"/v1/leases/acknowledge-and-claim", `{"acknowledgements":[],"limit":1,"leaseDurationMs":1000}`},
	"POST /v1/leases/start":                 {"/v1/leases/start", `{"lease":LEASE,"stepKey":"s","workflowId":"c"}`},
	"POST /v1/outcomes/check":               {"/v1/outcomes/check", `{"outcome":{"status":"suspended"}}`},
	"POST /v1/store/commit":                 {"/v1/store/commit", `{"writes":[{"key":"k","value":2}]}`},
	"PUT /v1/schedules/{id}":                {"/v1/schedules/s", `{"workflowId":"w","intervalMs":1000,"start":"2026-01-01T00:00:00Z"}`},
	"PUT /v1/queues/{name}":                 {"/v1/queues/q", `{"concurrency":2}`},
}

// On every route that reads a body, a body one byte over the route's limit
// answers 413 LIMIT_EXCEEDED and changes nothing, and the same body padded
// to exactly the limit is taken. The store's Limits are small here, so that
// every limit is cheap to reach: the limits follow them.
func TestHTTPABodyOverItsRoutesLimitIs413(t *testing.T) {
	var patterns []string
	for pattern := range routeBodies {
		patterns = append(patterns, pattern)
	}
	sort.Strings(patterns)
	for _, pattern := range patterns {
		if pattern == "POST /v1/cluster/members" {
			continue // a single-node store refuses it before reading the body; cluster_test.go sends it
		}
		c, ok := bodyOfEveryRoute[pattern]
		if !ok {
			t.Errorf("%s reads a body: give it one in bodyOfEveryRoute", pattern)
			continue
		}
		t.Run(pattern, func(t *testing.T) {
			now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
			f := newBodyFixtureOn(t, newServerWith(t, execstore.Options{NoSync: true, Now: func() time.Time { return now }, Limits: smallLimits}))
			method, _, _ := strings.Cut(pattern, " ")
			limit := routeLimit(t, f.server, pattern)
			if limit > 128<<10 { // a claim's 64 queue names at six bytes a byte come near 80 KiB
				t.Fatalf("the limit under small Limits is %d bytes", limit)
			}
			before := f.state()
			f.expect(method, c.path, padded(t, f.body(c.body), limit+1), http.StatusRequestEntityTooLarge, "LIMIT_EXCEEDED")
			if f.state() != before {
				t.Fatal("a body over the limit changed the store")
			}
			if status, out := f.call(method, c.path, padded(t, f.body(c.body), limit)); status/100 != 2 {
				t.Fatalf("a body of exactly the limit: %d %v", status, out)
			}
		})
	}
}

// An acknowledgement batch of AcknowledgeBatchBytes is acknowledged over
// HTTP even with every byte of its strings (the IDs and the errors'
// messages) escaped as \u00XX, which takes about six times as many bytes;
// one byte more is the store's to refuse (422), not the body limit's. The
// store's AcknowledgeBatchBytes is 1 MiB here, so that the body is a few
// MiB (more than a fixed 4 MiB limit took) and cheap to build.
func TestHTTPAnAcknowledgementBatchOfAcknowledgeBatchBytesIsTakenEvenWrittenAtItsWidest(t *testing.T) {
	const target, acks = 1 << 20, 8
	// ClaimLimit is the batch's size, so that the room for the members of
	// acknowledgements that are not there does not hide the strings'.
	limits := execstore.Limits{AcknowledgeBatchBytes: target, ClaimLimit: acks}
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	s := newServerWith(t, execstore.Options{NoSync: true, Now: func() time.Time { return now }, Limits: limits})
	lim := s.store.Limits()
	for i := range acks {
		id := fmt.Sprintf("%s%02d", strings.Repeat("<", execstore.IDBytes-2), i)
		if _, err := s.store.Admit(t.Context(), execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := s.store.ClaimDue(t.Context(), acks, time.Minute)
	if err != nil || len(leases) != acks {
		t.Fatalf("claimed %d: %v", len(leases), err)
	}
	// Each acknowledgement fails with an error of every cause the store
	// keeps, each message of < up to ErrorMessageBytes (a length whose
	// varint stays two bytes), trimmed from the last until the batch's
	// encoded size is the target.
	levels := lim.ErrorCauseDepth + 1
	lengths := make([]int, acks*levels)
	for i := range lengths {
		lengths[i] = min(lim.ErrorMessageBytes, 1<<14-1)
	}
	chain := func(ack int) *fsm.ErrorInfo {
		var e *fsm.ErrorInfo
		for lv := levels - 1; lv >= 0; lv-- {
			e = &fsm.ErrorInfo{Name: "E", Message: strings.Repeat("<", lengths[ack*levels+lv]), Code: "C", Cause: e}
		}
		return e
	}
	encoded := func() int {
		n := 0
		for i, l := range leases {
			n += fsm.AckLen(l.ExecutionID, 1<<63, &fsm.Outcome{Status: fsm.StatusFailed, Error: chain(i)})
		}
		return n
	}
	last := len(lengths) - 1
	for excess := encoded() - target; excess > 0; last-- {
		cut := min(excess, lengths[last]-200)
		lengths[last] -= cut
		excess -= cut
	}
	last++ // the level trimmed last, which has room to grow by a byte
	if encoded() != target {
		t.Fatalf("the batch encodes to %d bytes, want %d", encoded(), target)
	}
	body := func() string {
		var b acknowledgeBatchBody
		for i, l := range leases {
			var e *errorJSON
			for c := chain(i); c != nil; c = c.Cause {
				level := &errorJSON{Name: c.Name, Message: c.Message, Code: c.Code}
				if e == nil {
					b.Acknowledgements = append(b.Acknowledgements, acknowledgeBody{Lease: leaseRefJSON{ExecutionID: l.ExecutionID, Token: l.Token, ExpiresAt: l.ExpiresAt},
						Outcome: outcomeJSON{Status: execstore.StatusFailed, Error: level}})
				} else {
					e.Cause = level
				}
				e = level
			}
		}
		return string(must(json.Marshal(b))) // which escapes every < as \u003c
	}
	lengths[last]++
	if encoded() != target+1 {
		t.Fatalf("one byte more encodes to %d bytes", encoded())
	}
	s.expect("POST", "/v1/leases/acknowledge-batch", body(), http.StatusUnprocessableEntity, "LIMIT_EXCEEDED")
	lengths[last]--
	at := body()
	if len(at) < 5*target {
		t.Fatalf("the body is %d bytes: its strings are not escaped at their widest", len(at))
	}
	out := s.expect("POST", "/v1/leases/acknowledge-batch", at, http.StatusOK, "")
	results, _ := out["results"].([]any)
	for i, r := range results {
		if r, _ := r.(map[string]any); r["applied"] != true || r["status"] != "failed" {
			t.Errorf("acknowledgement %d: %.200v", i, r)
		}
	}
	if len(results) != acks {
		t.Fatalf("%d results, want %d", len(results), acks)
	}
}

// A handler that reads a body its route does not declare answers 500
// INTERNAL rather than read it under another body's limit.
func TestAHandlerReadingABodyItsRouteDoesNotDeclareAnswers500(t *testing.T) {
	store, err := execstore.Open(t.TempDir(), execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	a := &api{store: store, logger: slog.New(slog.DiscardHandler)}
	lim := store.Limits()
	for _, c := range []struct {
		name string
		body requestBody
	}{{"another body", claimBody{}}, {"no body", nil}} {
		rec := httptest.NewRecorder()
		withBody(c.body, &lim, a.renew)(rec, httptest.NewRequest("POST", "/v1/leases/renew", strings.NewReader(`{}`)))
		if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), `"INTERNAL"`) {
			t.Errorf("%s: %d %s", c.name, rec.Code, rec.Body)
		}
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
