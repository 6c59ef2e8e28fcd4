package sim

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/replica"
)

// start makes the nodes' directories and opens every node, bootstrapping
// the cluster with all of them.
func (w *replWorld) start() error {
	for i := range w.cfg.Nodes {
		nd := &replNode{w: w, idx: i, id: fmt.Sprintf("n%d", i), addr: raft.ServerAddress(fmt.Sprintf("mem-%d", i)),
			dir: filepath.Join(w.dir, fmt.Sprintf("n%d", i))}
		w.nodes = append(w.nodes, nd)
		w.peers = append(w.peers, execstore.Peer{ID: nd.id, Addr: string(nd.addr), Voter: true})
	}
	for _, nd := range w.nodes {
		if err := w.open(nd, w.peers); err != nil {
			return err
		}
	}
	return nil
}

// open starts a node's replicated store on its directory (resuming what it
// holds; with peers, a new directory bootstraps the cluster) with a new
// transport, and links it to the others.
func (w *replWorld) open(nd *replNode, peers []execstore.Peer) error {
	_, inner := raft.NewInmemTransportWithTimeout(nd.addr, replSendBound)
	trans := &delayTransport{InmemTransport: inner, w: w, from: nd.idx, done: make(chan struct{})}
	opts := execstore.Options{Now: nd.now}
	small(&opts)
	s, err := execstore.OpenReplicated(nd.dir, execstore.ReplicaOptions{
		Options: opts,
		Node: replica.NodeOptions{
			ID:                 nd.id,
			Transport:          trans,
			HeartbeatTimeout:   replHeartbeat,
			ElectionTimeout:    replHeartbeat,
			LeaderLeaseTimeout: replLease,
			CommitTimeout:      replPoll,
			SnapshotThreshold:  replSnapshotLog,
			SnapshotInterval:   replSnapshotDue,
			TrailingLogs:       replSnapshotLog,
			RaftTimeout:        replCallBound,
		},
		Peers: peers,
	})
	if err != nil {
		return fmt.Errorf("sim: open node %s: %w", nd.id, err)
	}
	w.mu.Lock()
	nd.inner = inner
	nd.store.Store(s)
	w.rewire()
	w.mu.Unlock()
	return nil
}

// crash stops a node; its directory stays. Cut, it is first cut off from
// the others (a crash: a leader cannot hand its leadership over); else it
// closes as an operator would stop it (a leader hands its leadership to a
// follower first). Close is clean either way: the log is fsynced as it is
// written, so a power loss would keep what Close keeps (the single-node
// simulator covers torn files). It then reads the stamps in the node's log.
func (w *replWorld) crash(nd *replNode, cut bool) {
	w.mu.Lock()
	s := nd.store.Load()
	if cut {
		nd.store.Store(nil)
		w.rewire()
	}
	w.mu.Unlock()
	if s == nil {
		return
	}
	if err := s.Close(); err != nil {
		w.violate(violationf("closing node %s: %v", nd.id, err))
	}
	if !cut {
		w.mu.Lock()
		nd.store.Store(nil)
		w.rewire()
		w.mu.Unlock()
	}
	w.checkStamps(nd)
}

// rewire links every two running nodes that no partition separates, and
// unlinks the rest. The caller holds w.mu.
func (w *replWorld) rewire() {
	for _, a := range w.nodes {
		if a.store.Load() == nil {
			continue
		}
		for _, b := range w.nodes {
			switch {
			case a == b:
			case b.store.Load() != nil && !w.isolated[a.idx] && !w.isolated[b.idx]:
				a.inner.Connect(b.addr, b.inner)
			default:
				a.inner.Disconnect(b.addr)
			}
		}
	}
}

func (w *replWorld) isolate(nd *replNode, on bool) {
	w.mu.Lock()
	w.isolated[nd.idx] = on
	w.rewire()
	w.mu.Unlock()
}

// closeAll stops every running node.
func (w *replWorld) closeAll() {
	for _, nd := range w.nodes {
		w.crash(nd, true)
	}
}

// leaders returns the running nodes that believe they lead.
func (w *replWorld) leaders() []*replNode {
	var out []*replNode
	for _, nd := range w.nodes {
		if n := nd.node(); n != nil && n.State() == raft.Leader {
			out = append(out, nd)
		}
	}
	return out
}

// observe notes the leader, when exactly one node leads, and counts the
// changes.
func (w *replWorld) observe() *replNode {
	ls := w.leaders()
	if len(ls) != 1 {
		return nil
	}
	if ls[0].id != w.lastLeader {
		if w.lastLeader != "" {
			w.failovers++
		}
		w.lastLeader = ls[0].id
	}
	return ls[0]
}

// awaitLeader polls, within the bound, for a single leader.
func (w *replWorld) awaitLeader() *replNode {
	deadline := time.Now().Add(w.cfg.Bound)
	for {
		if ld := w.observe(); ld != nil {
			return ld
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(replPoll)
	}
}
