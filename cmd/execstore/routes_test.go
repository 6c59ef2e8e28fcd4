package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// newAPI serves every route of the table, without the token check, the
// forwarding and the request log that newHandler puts around them.
func newAPI(store *execstore.Store, logger *slog.Logger) http.Handler {
	return newMux(store, logger, nil, nil)
}

// server is a test's HTTP server over a store of its own; the handler tests
// are in the test file of their resource's file.
type server struct {
	t     *testing.T
	url   string
	store *execstore.Store
}

// newServer serves a store whose clock stands at 2026-01-02 12:00 UTC.
func newServer(t *testing.T) *server {
	t.Helper()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	return newServerOn(t, func() time.Time { return now })
}

// newServerOn serves a store whose clock is now.
func newServerOn(t *testing.T, now func() time.Time) *server {
	t.Helper()
	store, err := execstore.Open(t.TempDir(), execstore.Options{NoSync: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newAPI(store, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { ts.Close(); store.Close() })
	return &server{t: t, url: ts.URL, store: store}
}

// newServerWith serves a store opened with opts.
func newServerWith(t *testing.T, opts execstore.Options) *server {
	t.Helper()
	store, err := execstore.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newAPI(store, slog.New(slog.DiscardHandler)))
	t.Cleanup(func() { ts.Close(); store.Close() })
	return &server{t: t, url: ts.URL, store: store}
}

// call sends a request and decodes the JSON answer.
func (s *server) call(method, path, body string) (int, map[string]any) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	checkAnswer(s.t, method, path, resp.StatusCode, resp.Header, raw)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatalf("%s %s: answer is not a JSON object: %q", method, path, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		s.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return resp.StatusCode, out
}

func (s *server) expect(method, path, body string, status int, code string) map[string]any {
	s.t.Helper()
	got, out := s.call(method, path, body)
	if got != status || (code != "" && out["code"] != code) {
		s.t.Fatalf("%s %s %s: %d %.300v, want %d %s", method, path, shorten(body), got, out, status, code)
	}
	return out
}

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

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
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

// HEAD, which a GET pattern also matches, is not part of the JSON API: it
// answers 405 with the path's methods, as any other method the path does
// not take.
func TestHTTPHeadIsRefusedWithThePathsMethods(t *testing.T) {
	s := newServer(t)
	for path, allow := range map[string]string{
		"/v1/executions":     "POST, GET",
		"/v1/executions/e":   "GET",
		"/v1/schedules/s":    "PUT, GET, DELETE",
		"/v1/openapi.json":   "GET",
		"/healthz":           "GET",
		"/v1/changes?wait=0": "GET",
	} {
		req, _ := http.NewRequest(http.MethodHead, s.url+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != allow {
			t.Errorf("HEAD %s: %d, Allow %q; want 405, Allow %q", path, resp.StatusCode, resp.Header.Get("Allow"), allow)
		}
	}
}

// One rule for limit on every route that takes one: left out or empty, the
// default; under 1 (0 included) 400; over the route's maximum 422.
func TestHTTPEveryLimitKeepsOneRule(t *testing.T) {
	s := newServer(t)
	s.claimOne("e")
	for _, route := range []string{"/v1/executions", "/v1/executions/e/steps", "/v1/changes"} {
		for _, c := range []struct {
			limit  string
			status int
			code   string
		}{
			{"", http.StatusOK, ""},
			{"1", http.StatusOK, ""},
			{"0", http.StatusBadRequest, "INVALID_ARGUMENT"},
			{"-1", http.StatusBadRequest, "INVALID_ARGUMENT"},
			{"x", http.StatusBadRequest, "INVALID_ARGUMENT"},
			{"100000", http.StatusUnprocessableEntity, "LIMIT_EXCEEDED"},
		} {
			s.expect("GET", route+"?limit="+c.limit, "", c.status, c.code)
		}
	}
}
