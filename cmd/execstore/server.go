package main

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/metrics"
)

// newHandler is everything serve answers: the API (api.go) behind the
// token check (auth.go), each request logged (logging.go).
func newHandler(store *execstore.Store, logger *slog.Logger, cfg serveConfig) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", newAPI(store, logger))
	mux.Handle("GET /metrics", metricsHandler(store, cfg.metrics))
	uiRoutes(mux, store, logger) // ui.go
	// After the token check: a follower forwards only requests it accepted.
	return logRequests(logger, requireToken(cfg.token, isPublic, forwardToLeader(store, cfg.staleReads, mux)))
}

// isPublic says which requests need no token: the health check, which a
// load balancer asks without credentials and which tells nothing about the
// executions, and the web view's shell and static files, which hold no data
// (a browser cannot send a token with a page load; the shell's script sends
// it with every request for data).
func isPublic(r *http.Request) bool {
	return r.URL.Path == "/healthz" || isUIShell(r)
}

// newRegistry returns the registry serve exports at /metrics: the store's
// metrics (m, which serve passes to Open as Options.Metrics and points at
// the store with m.Watch), and the Go runtime's and the process's.
func newRegistry(m *metrics.Metrics) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// metricsTimeout bounds a scrape as the API bounds a request's wait.
const metricsTimeout = 10 * time.Second

// metricsHandler serves reg in Prometheus's text format; without one, the
// store's gauges alone (a store opened without Options.Metrics).
func metricsHandler(store *execstore.Store, reg prometheus.Gatherer) http.Handler {
	if reg == nil {
		m := metrics.New()
		m.Watch(store)
		reg = newRegistry(m)
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Timeout: metricsTimeout, MaxRequestsInFlight: 4})
}
