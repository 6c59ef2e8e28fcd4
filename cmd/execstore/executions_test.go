package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/execstore/execstore"
)

// "Local or HTTP trigger omits an execution ID | The SDK returns the ID accepted by ExecutionClient."
func TestHTTPTriggerWithoutAnIDReturnsTheGeneratedID(t *testing.T) {
	s := newServer(t)
	out := s.expect("POST", "/v1/executions", `{"workflowId":"w"}`, http.StatusCreated, "")
	id, _ := out["executionId"].(string)
	if _, err := s.store.Get(context.Background(), id); id == "" || err != nil {
		t.Fatalf("returned ID %q not in the store: %v", id, err)
	}
}

// "Local or HTTP trigger supplies an ID in use | The SDK throws ExecutionAdmissionError; the HTTP route returns 409 Conflict."
func TestHTTPTriggerWithAnIDInUseIs409(t *testing.T) {
	s := newServer(t)
	body := `{"executionId":"order-42","workflowId":"charge-order","params":{"order":42},"context":{"tenant":"shop"}}`
	out := s.expect("POST", "/v1/executions", body, http.StatusCreated, "")
	if out["executionId"] != "order-42" {
		t.Fatalf("answer %v", out)
	}
	out = s.expect("POST", "/v1/executions", body, http.StatusConflict, "EXECUTION_ID_CONFLICT")
	if msg, _ := out["message"].(string); msg == "" {
		t.Fatalf("no message: %v", out)
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

func TestHTTPAdmissionRefusesInvalidEvents(t *testing.T) {
	s := newServer(t)
	for _, body := range []string{
		``, `[]`, `{`, `{"workflowId":""}`, `{"workflowId":"w","params":[]}`, `{"workflowId":"w","params":null}`,
		`{"workflowId":"w","params":{"a":1,"a":2}}`, `{"workflowId":"w","workflowId":"x"}`, `{"workflowId":"w","context":{"k":1}}`,
		`{"workflowId":"w","extra":1}`, "{\"workflowId\":\"w\xff\"}",
	} {
		s.expect("POST", "/v1/executions", body, http.StatusBadRequest, "INVALID_EXECUTION_EVENT")
	}
	if st, _ := s.store.Stats(context.Background()); st.Executions != 0 {
		t.Fatalf("a refused admission was stored: %+v", st)
	}
}

func TestHTTPGetReturnsTheRecordInLowerCamelCase(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w","params":{"b":1, "a":2},"context":{"k":"v"}}`, http.StatusCreated, "")
	out := s.expect("GET", "/v1/executions/e", "", http.StatusOK, "")
	want := map[string]any{
		"executionId": "e", "workflowId": "w", "params": map[string]any{"b": 1.0, "a": 2.0},
		"context": map[string]any{"k": "v"}, "status": "admitted",
		"admittedAt": "2026-01-02T12:00:00Z", "updatedAt": "2026-01-02T12:00:00Z", "dueAt": "2026-01-02T12:00:00Z", "attempts": 0.0,
	}
	for k, v := range want {
		if b1, _ := json.Marshal(out[k]); !bytes.Equal(b1, must(json.Marshal(v))) {
			t.Errorf("%s = %v, want %v", k, out[k], v)
		}
	}
	s.expect("GET", "/v1/executions/nobody", "", http.StatusNotFound, "EXECUTION_NOT_FOUND")
}

// lowerCamel is a Go field name as docs/http.md says records spell it:
// ExecutionID is "executionId".
func lowerCamel(name string) string {
	name = strings.ReplaceAll(name, "ID", "Id")
	return string(unicode.ToLower(rune(name[0]))) + name[1:]
}

// Records use the Go field names in lowerCamelCase: every field of
// execstore.Record, and of the types inside it, is in the JSON under that
// name, and nothing else is.
func TestHTTPRecordsUseTheGoFieldNamesInLowerCamelCase(t *testing.T) {
	pairs := []struct{ goType, wire reflect.Type }{
		{reflect.TypeFor[execstore.Record](), reflect.TypeFor[recordJSON]()},
		{reflect.TypeFor[execstore.Outcome](), reflect.TypeFor[outcomeJSON]()},
		{reflect.TypeFor[execstore.WorkflowError](), reflect.TypeFor[errorJSON]()},
		{reflect.TypeFor[execstore.Parent](), reflect.TypeFor[parentJSON]()},
		{reflect.TypeFor[execstore.Lease](), reflect.TypeFor[leaseJSON]()},
	}
	for _, p := range pairs {
		var want, got []string
		for f := range p.goType.Fields() {
			want = append(want, lowerCamel(f.Name))
		}
		for f := range p.wire.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			got = append(got, name)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s travels as %q, want %q", p.goType, got, want)
		}
	}
}

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

func TestHTTPWakes(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w"}`, http.StatusCreated, "")
	out := s.expect("POST", "/v1/executions/e/wakes", `{"at":"2026-01-02T12:10:00Z"}`, http.StatusOK, "")
	if out["status"] != "requested" {
		t.Fatalf("wake answer %v", out)
	}
	s.expect("POST", "/v1/executions/ghost/wakes", `{"at":"2026-01-02T12:10:00Z"}`, http.StatusNotFound, "EXECUTION_NOT_FOUND")
	s.expect("POST", "/v1/executions/e/wakes", `{"at":"soon"}`, http.StatusBadRequest, "INVALID_ARGUMENT")
	s.expect("POST", "/v1/executions/e/wakes", `{}`, http.StatusBadRequest, "INVALID_ARGUMENT")

	// Deliver it to completion over HTTP, then a wake is ignored.
	out = s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000}`, http.StatusOK, "")
	leases := out["leases"].([]any)
	lease, _ := json.Marshal(leases[0])
	s.expect("POST", "/v1/leases/steps", `{"lease":`+string(lease)+`,"key":"charge","value":{"receipt":"r-1"}}`, http.StatusOK, "")
	out = s.expect("POST", "/v1/leases/acknowledge", `{"lease":`+string(lease)+`,"outcome":{"status":"completed","result":{"receipt":"r-1"}}}`, http.StatusOK, "")
	if out["status"] != "completed" {
		t.Fatalf("acknowledge answer %v", out)
	}
	out = s.expect("POST", "/v1/executions/e/wakes", `{"at":"2026-01-02T12:10:00Z"}`, http.StatusOK, "")
	if out["status"] != "ignored" {
		t.Fatalf("wake on terminal: %v", out)
	}
	s.expect("POST", "/v1/leases/renew", `{"lease":`+string(lease)+`,"leaseDurationMs":1000}`, http.StatusConflict, "LEASE_LOST")
	out = s.expect("GET", "/v1/executions/e/await?timeout=1s", "", http.StatusOK, "")
	if out["outcome"].(map[string]any)["result"].(map[string]any)["receipt"] != "r-1" {
		t.Fatalf("await answer %v", out)
	}
	s.expect("GET", "/v1/executions/e/steps/charge", "", http.StatusOK, "")
}

// POST /v1/executions/{id}/cancel cancels an execution and answers with its
// record; a second cancel answers with the same record; an unknown ID is 404
// and a reason over the limit 422.
func TestHTTPCancelAnswersTheCancelledRecord(t *testing.T) {
	s := newServer(t)
	s.expect("POST", "/v1/executions", `{"executionId":"order-42","workflowId":"charge-order"}`, 201, "")
	rec := s.expect("POST", "/v1/executions/order-42/cancel", `{"reason":"the customer cancelled"}`, 200, "")
	outcome, _ := rec["outcome"].(map[string]any)
	errObj, _ := outcome["error"].(map[string]any)
	if rec["status"] != "cancelled" || outcome["status"] != "cancelled" ||
		errObj["message"] != "the customer cancelled" || errObj["code"] != "CANCELLED" {
		t.Fatalf("cancel answered %v", rec)
	}
	again := s.expect("POST", "/v1/executions/order-42/cancel", `{"reason":"again"}`, 200, "")
	if fmt.Sprint(again) != fmt.Sprint(rec) {
		t.Fatalf("a second cancel answered %v, want %v", again, rec)
	}
	s.expect("POST", "/v1/executions/nobody/cancel", `{"reason":""}`, 404, "EXECUTION_NOT_FOUND")
	s.expect("POST", "/v1/executions/order-42/cancel", `{}`, 400, "INVALID_ARGUMENT")
	s.expect("POST", "/v1/executions/order-42/cancel", `{"reason":"`+strings.Repeat("r", 4097)+`"}`, 422, "LIMIT_EXCEEDED")
}

// An execution ID given over HTTP must come back whole at
// /v1/executions/{id}, percent-encoded: an empty one (a client's missing
// value, not a request for a new ID), ".", ".." and "/" are refused with 400
// and nothing is admitted; every other ID, slashes and dots included, is
// admitted and read back. Leaving the field out, or sending null, still
// lets the store choose.
func TestHTTPAnExecutionIDThatAURLCannotCarryIsRefused(t *testing.T) {
	s := newServer(t)
	admit := func(id string) string { return `{"executionId":` + strconv.Quote(id) + `,"workflowId":"w"}` }
	for _, id := range []string{"", ".", "..", "/"} {
		out := s.expect("POST", "/v1/executions", admit(id), http.StatusBadRequest, "INVALID_EXECUTION_EVENT")
		if msg, _ := out["message"].(string); !strings.Contains(msg, "executionId") {
			t.Errorf("%q: the message does not name the field: %q", id, msg)
		}
	}
	if st, err := s.store.Stats(context.Background()); err != nil || st.Executions != 0 || st.WALLastIndex != 0 {
		t.Fatalf("refused IDs admitted %d executions, logged %d entries (%v)", st.Executions, st.WALLastIndex, err)
	}
	out := s.expect("POST", "/v1/executions", `{"executionId":null,"workflowId":"w"}`, http.StatusCreated, "")
	if id, _ := out["executionId"].(string); id == "" {
		t.Fatalf("null: no ID chosen: %v", out)
	}
	// Read without s.call: its check of the answer against openapi.yaml
	// matches paths after decoding them, and a %2F in an ID then reads as
	// two segments.
	readBack := func(id string) {
		t.Helper()
		resp, err := http.Get(s.url + "/v1/executions/" + url.PathEscape(id))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rec map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&rec); err != nil || resp.StatusCode != http.StatusOK || rec["executionId"] != id {
			t.Fatalf("%q read back: %d %v (%v)", id, resp.StatusCode, rec, err)
		}
	}
	for _, id := range []string{"a/b", "a/../b", "./a", "a/.", "..a", "...", "//", "a b", "%2F", "a?b#c", "é/ü"} {
		s.expect("POST", "/v1/executions", admit(id), http.StatusCreated, "")
		readBack(id)
	}
	// Every short ID of path characters is either refused or read back.
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "/.%?#a "
	for range 300 {
		b := make([]byte, 1+rng.IntN(4))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		id := string(b)
		switch got, _ := s.call("POST", "/v1/executions", admit(id)); got {
		case http.StatusCreated:
			readBack(id)
		case http.StatusBadRequest, http.StatusConflict:
		default:
			t.Fatalf("%q: admission answered %d", id, got)
		}
	}
}
