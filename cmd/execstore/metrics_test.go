package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/metrics"
)

// GET /metrics answers Prometheus's text format with the store's metrics
// (those serve hands Open, and the gauges), the Go runtime's and the
// process's, behind the token like every route.
func TestHTTPMetricsExportsTheStoreInPrometheusFormat(t *testing.T) {
	m := metrics.New()
	store, err := execstore.Open(t.TempDir(), execstore.Options{NoSync: true, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(store)
	ts := httptest.NewServer(newHandler(store, slog.New(slog.DiscardHandler), serveConfig{token: testToken, metrics: newRegistry(m)}))
	defer func() { ts.Close(); store.Close() }()
	send(t, "POST", ts.URL+"/v1/executions", "Bearer "+testToken, `{"executionId":"e","workflowId":"w"}`)
	if resp, _ := send(t, "GET", ts.URL+"/metrics", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %d", resp.StatusCode)
	}
	// Counts are handed over once a batch's callers are answered.
	var resp *http.Response
	var body []byte
	for deadline := time.Now().Add(patience); ; {
		resp, body = send(t, "GET", ts.URL+"/metrics", "Bearer "+testToken, "")
		if strings.Contains(string(body), `execstore_commands_total{kind="admit"`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`execstore_commands_total{kind="admit",result="ok"} 1`,
		`execstore_executions{status="admitted"} 1`,
		"execstore_wal_fsync_duration_seconds_bucket",
		"execstore_failed 0",
		"go_goroutines",
		"process_cpu_seconds_total",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
