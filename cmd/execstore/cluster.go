package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/replica"
)

// A cluster's membership: GET /v1/cluster (this node's view, answered by
// the node itself), and adding and removing members (on the leader).

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
