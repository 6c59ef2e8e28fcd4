package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// lockedBuffer is a bytes.Buffer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q", sc.Text())
		}
		out = append(out, m)
	}
	return out
}

// serve logs one JSON line per request with its ID (the one sent back in
// X-Request-ID, or the caller's own), the route pattern, the status and the
// duration; health checks and scrapes only at debug level.
func TestServeLogsEachRequestAsJSONWithItsIDRouteStatusAndDuration(t *testing.T) {
	var logs lockedBuffer
	logger, err := newLogger(&logs, "info")
	if err != nil {
		t.Fatal(err)
	}
	store, err := execstore.Open(t.TempDir(), execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newHandler(store, logger, serveConfig{token: testToken}))
	defer func() { ts.Close(); store.Close() }()

	requests := []struct {
		method, path, body, callerID string
		route                        string
		status                       int
	}{
		{"POST", "/v1/executions", `{"executionId":"e","workflowId":"w"}`, "", "POST /v1/executions", 201},
		{"GET", "/v1/executions/e", "", "proxy-id.42", "GET /v1/executions/{id}", 200},
		{"GET", "/v1/executions/missing", "", "not a valid id!", "GET /v1/executions/{id}", 404},
		{"GET", "/healthz", "", "", "GET /healthz", 200},
	}
	var ids []string
	for _, rq := range requests {
		req, _ := http.NewRequest(rq.method, ts.URL+rq.path, strings.NewReader(rq.body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		if rq.callerID != "" {
			req.Header.Set("X-Request-ID", rq.callerID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get("X-Request-ID")
		if id == "" || (rq.callerID == "proxy-id.42" && id != rq.callerID) || (rq.callerID == "not a valid id!" && id == rq.callerID) {
			t.Errorf("%s %s: X-Request-ID %q (caller's %q)", rq.method, rq.path, id, rq.callerID)
		}
		ids = append(ids, id)
	}
	lines := logs.lines(t)
	var requestLines []map[string]any
	for _, l := range lines {
		if l["msg"] == "http request" {
			requestLines = append(requestLines, l)
		}
	}
	if len(requestLines) != 3 { // not the health check, at debug level
		t.Fatalf("%d request lines, want 3:\n%v", len(requestLines), lines)
	}
	for i, l := range requestLines {
		rq := requests[i]
		if l["request_id"] != ids[i] || l["route"] != rq.route || l["status"] != float64(rq.status) || l["level"] != "INFO" {
			t.Errorf("line %d: %v, want id %s, route %q, status %d at INFO", i, l, ids[i], rq.route, rq.status)
		}
		if d, ok := l["duration_ms"].(float64); !ok || d < 0 || d > float64(time.Minute.Milliseconds()) {
			t.Errorf("line %d: duration_ms %v", i, l["duration_ms"])
		}
		if _, err := time.Parse(time.RFC3339Nano, l["time"].(string)); err != nil {
			t.Errorf("line %d: time %v", i, l["time"])
		}
	}
	if _, err := newLogger(&logs, "loud"); err == nil {
		t.Error("an unknown log level was taken")
	}
}
