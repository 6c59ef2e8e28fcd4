package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/replica"
)

func TestHTTPClusterRoutesOnASingleNodeStore(t *testing.T) {
	s := newServer(t)
	out := s.expect("GET", "/v1/cluster", "", http.StatusOK, "")
	if out["replicated"] != false || len(out) != 1 {
		t.Fatalf("GET /v1/cluster on a single node = %v", out)
	}
	s.expect("POST", "/v1/cluster/members", `{"id":"n1","raftAddr":"127.0.0.1:7001"}`, http.StatusBadRequest, "INVALID_ARGUMENT")
	s.expect("DELETE", "/v1/cluster/members/n1", "", http.StatusBadRequest, "INVALID_ARGUMENT")
}

// httpNode is one in-process node of a replicated cluster behind the whole
// handler serve runs.
type httpNode struct {
	store *execstore.Store
	srv   *server
}

// newHTTPCluster opens n replicated stores on loopback TCP, each served by
// serve's handler, and bootstraps them together; bootstrap false leaves the
// nodes outside any cluster (for one to be added).
func newHTTPCluster(t *testing.T, n int, bootstrap bool) []*httpNode {
	t.Helper()
	var nodes []*httpNode
	var peers []execstore.Peer
	for i := range n {
		ts := httptest.NewUnstartedServer(nil)
		url := "http://" + ts.Listener.Addr().String()
		id := fmt.Sprintf("n%d-%p", i, ts)
		store, err := execstore.OpenReplicated(t.TempDir(), execstore.ReplicaOptions{
			Options: execstore.Options{NoSync: true},
			Node:    replica.NodeOptions{ID: id, BindAddr: "127.0.0.1:0", Meta: url},
		})
		if err != nil {
			t.Fatal(err)
		}
		ts.Config.Handler = newHandler(store, slog.New(slog.DiscardHandler), serveConfig{})
		ts.Start()
		t.Cleanup(func() { ts.Close(); store.Close() })
		nodes = append(nodes, &httpNode{store: store, srv: &server{t: t, url: url, store: store}})
		peers = append(peers, execstore.Peer{ID: id, Addr: store.Node().Addr(), Voter: true})
	}
	if bootstrap {
		for _, nd := range nodes {
			if err := nd.store.Node().Bootstrap(peers); err != nil {
				t.Fatal(err)
			}
		}
	}
	return nodes
}

// leaderOf waits until every node knows the same leader and returns it and
// a follower.
func leaderOf(t *testing.T, nodes []*httpNode) (leader, follower *httpNode) {
	t.Helper()
	eventually(t, "every node knows the leader", func() bool {
		leader, follower = nil, nil
		id := ""
		for _, nd := range nodes {
			lid, _ := nd.store.Node().Leader()
			if lid == "" || (id != "" && lid != id) {
				return false
			}
			id = lid
			if lid == nd.store.Node().ID() {
				leader = nd
			} else {
				follower = nd
			}
		}
		return leader != nil && follower != nil
	})
	return leader, follower
}

func TestHTTPAFollowerForwardsToTheLeaderButNeverForwardsTwice(t *testing.T) {
	nodes := newHTTPCluster(t, 3, true)
	leader, follower := leaderOf(t, nodes)
	f := follower.srv

	// Any node takes any request.
	f.expect("POST", "/v1/executions", `{"executionId":"order-1","workflowId":"w"}`, http.StatusCreated, "")
	f.expect("POST", "/v1/executions", `{"executionId":"order-1","workflowId":"w"}`, http.StatusConflict, "EXECUTION_ID_CONFLICT")
	if out := f.expect("GET", "/v1/executions/order-1", "", http.StatusOK, ""); out["status"] != "admitted" {
		t.Fatalf("GET through the follower = %v", out)
	}
	if _, err := leader.store.Get(context.Background(), "order-1"); err != nil {
		t.Fatalf("the admission through the follower is not on the leader: %v", err)
	}
	// A forwarded request answers with one request ID: the caller's, or the
	// follower's, which the leader took over.
	for _, given := range []string{"caller-id-1", ""} {
		req, _ := http.NewRequest("GET", f.url+"/v1/executions/order-1", nil)
		if given != "" {
			req.Header.Set("X-Request-ID", given)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		ids := resp.Header.Values("X-Request-ID")
		if resp.StatusCode != http.StatusOK || len(ids) != 1 || (given != "" && ids[0] != given) {
			t.Fatalf("forwarded with X-Request-ID %q: %d, answered with %q", given, resp.StatusCode, ids)
		}
	}

	// The follower answers its own view, its own health and its own stats,
	// even to a request forwarded to it.
	f.expect("GET", "/healthz", "", http.StatusOK, "")
	statsReq, _ := http.NewRequest("GET", f.url+"/v1/stats", nil)
	statsReq.Header.Set(forwardedHeader, "elsewhere")
	if resp, err := http.DefaultClient.Do(statsReq); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/stats on a follower = %v, %v; want it answered there", resp, err)
	} else {
		resp.Body.Close()
	}
	out := f.expect("GET", "/v1/cluster", "", http.StatusOK, "")
	if out["state"] != "Follower" || out["leaderId"] != leader.store.Node().ID() || out["leaderApi"] != leader.srv.url {
		t.Fatalf("GET /v1/cluster on the follower = %v", out)
	}
	if members, _ := out["members"].([]any); len(members) != 3 {
		t.Fatalf("members = %v", out["members"])
	}

	// A request another node forwarded is never forwarded again.
	req, _ := http.NewRequest("GET", f.url+"/v1/executions/order-1", nil)
	req.Header.Set(forwardedHeader, "elsewhere")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	checkAnswer(t, "GET", "/v1/executions/order-1", resp.StatusCode, resp.Header, body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"NOT_LEADER"`) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a forwarded request on a follower = %d %s (Retry-After %q), want 503 NOT_LEADER", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}

	// Membership through a follower: a fourth node is added, then removed.
	extra := newHTTPCluster(t, 1, false)[0]
	f.expect("POST", "/v1/cluster/members", `{"id":"has space","raftAddr":"127.0.0.1:1"}`, http.StatusBadRequest, "INVALID_ARGUMENT")
	f.expect("POST", "/v1/cluster/members", `{"id":"x","raftAddr":"no-port"}`, http.StatusBadRequest, "INVALID_ARGUMENT")
	// serve --join asks through the follower, which forwards to the leader.
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	joinCluster(ctx, f.url, "", extra.store, slog.New(slog.DiscardHandler))
	cancel()
	membersEventually(t, leader.srv, 4, "after the fourth joined")
	membersEventually(t, f, 4, "after the fourth joined")
	// Adding a member again changes nothing.
	body4 := fmt.Sprintf(`{"id":%q,"raftAddr":%q}`, extra.store.Node().ID(), extra.store.Node().Addr())
	out = f.expect("POST", "/v1/cluster/members", body4, http.StatusOK, "")
	if members, _ := out["members"].([]any); len(members) != 4 {
		t.Fatalf("after adding the fourth again: members = %v", out["members"])
	}
	eventually(t, "the fourth node applies the admission", func() bool {
		var found bool
		extra.store.Node().ReadStale(func(st *fsm.State) { _, found = st.Get("order-1") })
		return found
	})
	f.expect("DELETE", "/v1/cluster/members/"+extra.store.Node().ID(), "", http.StatusOK, "")
	// The leader answered once the removal was committed: its own view has
	// it at once; the follower's, once the entry reaches it.
	out = leader.srv.expect("GET", "/v1/cluster", "", http.StatusOK, "")
	if members, _ := out["members"].([]any); len(members) != 3 {
		t.Fatalf("the leader's view after removing it: members = %v", out["members"])
	}
	membersEventually(t, f, 3, "after removing it")
}

// membersEventually waits, with a bound, until s's own view of the cluster
// (GET /v1/cluster) lists n members. A follower learns of a membership change
// when its log entry reaches it, which may be after the leader answered.
func membersEventually(t *testing.T, s *server, n int, when string) {
	t.Helper()
	var last any
	defer func() {
		if t.Failed() {
			t.Logf("%s: %s listed members %v", when, s.url, last)
		}
	}()
	eventually(t, fmt.Sprintf("%s lists %d members %s", s.url, n, when), func() bool {
		last = s.expect("GET", "/v1/cluster", "", http.StatusOK, "")["members"]
		members, _ := last.([]any)
		return len(members) == n
	})
}

func TestServeRefusesReplicaFlagsThatDoNotGoTogether(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--raft-addr", "127.0.0.1:7000"}, "need --node-id"},
		{[]string{"--stale-reads"}, "need --node-id"},
		{[]string{"--node-id", "n0"}, "needs --raft-addr"},
		{[]string{"--node-id", "a b", "--raft-addr", "127.0.0.1:7000"}, "without spaces"},
		{[]string{"--node-id", "n0", "--raft-addr", "127.0.0.1:7000", "--peers", "n0=127.0.0.1:7000", "--join", "http://x"}, "give one"},
		{[]string{"--node-id", "n0", "--raft-addr", "127.0.0.1:7000", "--peers", "n0"}, "is not ID=HOST:PORT"},
		{[]string{"--node-id", "n0", "--raft-addr", "127.0.0.1:7000", "--peers", "n0=127.0.0.1:7000,n0=127.0.0.1:7001"}, "given twice"},
		{[]string{"--node-id", "n0", "--raft-addr", "127.0.0.1:7000", "--peers", "n0=nowhere"}, "raftAddr"},
		{[]string{"--node-id", "n0", "--raft-addr", "127.0.0.1:0", "--addr", "0.0.0.0:0", "--insecure"}, "give --api-url"},
	} {
		dir := t.TempDir()
		err := serve(append([]string{"--data", dir + "/data", "--addr", "127.0.0.1:0"}, tc.args...), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve %v = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cluster start runs three nodes that elect a leader and take requests on
// any node; cluster status, add and remove ask them; the nodes stop when
// the command's context ends.
func TestClusterStartRunsANodeClusterThatTheOtherClusterCommandsManage(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- clusterStart(ctx, []string{"--nodes", "3", "--data", t.TempDir(), "--port", "0", "--raft-port", "0", "--nosync"}, &out, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("cluster start: %v", err)
		}
	}()
	apiOf := regexp.MustCompile(`node-(\d)  api (http://\S+)  raft`)
	eventually(t, "cluster start names a leader", func() bool { return strings.Contains(out.String(), "leader: node-") })
	apis := apiOf.FindAllStringSubmatch(out.String(), -1)
	if len(apis) != 3 {
		t.Fatalf("cluster start printed:\n%s", out.String())
	}
	var status bytes.Buffer
	if err := run([]string{"cluster", "status", "--api", apis[2][2]}, &status, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status.String(), "node node-2: ") || strings.Count(status.String(), "\nmember node-") != 3 {
		t.Fatalf("cluster status printed:\n%s", status.String())
	}
	// A write through any node, once every node knows the leader's API (the
	// line above is printed once one of them does).
	for _, a := range apis {
		eventually(t, a[2]+" knows the leader's API", func() bool {
			resp, err := http.Get(a[2] + "/v1/cluster")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var c clusterJSON
			return json.NewDecoder(resp.Body).Decode(&c) == nil && c.LeaderAPI != ""
		})
	}
	s := &server{t: t, url: apis[1][2]}
	s.expect("POST", "/v1/executions", `{"executionId":"a","workflowId":"w"}`, http.StatusCreated, "")

	// A fourth node, outside the cluster, is added and removed by the commands.
	extra := newHTTPCluster(t, 1, false)[0]
	id, addr := extra.store.Node().ID(), extra.store.Node().Addr()
	var added bytes.Buffer
	if err := run([]string{"cluster", "add", "--api", apis[0][2], "--node-id", id, "--raft-addr", addr}, &added, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(added.String(), "member "+id+" "+addr+" voter") {
		t.Fatalf("cluster add printed:\n%s", added.String())
	}
	// Removed through a follower, which forwards to the leader and may learn
	// of the removal after it answered: the command waits for its view.
	follower := ""
	for _, a := range apis {
		if (&server{t: t, url: a[2]}).expect("GET", "/v1/cluster", "", http.StatusOK, "")["state"] == "Follower" {
			follower = a[2]
			break
		}
	}
	if follower == "" {
		t.Fatal("no follower among the three nodes")
	}
	var removed bytes.Buffer
	if err := run([]string{"cluster", "remove", "--api", follower, "--node-id", id}, &removed, io.Discard); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(removed.String(), "member "+id) {
		t.Fatalf("cluster remove printed:\n%s", removed.String())
	}
	if err := run([]string{"cluster", "add", "--api", apis[0][2], "--node-id", "bad id", "--raft-addr", addr}, io.Discard, io.Discard); err == nil {
		t.Fatal("cluster add of a bad ID succeeded")
	}
}

// A node that has not yet applied a committed removal still lists the member:
// `cluster remove` prints its view once it does, and after its bound prints
// it as it is, saying so.
func TestClusterRemoveWaitsForTheNodesViewWithoutTheMember(t *testing.T) {
	for _, tc := range []struct {
		name       string
		staleReads int // GETs that still list the member
		wantListed bool
	}{
		{"the view catches up", 3, false},
		{"the view never does", 1 << 30, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gets int
			var mu sync.Mutex
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				gets++
				n := gets
				mu.Unlock()
				c := clusterJSON{Replicated: true, NodeID: "n1", State: "Follower",
					Members: []memberJSON{{ID: "n0", RaftAddr: "127.0.0.1:1", Voter: true}, {ID: "n1", RaftAddr: "127.0.0.1:2", Voter: true}}}
				if n <= tc.staleReads {
					c.Members = append(c.Members, memberJSON{ID: "gone", RaftAddr: "127.0.0.1:3", Voter: true})
				}
				writeJSON(w, http.StatusOK, c)
			}))
			defer srv.Close()
			var out clusterJSON
			var stderr bytes.Buffer
			if err := viewWithout(context.Background(), srv.URL, "", "gone", 200*time.Millisecond, &out, &stderr); err != nil {
				t.Fatal(err)
			}
			listed := slices.ContainsFunc(out.Members, func(m memberJSON) bool { return m.ID == "gone" })
			if listed != tc.wantListed || len(out.Members) != 2+map[bool]int{true: 1}[tc.wantListed] {
				t.Fatalf("members %v, want the removed one listed: %v", out.Members, tc.wantListed)
			}
			if said := strings.Contains(stderr.String(), "has not applied it"); said != tc.wantListed {
				t.Fatalf("stderr %q", stderr.String())
			}
			mu.Lock()
			n := gets
			mu.Unlock()
			if !tc.wantListed && n != tc.staleReads+1 {
				t.Fatalf("%d GETs, want %d", n, tc.staleReads+1)
			}
		})
	}
}

func TestAReplicasErrorsAnswerWhetherTheWriteMayHaveHappened(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   string
		status int
	}{
		{&execstore.NotLeaderError{LeaderID: "n1"}, "NOT_LEADER", http.StatusServiceUnavailable},
		{fmt.Errorf("admit: %w", &execstore.NotLeaderError{}), "NOT_LEADER", http.StatusServiceUnavailable},
		{&execstore.NotLeaderError{LeaderID: "n1", Uncertain: true}, "OUTCOME_UNKNOWN", http.StatusServiceUnavailable},
		{fmt.Errorf("%w: bad peer", replica.ErrNodeOptions), "INVALID_ARGUMENT", http.StatusBadRequest},
	} {
		if code, status := statusOf(tc.err); code != tc.code || status != tc.status {
			t.Errorf("statusOf(%v) = %s %d, want %s %d", tc.err, code, status, tc.code, tc.status)
		}
	}
}
