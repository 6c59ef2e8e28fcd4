package main

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/execstore/execstore"
)

// The whole HTTP surface of serve is the table in routeTable: every route,
// the handler that answers it (each in the file of its resource), the body
// it reads, and whether it is part of the JSON API. openapi.yaml is the
// JSON API's contract; TestEveryRegisteredRouteIsDocumentedAndTheReverse
// holds the two to each other.
//
// The shared plumbing is in files of its own: json.go reads request bodies
// (by the rules of body.go) and writes answers, errors.go turns errors into
// answers, query.go reads query parameters, auth.go checks the token,
// forward.go sends a follower's requests to the leader, logging.go logs
// each request.

// api serves the store over HTTP: JSON bodies, errors as
// {"code": "...", "message": "..."} (errors.go).
type api struct {
	store  *execstore.Store
	logger *slog.Logger
	// drain is closed when the server starts shutting down: a claim that
	// waits for work answers at once (claimWaiting), so that it does not
	// hold the shutdown. nil (never closed) for a mux without a server.
	drain <-chan struct{}
}

// routeKind says how a route answers.
type routeKind int

const (
	// jsonRoute is part of the JSON API.
	jsonRoute routeKind = iota
	// pageRoute answers in a format of its own (HTML, Prometheus's text),
	// which jsonFallback leaves as it is.
	pageRoute
)

// route is one row of the table.
type route struct {
	pattern string // as http.ServeMux reads it: "METHOD /path/{wildcard}"
	handler http.HandlerFunc
	body    requestBody // what the handler decodes, nil for none; its maxBytes bounds the body (limits.go)
	kind    routeKind
}

// routeTable lists every route serve answers.
func routeTable(a *api, u *webUI, metrics http.Handler) []route {
	return []route{
		// executions.go
		{"POST /v1/executions", a.admit, admitBody{}, jsonRoute},
		{"GET /v1/executions", a.list, nil, jsonRoute},
		{"GET /v1/archive", a.listArchived, nil, jsonRoute},
		{recordRoute, a.get, nil, jsonRoute},
		{"GET /v1/executions/{id}/await", a.await, nil, jsonRoute},
		{"POST /v1/executions/{id}/wakes", a.wake, wakeBody{}, jsonRoute},
		{"POST /v1/executions/{id}/watches", a.watch, watchBody{}, jsonRoute},
		{"POST /v1/executions/{id}/cancel", a.cancel, cancelBody{}, jsonRoute},

		// steps.go
		{"GET /v1/executions/{id}/steps", a.listSteps, nil, jsonRoute},
		{"GET /v1/executions/{id}/steps/{key}", a.step, nil, jsonRoute},
		{"POST /v1/leases/steps", a.saveStep, saveStepBody{}, jsonRoute},

		// leases.go
		{"POST /v1/claims", a.claim, claimBody{}, jsonRoute},
		{"POST /v1/leases/renew", a.renew, renewBody{}, jsonRoute},
		{"POST /v1/leases/release", a.release, releaseBody{}, jsonRoute},
		{"POST /v1/leases/acknowledge", a.acknowledge, acknowledgeBody{}, jsonRoute},
		{"POST /v1/leases/acknowledge-batch", a.acknowledgeBatch, acknowledgeBatchBody{}, jsonRoute},
		{"POST /v1/leases/acknowledge-and-claim", a.acknowledgeAndClaim, acknowledgeAndClaimBody{}, jsonRoute},
		{"POST /v1/leases/start", a.start, startBody{}, jsonRoute},
		{"POST /v1/outcomes/check", a.checkOutcome, checkOutcomeBody{}, jsonRoute},

		// kv.go
		{"POST /v1/store/commit", a.commit, commitBody{}, jsonRoute},
		{"GET /v1/store/{key}", a.read, nil, jsonRoute},

		// schedules.go
		{"PUT /v1/schedules/{id}", a.putSchedule, scheduleBody{}, jsonRoute},
		{"GET /v1/schedules/{id}", a.getSchedule, nil, jsonRoute},
		{"DELETE /v1/schedules/{id}", a.deleteSchedule, nil, jsonRoute},
		{"GET /v1/schedules", a.listSchedules, nil, jsonRoute},
		// queues.go
		{"PUT /v1/queues/{name}", a.putQueue, queueBody{}, jsonRoute},
		{"GET /v1/queues/{name}", a.getQueue, nil, jsonRoute},
		{"DELETE /v1/queues/{name}", a.deleteQueue, nil, jsonRoute},
		{"GET /v1/queues", a.listQueues, nil, jsonRoute},
		{"GET /v1/queues/{name}/keys", a.queueKeys, nil, jsonRoute},

		// changes.go
		{"GET /v1/changes", a.changes, nil, jsonRoute},

		// stats.go
		{"GET /v1/stats", a.stats, nil, jsonRoute},
		{"GET /healthz", a.health, nil, jsonRoute},

		// cluster.go
		{"GET /v1/cluster", a.cluster, nil, jsonRoute},
		{"POST /v1/cluster/members", a.addMember, addMemberBody{}, jsonRoute},
		{"DELETE /v1/cluster/members/{id}", a.removeMember, nil, jsonRoute},

		// openapi.go
		{"GET /v1/openapi.json", openAPIHandler(), nil, jsonRoute},

		// metrics.go
		{"GET /metrics", metrics.ServeHTTP, nil, pageRoute},

		// ui.go
		{"GET /ui", u.toShell, nil, pageRoute},
		{"GET /ui/", u.shell, nil, pageRoute},
		{"GET /ui/static/", uiStatic().ServeHTTP, nil, pageRoute},
		{"GET /ui/f/overview", u.fragment(u.overview), nil, pageRoute},
		{"GET /ui/f/executions", u.fragment(u.list), nil, pageRoute},
		{"GET /ui/f/executions/{id}", u.fragment(u.record), nil, pageRoute},
		{"GET /ui/f/schedules", u.fragment(u.schedules), nil, pageRoute},
		{"GET /ui/f/queues", u.fragment(u.queues), nil, pageRoute},
	}
}

// newMux serves every route of the table on one mux, behind jsonFallback:
// whatever the mux answers itself (a path no route has, a method the path's
// routes do not take, a path not in its clean form) is an error in JSON,
// and so is every answer of the JSON API. A JSON route reads at most the
// largest body its body type can take under the store's Limits (limits.go),
// and a route that declares no body reads none. /metrics exports reg (nil:
// the store's gauges alone).
func newMux(store *execstore.Store, logger *slog.Logger, reg prometheus.Gatherer, drain <-chan struct{}) http.Handler {
	a := &api{store: store, logger: logger, drain: drain}
	u := &webUI{store: store, logger: logger}
	lim := store.Limits()
	mux := http.NewServeMux()
	table := routeTable(a, u, metricsHandler(store, reg))
	allow := map[string][]string{} // a path's methods, for a refused HEAD
	for _, rt := range table {
		method, path, _ := strings.Cut(rt.pattern, " ")
		allow[path] = append(allow[path], method)
	}
	for _, rt := range table {
		h := rt.handler
		switch rt.kind {
		case jsonRoute:
			h = withBody(rt.body, &lim, h)
			if method, path, _ := strings.Cut(rt.pattern, " "); method == http.MethodGet {
				h = refuseHead(strings.Join(allow[path], ", "), h)
			}
		case pageRoute:
			h = asIs(h)
		}
		mux.Handle(rt.pattern, h)
	}
	return jsonFallback(mux)
}

// refuseHead answers HEAD, which a GET pattern also matches, with 405 and
// the path's methods: the JSON API documents exactly the methods it serves,
// and HEAD is not one of them.
func refuseHead(allow string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "HEAD is not served; the path takes "+allow)
			return
		}
		next(w, r)
	}
}

// newHandler is everything serve answers: the routes behind the token check
// (auth.go), each request logged (logging.go).
func newHandler(store *execstore.Store, logger *slog.Logger, cfg serveConfig) http.Handler {
	mux := newMux(store, logger, cfg.metrics, cfg.drain)
	// After the token check: a follower forwards only requests it accepted.
	return logRequests(logger, requireToken(cfg.token, isPublic, forwardToLeader(store, cfg.staleReads, mux)))
}

// recordRoute is the pattern of the route that reads a record, which every
// execution ID given over HTTP must survive (survivesURL).
const recordRoute = "GET /v1/executions/{id}"

// survivesURL reports whether id, percent-encoded as a path segment, comes
// back whole as the {id} of the route that reads a record. It asks a mux
// with that route's pattern, as the server's own mux would answer.
func survivesURL(id string) bool {
	req, err := http.NewRequest(http.MethodGet, "/v1/executions/"+url.PathEscape(id), nil)
	if err != nil {
		return false
	}
	var e idEcho
	idRoute.ServeHTTP(&e, req)
	return e.ok && e.id == id
}

// idRoute has the pattern of the route that reads a record (recordRoute,
// in the table above).
var idRoute = func() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc(recordRoute, func(w http.ResponseWriter, r *http.Request) {
		if e, ok := w.(*idEcho); ok {
			e.id, e.ok = r.PathValue("id"), true
		}
	})
	return m
}()

// idEcho is the ResponseWriter idRoute answers into: the {id} it matched.
type idEcho struct {
	id string
	ok bool
	h  http.Header
}

func (e *idEcho) Header() http.Header {
	if e.h == nil {
		e.h = http.Header{}
	}
	return e.h
}
func (e *idEcho) Write(b []byte) (int, error) { return len(b), nil }
func (e *idEcho) WriteHeader(int)             {}
