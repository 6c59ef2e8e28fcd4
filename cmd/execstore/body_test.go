package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// bodyFixture is a server holding execution "e" under a current lease,
// execution "f" due and unclaimed, and key "k" set to 1: enough for every
// route to have something a wrongly accepted body would change.
type bodyFixture struct {
	*server
	lease string // e's lease, as the claim answered it
}

func newBodyFixture(t *testing.T) *bodyFixture {
	t.Helper()
	return newBodyFixtureOn(t, newServer(t))
}

// newBodyFixtureOn makes s, a server with an empty store, a body fixture.
func newBodyFixtureOn(t *testing.T, s *server) *bodyFixture {
	t.Helper()
	s.expect("POST", "/v1/executions", `{"executionId":"e","workflowId":"w"}`, http.StatusCreated, "")
	out := s.expect("POST", "/v1/claims", `{"limit":1,"leaseDurationMs":30000}`, http.StatusOK, "")
	leases, _ := out["leases"].([]any)
	if len(leases) != 1 {
		t.Fatalf("claim answered %v", out)
	}
	s.expect("POST", "/v1/executions", `{"executionId":"f","workflowId":"w"}`, http.StatusCreated, "")
	s.expect("POST", "/v1/store/commit", `{"writes":[{"key":"k","value":1}]}`, http.StatusOK, "")
	return &bodyFixture{server: s, lease: string(must(json.Marshal(leases[0])))}
}

// body replaces LEASE in b with e's current lease.
func (f *bodyFixture) body(b string) string { return strings.ReplaceAll(b, "LEASE", f.lease) }

// state is everything a request could change, as text to compare.
func (f *bodyFixture) state() string {
	f.t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, id := range []string{"e", "f"} {
		rec, err := f.store.Get(ctx, id)
		if err != nil {
			f.t.Fatal(err)
		}
		b.Write(must(json.Marshal(recordOut(rec))))
	}
	v, ok, err := f.store.Read(ctx, "k")
	if err != nil {
		f.t.Fatal(err)
	}
	st, err := f.store.Stats(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	b.WriteString(string(v))
	b.Write(must(json.Marshal([]any{ok, st.Executions, st.Pending, st.WALLastIndex})))
	return b.String()
}

// goSpeak is what would show that a message was written for Go programmers
// rather than for the client: Go type names and encoding/json's phrasing.
var goSpeak = []string{
	"Go ", "of type", "int64", "uint64", "struct", "map[", "[]", "time.", "Time", "RawMessage", "JSON",
	"execstore.", "main.", "unmarshal", "2006-01-02",
}

// refuses sends a body that must be refused with 400 and code, a message
// containing msg and no Go speak, and no change to the store.
func (f *bodyFixture) refuses(t *testing.T, method, path, body, code, msg string) {
	t.Helper()
	before := f.state()
	status, out := f.call(method, path, f.body(body))
	message, _ := out["message"].(string)
	if status != http.StatusBadRequest || out["code"] != code {
		t.Fatalf("%s %s %s: %d %v, want 400 %s", method, path, body, status, out, code)
	}
	if !strings.Contains(message, msg) {
		t.Errorf("message %q does not say %q", message, msg)
	}
	for _, g := range goSpeak {
		if strings.Contains(strings.TrimPrefix(message, "request body: "), g) {
			t.Errorf("message %q speaks Go (%q)", message, g)
		}
	}
	if after := f.state(); after != before {
		t.Errorf("a refused body changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

type bodyCase struct {
	name, path, body, msg string
}

// refuseAll runs each case as a subtest on a fresh fixture.
func refuseAll(t *testing.T, cases []bodyCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newBodyFixture(t)
			code := "INVALID_ARGUMENT"
			if c.path == "/v1/executions" {
				code = "INVALID_EXECUTION_EVENT"
			}
			f.refuses(t, "POST", c.path, c.body, code, c.msg)
		})
	}
}

// encoding/json matches field names without regard to case: the body
// decoder must not, at any depth, or one key could shadow another past the
// duplicate-key check and a misspelt key would be taken silently.
func TestHTTPBodyFieldNamesMatchExactly(t *testing.T) {
	refuseAll(t, []bodyCase{
		{"admit, case-variant duplicate after", "/v1/executions", `{"workflowId":"a","WorkflowID":"b"}`, `unknown field "WorkflowID"`},
		{"admit, case-variant duplicate before", "/v1/executions", `{"WorkflowID":"b","workflowId":"a"}`, `unknown field "WorkflowID"`},
		{"admit, case variant alone", "/v1/executions", `{"WorkflowId":"w"}`, `unknown field "WorkflowId" (field names are case-sensitive: did you mean "workflowId"?)`},
		{"admit, lower case", "/v1/executions", `{"workflowid":"w"}`, `did you mean "workflowId"?`},
		{"admit, optional field", "/v1/executions", `{"workflowId":"w","ExecutionID":"x"}`, `unknown field "ExecutionID"`},
		{"wake", "/v1/executions/e/wakes", `{"At":"2026-01-02T12:10:00Z"}`, `unknown field "At"`},
		{"watch", "/v1/executions/e/watches", `{"KEYS":["k"]}`, `unknown field "KEYS"`},
		{"claim", "/v1/claims", `{"limit":1,"LeaseDurationMs":1000}`, `unknown field "LeaseDurationMs"`},
		{"renew, inside the lease", "/v1/leases/renew", `{"lease":{"executionId":"e","Token":1,"expiresAt":"2026-01-02T12:00:30Z"},"leaseDurationMs":1000}`,
			`unknown field "Token" in "lease" (field names are case-sensitive: did you mean "token"?)`},
		{"renew, duplicate inside the lease", "/v1/leases/renew", `{"lease":{"executionId":"e","token":1,"expiresAt":"2026-01-02T12:00:30Z","ExecutionID":"f"},"leaseDurationMs":1000}`,
			`unknown field "ExecutionID" in "lease"`},
		{"release", "/v1/leases/release", `{"lease":LEASE,"retryAfterMs":0,"RetryAfterMs":5}`, `unknown field "RetryAfterMs"`},
		{"acknowledge, inside the outcome", "/v1/leases/acknowledge", `{"lease":LEASE,"outcome":{"status":"completed","Result":1}}`, `unknown field "Result" in "outcome"`},
		{"acknowledge, inside the error", "/v1/leases/acknowledge", `{"lease":LEASE,"outcome":{"status":"failed","error":{"name":"E","message":"m","Code":"X"}}}`,
			`unknown field "Code" in "outcome.error"`},
		{"acknowledge, inside a cause", "/v1/leases/acknowledge", `{"lease":LEASE,"outcome":{"status":"failed","error":{"name":"E","message":"m","cause":{"name":"C","message":"c","CAUSE":{}}}}}`,
			`unknown field "CAUSE" in "outcome.error.cause"`},
		{"save a step", "/v1/leases/steps", `{"lease":LEASE,"key":"s","Value":1}`, `unknown field "Value"`},
		{"start", "/v1/leases/start", `{"lease":LEASE,"stepKey":"s","workflowId":"c","Params":{}}`, `unknown field "Params"`},
		{"commit", "/v1/store/commit", `{"Writes":[]}`, `unknown field "Writes"`},
		{"commit, inside a write", "/v1/store/commit", `{"writes":[{"key":"k","value":2},{"key":"k2","value":2,"VALUE":3}]}`,
			`unknown field "VALUE" in "writes[1]"`},
	})
}

// jsonv's rules, like the field rules, hold inside nested objects.
func TestHTTPBodyRulesHoldInsideNestedObjects(t *testing.T) {
	refuseAll(t, []bodyCase{
		{"invalid UTF-8 in a lease", "/v1/leases/renew", "{\"lease\":{\"executionId\":\"e\xff\",\"token\":1,\"expiresAt\":\"2026-01-02T12:00:30Z\"},\"leaseDurationMs\":1000}",
			"invalid UTF-8"},
		{"duplicate key in a lease", "/v1/leases/renew", `{"lease":{"executionId":"e","token":1,"token":2,"expiresAt":"2026-01-02T12:00:30Z"},"leaseDurationMs":1000}`,
			`duplicate object key "token"`},
		{"duplicate key in a cause", "/v1/leases/acknowledge", `{"lease":LEASE,"outcome":{"status":"failed","error":{"name":"E","message":"m","cause":{"name":"C","name":"D","message":"c"}}}}`,
			`duplicate object key "name"`},
		{"duplicate key in a store value", "/v1/store/commit", `{"writes":[{"key":"k","value":{"a":1,"a":2}}]}`, `duplicate object key "a"`},
	})
}

// The store's Write says a nil value deletes; over HTTP a forgotten field
// must not: deleting takes an explicit null.
func TestHTTPCommitWriteWithoutAValueIsRefusedAndNullDeletes(t *testing.T) {
	f := newBodyFixture(t)
	f.refuses(t, "POST", "/v1/store/commit", `{"writes":[{"key":"k"}]}`, "INVALID_ARGUMENT", `missing required field "value" in "writes[0]"`)
	f.expect("GET", "/v1/store/k", "", http.StatusOK, "")
	f.expect("POST", "/v1/store/commit", `{"writes":[{"key":"k","value":null}]}`, http.StatusOK, "")
	f.expect("GET", "/v1/store/k", "", http.StatusNotFound, "KEY_NOT_FOUND")
}

// A millisecond field is read into a time.Duration, which counts
// nanoseconds in an int64: a value past that range must be refused, never
// wrapped around into some other duration. 18446744074710 ms is 2^64 ns
// plus about one second, so a wrapping multiplication reads it as 1s.
func TestHTTPMillisecondFieldsOutsideADurationAreRefused(t *testing.T) {
	routes := []struct{ name, path, body, field string }{
		{"claim", "/v1/claims", `{"limit":1,"leaseDurationMs":MS}`, "leaseDurationMs"},
		{"renew", "/v1/leases/renew", `{"lease":LEASE,"leaseDurationMs":MS}`, "leaseDurationMs"},
		{"release", "/v1/leases/release", `{"lease":LEASE,"retryAfterMs":MS}`, "retryAfterMs"},
	}
	for _, r := range routes {
		var cases []bodyCase
		for _, ms := range []string{"18446744074710", "9223372036855", "99999999999999999999", "-1", "1.5", "1e3", `"1000"`, "null"} {
			cases = append(cases, bodyCase{r.name + " " + ms, r.path, strings.Replace(r.body, "MS", ms, 1),
				`"` + r.field + `" must be a whole number of milliseconds from 0 to 9223372036854`})
		}
		refuseAll(t, cases)
	}
	// The largest value the decoder takes reaches the store, whose own
	// limit then refuses it.
	f := newBodyFixture(t)
	for _, body := range []string{`{"limit":1,"leaseDurationMs":9223372036854}`, `{"lease":LEASE,"retryAfterMs":9223372036854}`} {
		path := map[bool]string{true: "/v1/claims", false: "/v1/leases/release"}[strings.Contains(body, "limit")]
		out := f.expect("POST", path, f.body(body), http.StatusUnprocessableEntity, "LIMIT_EXCEEDED")
		if msg, _ := out["message"].(string); !strings.Contains(msg, "longer than the limit") {
			t.Errorf("%s: message %q", path, msg)
		}
	}
}

// A value of the wrong kind is refused with a message in terms of the JSON
// the client sent and the path to the field, never Go's types.
func TestHTTPBodyOfTheWrongShapeIsRefusedInJSONTerms(t *testing.T) {
	refuseAll(t, []bodyCase{
		{"string", "/v1/executions", `{"workflowId":1}`, `"workflowId" must be a string`},
		{"map value", "/v1/executions", `{"workflowId":"w","context":{"k":1}}`, `"context.k" must be a string`},
		{"map", "/v1/executions", `{"workflowId":"w","context":["k"]}`, `"context" must be an object`},
		{"null for a string", "/v1/executions", `{"workflowId":null}`, `"workflowId" must be a string`},
		{"integer as string", "/v1/claims", `{"limit":"1","leaseDurationMs":1000}`, `"limit" must be an integer from`},
		{"integer out of range", "/v1/claims", `{"limit":1e100,"leaseDurationMs":1000}`, `"limit" must be an integer from`},
		{"object as array", "/v1/leases/renew", `{"lease":[],"leaseDurationMs":1000}`, `"lease" must be an object`},
		{"null for an object", "/v1/leases/renew", `{"lease":null,"leaseDurationMs":1000}`, `"lease" must be an object`},
		{"token as string", "/v1/leases/renew", `{"lease":{"executionId":"e","token":"1","expiresAt":"2026-01-02T12:00:30Z"},"leaseDurationMs":1000}`,
			`"lease.token" must be an integer from 0 to 18446744073709551615`},
		{"negative token", "/v1/leases/renew", `{"lease":{"executionId":"e","token":-1,"expiresAt":"2026-01-02T12:00:30Z"},"leaseDurationMs":1000}`,
			`"lease.token" must be an integer from 0 to 18446744073709551615`},
		{"time as number", "/v1/executions/e/wakes", `{"at":5}`, `"at" must be an RFC 3339 time`},
		{"time as words", "/v1/executions/e/wakes", `{"at":"soon"}`, `"at" must be an RFC 3339 time`},
		{"time as null", "/v1/executions/e/wakes", `{"at":null}`, `"at" must be an RFC 3339 time`},
		// encoding/json hands time.Time the string as written, escapes and all.
		{"time with an escape", "/v1/executions/e/wakes", `{"at":"2026-01-02T12:10:00\u005a"}`, `"at" must be an RFC 3339 time`},
		{"array", "/v1/executions/e/watches", `{"keys":"k"}`, `"keys" must be an array`},
		{"null for an array", "/v1/executions/e/watches", `{"keys":null}`, `"keys" must be an array`},
		{"null for an integer", "/v1/claims", `{"limit":null,"leaseDurationMs":1000}`, `"limit" must be an integer from`},
		{"array element", "/v1/executions/e/watches", `{"keys":["k",1]}`, `"keys[1]" must be a string`},
		{"status", "/v1/leases/acknowledge", `{"lease":LEASE,"outcome":{"status":1}}`, `"outcome.status" must be a string`},
		{"cause", "/v1/leases/acknowledge", `{"lease":LEASE,"outcome":{"status":"failed","error":{"name":"E","message":"m","cause":"c"}}}`,
			`"outcome.error.cause" must be an object`},
		{"writes", "/v1/store/commit", `{"writes":{}}`, `"writes" must be an array`},
		{"write", "/v1/store/commit", `{"writes":[1]}`, `"writes[0]" must be an object`},
	})
}

// A lease names its execution; when there is no such execution the lease
// cannot be current, and every lease route answers 404
// EXECUTION_NOT_FOUND (docs/http.md lists it) rather than 409 LEASE_LOST.
func TestHTTPLeaseForAnUnknownExecutionIs404(t *testing.T) {
	ghost := `{"executionId":"ghost","token":1,"expiresAt":"2026-01-02T12:00:30Z"}`
	for _, c := range []struct{ path, body string }{
		{"/v1/leases/renew", `{"lease":GHOST,"leaseDurationMs":1000}`},
		{"/v1/leases/release", `{"lease":GHOST,"retryAfterMs":0}`},
		{"/v1/leases/acknowledge", `{"lease":GHOST,"outcome":{"status":"completed","result":1}}`},
		{"/v1/leases/steps", `{"lease":GHOST,"key":"s","value":1}`},
		{"/v1/leases/start", `{"lease":GHOST,"stepKey":"s","workflowId":"c"}`},
	} {
		t.Run(c.path, func(t *testing.T) {
			f := newBodyFixture(t)
			before := f.state()
			out := f.expect("POST", c.path, strings.Replace(c.body, "GHOST", ghost, 1), http.StatusNotFound, "EXECUTION_NOT_FOUND")
			if msg, _ := out["message"].(string); !strings.Contains(msg, `"ghost"`) {
				t.Errorf("message %q does not name the execution", msg)
			}
			if after := f.state(); after != before {
				t.Errorf("a lease on an unknown execution changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// without returns body (a JSON object) without the member at path, whose
// steps are keys and array indexes joined by dots ("writes.0.value").
func without(t *testing.T, body, path string) string {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(body))
	d.UseNumber()
	var root any
	if err := d.Decode(&root); err != nil {
		t.Fatal(err)
	}
	steps := strings.Split(path, ".")
	v := root
	for _, step := range steps[:len(steps)-1] {
		switch c := v.(type) {
		case map[string]any:
			v = c[step]
		case []any:
			i, _ := strconv.Atoi(step)
			v = c[i]
		}
	}
	obj := v.(map[string]any)
	last := steps[len(steps)-1]
	if _, ok := obj[last]; !ok {
		t.Fatalf("%s has no %s", body, path)
	}
	delete(obj, last)
	return string(must(json.Marshal(root)))
}

// A field docs/http.md's route table does not mark with "?" is required, at
// every depth: leaving it out is refused by name, never read as a zero value
// (a release due at once, a lease on execution "", a delete).
func TestHTTPBodyFieldsNotMarkedOptionalAreRequired(t *testing.T) {
	failed := `{"lease":LEASE,"outcome":{"status":"failed","error":{"name":"E","message":"m","code":"C","cause":{"name":"C","message":"c","code":"D"}}}}`
	for _, c := range []struct {
		path, body string
		required   []string
		optional   []string
	}{
		{"/v1/executions", `{"executionId":"x","workflowId":"w","params":{},"context":{"k":"v"}}`, []string{"workflowId"}, []string{"executionId", "params", "context"}},
		{"/v1/executions/e/wakes", `{"at":"2026-01-02T12:10:00Z"}`, []string{"at"}, nil},
		{"/v1/executions/e/watches", `{"keys":["k"]}`, []string{"keys"}, nil},
		{"/v1/claims", `{"limit":1,"leaseDurationMs":1000}`, []string{"limit", "leaseDurationMs"}, nil},
		{"/v1/leases/renew", `{"lease":LEASE,"leaseDurationMs":1000}`, []string{"lease", "leaseDurationMs", "lease.executionId", "lease.token"}, []string{"lease.expiresAt"}},
		{"/v1/leases/release", `{"lease":LEASE,"retryAfterMs":0}`, []string{"lease", "retryAfterMs"}, nil},
		{"/v1/leases/acknowledge", `{"lease":LEASE,"outcome":{"status":"completed","result":1}}`, []string{"outcome", "outcome.status"}, []string{"outcome.result"}},
		{"/v1/leases/acknowledge", failed,
			[]string{"outcome.error", "outcome.error.name", "outcome.error.message", "outcome.error.cause.name", "outcome.error.cause.message"},
			[]string{"outcome.error.code", "outcome.error.cause", "outcome.error.cause.code"}},
		{"/v1/leases/steps", `{"lease":LEASE,"key":"s","value":1}`, []string{"lease", "key", "value"}, nil},
		{"/v1/leases/start", `{"lease":LEASE,"stepKey":"s","workflowId":"c","params":{}}`, []string{"lease", "stepKey", "workflowId"}, []string{"params"}},
		{"/v1/store/commit", `{"writes":[{"key":"k","value":2}]}`, []string{"writes", "writes.0.key", "writes.0.value"}, nil},
	} {
		for _, field := range c.required {
			t.Run(c.path+" without "+field, func(t *testing.T) {
				f := newBodyFixture(t)
				code := "INVALID_ARGUMENT"
				if c.path == "/v1/executions" {
					code = "INVALID_EXECUTION_EVENT"
				}
				parent, name := "", field
				if i := strings.LastIndex(field, "."); i >= 0 {
					parent, name = strings.ReplaceAll(field[:i], ".0", "[0]"), field[i+1:]
				}
				msg := `missing required field "` + name + `"`
				if parent != "" {
					msg += ` in "` + parent + `"`
				}
				f.refuses(t, "POST", c.path, without(t, f.body(c.body), field), code, msg)
			})
		}
		for _, field := range c.optional {
			t.Run(c.path+" without "+field, func(t *testing.T) {
				f := newBodyFixture(t)
				status, out := f.call("POST", c.path, without(t, f.body(c.body), field))
				if status/100 != 2 {
					t.Fatalf("%d %v, want success", status, out)
				}
			})
		}
	}
}

// null is a value for the JSON values the store judges and for an optional
// object; everywhere else it is refused (TestHTTPBodyOfTheWrongShape...).
func TestHTTPNullPassesOnlyAsAJSONValueOrAnOptionalObject(t *testing.T) {
	for _, c := range []struct{ name, path, body, check string }{
		{"result", "/v1/leases/acknowledge", `{"lease":LEASE,"outcome":{"status":"completed","result":null}}`, "null"},
		{"error", "/v1/leases/acknowledge", `{"lease":LEASE,"outcome":{"status":"suspended","error":null}}`, ""},
		{"cause", "/v1/leases/acknowledge", `{"lease":LEASE,"outcome":{"status":"failed","error":{"name":"E","message":"m","cause":null}}}`, ""},
		{"step value", "/v1/leases/steps", `{"lease":LEASE,"key":"s","value":null}`, "null"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newBodyFixture(t)
			f.expect("POST", c.path, f.body(c.body), http.StatusOK, "")
			rec, err := f.store.Get(context.Background(), "e")
			if err != nil {
				t.Fatal(err)
			}
			switch c.name {
			case "result":
				if rec.Outcome == nil || string(rec.Outcome.Result) != "null" {
					t.Fatalf("outcome %+v, want the result null", rec.Outcome)
				}
			case "error":
				if rec.Status != "suspended" {
					t.Fatalf("status %s", rec.Status)
				}
			case "cause":
				if rec.Outcome == nil || rec.Outcome.Error == nil || rec.Outcome.Error.Cause != nil {
					t.Fatalf("outcome %+v, want an error without a cause", rec.Outcome)
				}
			case "step value":
				if v, ok, err := f.store.Step(context.Background(), "e", "s"); err != nil || !ok || string(v) != "null" {
					t.Fatalf("step %q %v %v, want null", v, ok, err)
				}
			}
		})
	}
	// A null params reaches the store, which refuses it.
	f := newBodyFixture(t)
	out := f.expect("POST", "/v1/executions", `{"workflowId":"w","params":null}`, http.StatusBadRequest, "INVALID_EXECUTION_EVENT")
	if msg, _ := out["message"].(string); strings.HasPrefix(msg, "request body:") {
		t.Fatalf("the body rules refused null params: %q", msg)
	}
}
