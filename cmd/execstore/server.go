package main

import (
	"log/slog"
	"net/http"

	"github.com/execstore/execstore"
)

// newHandler is everything serve answers: the API (api.go) behind the
// token check (auth.go), each request logged (logging.go).
func newHandler(store *execstore.Store, logger *slog.Logger, cfg serveConfig) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", newAPI(store, logger))
	return logRequests(logger, requireToken(cfg.token, isPublic, mux))
}

// isPublic says which requests need no token: the health check, which a
// load balancer asks without credentials and which tells nothing about the
// executions.
func isPublic(r *http.Request) bool {
	return r.URL.Path == "/healthz"
}
