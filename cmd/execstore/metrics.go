package main

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/metrics"
)

// GET /metrics: the store's metrics and the process's, in Prometheus's text
// format.

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
