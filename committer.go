package execstore

import (
	"context"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/replica"
)

// committer carries out the writer's plans, and is everything that differs
// between a single-node store and a replicated one. Open chooses it once:
// logCommitter (commit_log.go) writes each batch to the store's own
// write-ahead log and applies it in the writer goroutine; raftCommitter
// (replicated.go) proposes it to raft, whose FSM applies it on every node.
// Nothing outside the two asks which mode the store is in.
//
// Each states its locking rule once, in its view: who changes the state, and
// so how the writer must read it.
type committer interface {
	// commit stamps a batch with the committer's time, plans it
	// (planner.plan), makes the plan's entries durable, applies them,
	// answers every request of the batch, and settles the deferred ones.
	commit(w *writer, batch []*request)
	// view calls fn with the applied state as the writer goroutine may read
	// it. fn must not keep the state.
	view(fn func(st *fsm.State))
	// leads reports whether the writer may make commands of its own now
	// (retirement, schedule fires).
	leads() bool
	// groupBound is how long a batch may wait for its callers (group.go): 0
	// for none.
	groupBound(o *Options) time.Duration

	// poll runs at the start of each round of the writer, afterRound at
	// its end, finish once when the writer exits at Close: the committer's
	// own work (a single node's snapshots).
	poll(w *writer)
	afterRound(w *writer)
	finish(w *writer)

	// read runs fn against the applied state for a caller, as Store.read
	// promises: linearizable on a replica unless its reads are stale.
	read(ctx context.Context, fn func(st *fsm.State)) error
	// readsWait reports whether read may wait (for a leader), and so must
	// stop with its caller's context.
	readsWait() bool
	// snapshot is Store.Snapshot.
	snapshot(ctx context.Context) error
	// stats fills in what Stats says of the log, the snapshots and the node.
	stats(st *Stats)
	// idTime is the time a generated ID carries (ids.go).
	idTime() time.Time
	// close releases the log or the node once the writer has exited.
	close() error
	// node is a replicated store's raft node, or nil.
	node() *replica.Node
}
