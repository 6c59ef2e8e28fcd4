package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/jsonv"
)

var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// Whatever a client sends, the body decoder either fills the body or
// refuses it with a *bodyError in JSON terms: it never panics, and once its
// rules pass encoding/json never fails (a failure there would answer 500).
func FuzzDecodeBody(f *testing.F) {
	lease := `{"executionId":"e","token":1,"expiresAt":"2026-01-02T12:00:30Z"}`
	for _, seed := range []string{
		`{"executionId":"x","workflowId":"w","params":{"a":[1,{"b":null}]},"context":{"k":"v"}}`,
		`{"workflowId":"a","WorkflowID":"b"}`,
		`{"at":"2026-01-02T12:10:00Z"}`, `{"at":"2026-01-02T12:10:00\u005a"}`, `{"at":"2026-01-02T12:10:00.123456789+01:00"}`,
		`{"keys":["k","\u006b"]}`,
		`{"limit":1,"leaseDurationMs":1000}`, `{"limit":-0,"leaseDurationMs":9223372036854}`, `{"limit":1e3,"leaseDurationMs":18446744074710}`,
		`{"lease":` + lease + `,"leaseDurationMs":1000}`,
		`{"lease":` + lease + `,"retryAfterMs":0}`,
		`{"lease":` + lease + `,"outcome":{"status":"failed","error":{"name":"E","message":"m","cause":{"name":"C","message":"c","cause":null}}}}`,
		`{"lease":` + lease + `,"key":"s","value":null}`,
		`{"lease":` + lease + `,"stepKey":"s","workflowId":"c","params":{}}`,
		`{"writes":[{"key":"k","value":1},{"key":"k","value":null}]}`,
		`{"writes":[{"key":"k","Value":1}]}`,
		`{"workflowId":"w","cron":"0 2 * * *","cronOffset":"-05:00","start":"2026-01-01T00:00:00Z","end":null,"catchUp":"all"}`,
		`{"workflowId":"w","intervalMs":60000,"start":"2026-01-01T00:00:00Z","end":"2026-02-01T00:00:00Z","params":{"n":1}}`,
	} {
		f.Add([]byte(seed))
	}
	types := make([]reflect.Type, 0, len(routeBodies))
	for _, t := range routeBodies {
		types = append(types, t)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if jsonv.ValidateObject(b) != nil {
			return
		}
		for _, typ := range types {
			err := decodeBody(b, reflect.New(typ).Interface())
			var bad *bodyError
			if err != nil && !errors.As(err, &bad) {
				t.Fatalf("%s: %s: not a body error: %v", typ, b, err)
			}
			if bad == nil {
				continue
			}
			// The client's own keys are quoted back; the rest is ours.
			ours := quoted.ReplaceAllString(bad.msg, `""`)
			for _, g := range goSpeak {
				if strings.Contains(ours, g) {
					t.Fatalf("%s: %s: message %q speaks Go (%q)", typ, b, bad.msg, g)
				}
			}
		}
	})
}

// Whatever body a client sends to any route that takes one, the server
// answers JSON the contract describes (openapi.yaml, an error code with its
// status), never a 500, and an error message that does not speak Go.
func FuzzRequestBody(f *testing.F) {
	lease := `{"executionId":"e","token":1,"expiresAt":"2026-01-02T12:00:30Z"}`
	for _, seed := range []string{
		`{"executionId":"x","workflowId":"w","params":{"a":1},"context":{"k":"v"},"maxAttempts":70000}`,
		`{"at":"2026-01-02T12:10:00Z"}`, `{"keys":["k"]}`, `{"reason":"r"}`,
		`{"limit":10001,"leaseDurationMs":1000}`, `{"limit":1,"leaseDurationMs":86400001}`,
		`{"lease":` + lease + `,"leaseDurationMs":1000}`, `{"lease":` + lease + `,"retryAfterMs":0}`,
		`{"lease":` + lease + `,"outcome":{"status":"failed","error":{"name":"E","message":"m","cause":{"name":"C","message":"c"}}}}`,
		`{"acknowledgements":[{"lease":` + lease + `,"outcome":{"status":"completed","result":1}}]}`,
		`{"lease":` + lease + `,"key":"s","value":null}`, `{"lease":` + lease + `,"stepKey":"s","workflowId":"c"}`,
		`{"outcome":{"status":"completed","result":[1,2]}}`, `{"writes":[{"key":"k","value":1}]}`,
		`{"workflowId":"w","intervalMs":60000,"start":"2026-01-01T00:00:00Z"}`, `{`, `[]`, "{\"a\":\"\xff\"}",
	} {
		f.Add(0, []byte(seed))
	}
	store, err := execstore.Open(f.TempDir(), execstore.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	if _, err := store.Admit(context.Background(), execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"}); err != nil {
		f.Fatal(err)
	}
	handler := newAPI(store, slog.New(slog.DiscardHandler))
	routes := make([]string, 0, len(routeBodies))
	for r := range routeBodies {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	f.Fuzz(func(t *testing.T, route int, body []byte) {
		method, path, _ := strings.Cut(routes[uint(route)%uint(len(routes))], " ")
		path = strings.ReplaceAll(path, "{id}", "e")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(method, path, bytes.NewReader(body)))
		if rec.Code == http.StatusInternalServerError {
			t.Fatalf("%s %s %q: 500 %s", method, path, body, rec.Body)
		}
		checkAnswer(t, method, path, rec.Code, rec.Header(), rec.Body.Bytes())
		var e struct{ Message string }
		if json.Unmarshal(rec.Body.Bytes(), &e) == nil && rec.Code >= 400 {
			ours := quoted.ReplaceAllString(e.Message, `""`)
			for _, g := range goSpeak {
				if strings.Contains(ours, g) {
					t.Fatalf("%s %s %q: message %q speaks Go (%q)", method, path, body, e.Message, g)
				}
			}
		}
	})
}
