package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore"
)

// A replicated store's API (serve --node-id ...): every node serves every
// route. A node that is not the leader forwards each request that needs the
// leader (every write, and every read unless --stale-reads lets a GET read
// here) to the leader's API, whose URL it asks of the leader over the raft
// port (replica.Node.LeaderMeta), and relays the answer unchanged: a client
// may talk to any node. A forwarded request carries forwardedHeader; a node
// never forwards a request that carries it (two nodes that each believe the
// other leads, for a moment, would pass it back and forth), and answers 503
// NOT_LEADER instead, as it does when no leader is known. The client repeats
// the request a moment later: an election takes about a second.
//
// Routes that answer from the node itself are never forwarded: /healthz,
// /metrics, the OpenAPI document, the web view's shell and static files (its
// fragments, which read the store, are), GET /v1/cluster (this node's view
// of the cluster) and GET /v1/stats (this node's state, as Stats reads it).
//
// A forwarded request that fails on its way is NOT_LEADER only when it could
// not have reached the leader (the connection was never made); otherwise its
// outcome is unknown (OUTCOME_UNKNOWN, no Retry-After), as it is for a write
// the leader submitted and then lost its leadership over: repeating it may
// do it twice (an admission with an ID is safe to repeat: a second one is a
// conflict).

// forwardedHeader marks a request one node forwarded to another; its value
// is the forwarding node's ID.
const forwardedHeader = "X-Execstore-Forwarded-By"

// forwarder sends the requests a follower cannot answer to the leader.
type forwarder struct {
	store *execstore.Store
	stale bool // GETs are answered here (ReplicaOptions.StaleReads)
	next  http.Handler

	mu      sync.Mutex
	proxies map[string]*httputil.ReverseProxy // by the leader's API URL
}

// forwardToLeader wraps the API of a replicated store; a single-node store's
// is returned as it is.
func forwardToLeader(store *execstore.Store, stale bool, next http.Handler) http.Handler {
	if store.Node() == nil {
		return next
	}
	return &forwarder{store: store, stale: stale, next: next, proxies: map[string]*httputil.ReverseProxy{}}
}

// answeredHere says which requests a node answers itself.
func answeredHere(r *http.Request, stale bool) bool {
	switch {
	case r.URL.Path == "/healthz", r.URL.Path == "/v1/openapi.json", r.URL.Path == "/metrics", isUIShell(r):
		return true
	case r.Method == http.MethodGet && (r.URL.Path == "/v1/cluster" || r.URL.Path == "/v1/stats"):
		return true
	case stale && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		return true
	}
	return false
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	node := f.store.Node()
	if answeredHere(r, f.stale) || node.State() == raft.Leader {
		f.next.ServeHTTP(w, r)
		return
	}
	if by := r.Header.Get(forwardedHeader); by != "" {
		writeNotLeader(w, fmt.Sprintf("execstore: %s is not the leader (the request was forwarded by %s, which thought it was)", node.ID(), by), "")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	_, leaderURL, err := node.LeaderMeta(ctx)
	cancel()
	if err != nil || leaderURL == "" {
		msg := "execstore: no leader is known; repeat the request in a moment"
		if err != nil && !errors.Is(err, execstore.ErrNotLeader) {
			msg = fmt.Sprintf("execstore: the leader's API address is unknown: %v", err)
		}
		writeNotLeader(w, msg, "")
		return
	}
	proxy, err := f.proxy(leaderURL)
	if err != nil {
		writeNotLeader(w, fmt.Sprintf("execstore: the leader's API address %q: %v", leaderURL, err), "")
		return
	}
	// No route of this node's mux served it: the log names the forward.
	r.Pattern = forwardedRoute
	proxy.ServeHTTP(w, r)
}

// forwardedRoute is the route a node logs for a request it forwarded to
// the leader (the leader logs the route that served it, under the same
// request ID).
const forwardedRoute = "forwarded to the leader"

// proxy returns the reverse proxy to the API at target, made once.
func (f *forwarder) proxy(target string) (*httputil.ReverseProxy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.proxies[target]; ok {
		return p, nil
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("not an http(s) URL")
	}
	node := f.store.Node()
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			// Set on the outgoing request, after the proxy dropped the
			// hop-by-hop headers: a client cannot have it removed.
			pr.Out.Header.Set(forwardedHeader, node.ID())
		},
		// The leader answers with the request's ID, which this node set
		// already (logRequests): one X-Request-ID header, not two.
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del("X-Request-ID")
			return nil
		},
		Transport: forwardTransport,
		// The change feed and await answer after up to a minute: flush as
		// the leader writes.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			node.ForgetLeaderMeta() // the leader may have moved, or its API
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				writeNotLeader(w, fmt.Sprintf("execstore: the leader's API at %s cannot be reached: %v", target, err), target)
				return
			}
			writeJSON(w, http.StatusServiceUnavailable, errorJSONBody{Code: "OUTCOME_UNKNOWN",
				Message: fmt.Sprintf("execstore: forwarding to the leader at %s failed after the request was sent (%v): it may have taken effect", target, err)})
		},
	}
	if len(f.proxies) > 16 {
		clear(f.proxies) // leaders come and go; keep a few
	}
	f.proxies[target] = p
	return p, nil
}

// forwardTransport carries forwarded requests: many may be in flight to one
// leader, so it keeps more idle connections to it than the default's two.
var forwardTransport = &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:        256,
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     90 * time.Second,
}

// writeNotLeader answers 503 NOT_LEADER, with Retry-After: an election
// takes about a second.
func writeNotLeader(w http.ResponseWriter, msg, leader string) {
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, errorJSONBody{Code: "NOT_LEADER", Message: msg, Leader: leader})
}
