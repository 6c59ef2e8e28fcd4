package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/replica"
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
	proxy.ServeHTTP(w, r)
}

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

// ---- cluster routes ---------------------------------------------------------

func (a *api) clusterRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/cluster", a.cluster)
	mux.HandleFunc("POST /v1/cluster/members", a.addMember)
	mux.HandleFunc("DELETE /v1/cluster/members/{id}", a.removeMember)
}

type memberJSON struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	Voter    bool   `json:"voter"`
}

type clusterJSON struct {
	Replicated bool         `json:"replicated"`
	NodeID     string       `json:"nodeId,omitempty"`
	State      string       `json:"state,omitempty"` // Leader, Follower, Candidate, Shutdown
	LeaderID   string       `json:"leaderId,omitempty"`
	LeaderAPI  string       `json:"leaderApi,omitempty"`
	Term       uint64       `json:"term,omitempty"`
	Applied    uint64       `json:"appliedIndex,omitempty"`
	Commit     uint64       `json:"commitIndex,omitempty"`
	Members    []memberJSON `json:"members,omitempty"`
}

// cluster answers this node's view of its cluster; {"replicated": false}
// for a single-node store.
func (a *api) cluster(w http.ResponseWriter, r *http.Request) {
	node := a.store.Node()
	if node == nil {
		writeJSON(w, http.StatusOK, clusterJSON{})
		return
	}
	st := node.Stats()
	out := clusterJSON{Replicated: true, NodeID: node.ID(), State: st.State.String(), LeaderID: st.LeaderID,
		Term: st.Term, Applied: st.Applied, Commit: st.CommitIndex}
	if st.LeaderID != "" {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		if _, u, err := node.LeaderMeta(ctx); err == nil {
			out.LeaderAPI = u
		}
		cancel()
	}
	servers, err := node.Servers()
	if err != nil {
		a.fail(w, err)
		return
	}
	for _, s := range servers {
		out.Members = append(out.Members, memberJSON{ID: s.ID, RaftAddr: s.Addr, Voter: s.Voter})
	}
	writeJSON(w, http.StatusOK, out)
}

type addMemberBody struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
}

// addMember adds a voting member (on the leader; a follower forwards) and
// answers once the new configuration is committed. Adding a member that is
// already one, at the same address, changes nothing.
func (a *api) addMember(w http.ResponseWriter, r *http.Request) {
	node, ok := a.replicated(w)
	if !ok {
		return
	}
	var body addMemberBody
	if !a.decode(w, r, &body, execstore.ErrInvalidArgument) {
		return
	}
	if err := checkMember(body.ID, body.RaftAddr); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	if err := node.AddVoter(r.Context(), body.ID, body.RaftAddr); err != nil {
		a.fail(w, err)
		return
	}
	a.cluster(w, r)
}

// removeMember removes a member (on the leader) and answers once the new
// configuration is committed. A leader that removes itself steps down.
func (a *api) removeMember(w http.ResponseWriter, r *http.Request) {
	node, ok := a.replicated(w)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if err := checkMember(id, "-"); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
		return
	}
	if err := node.RemoveServer(r.Context(), id); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": id})
}

// replicated returns the store's node, or answers 400 for a single-node
// store.
func (a *api) replicated(w http.ResponseWriter) (*replica.Node, bool) {
	node := a.store.Node()
	if node == nil {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "execstore: this store is not replicated (serve it with --node-id)")
		return nil, false
	}
	return node, true
}

// maxMemberID bounds a node ID and a raft address.
const maxMemberID = 256

// checkMember checks a member's ID and raft address (addr "-": not given).
func checkMember(id, addr string) error {
	switch {
	case id == "" || len(id) > maxMemberID || strings.ContainsAny(id, " \t\r\n/"):
		return fmt.Errorf("execstore: a member's id must be 1 to %d characters without spaces or slashes, not %q", maxMemberID, id)
	case addr == "-":
		return nil
	case addr == "" || len(addr) > maxMemberID:
		return fmt.Errorf("execstore: a member's raftAddr must be HOST:PORT, at most %d characters", maxMemberID)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("execstore: a member's raftAddr %q: %v", addr, err)
	}
	return nil
}
