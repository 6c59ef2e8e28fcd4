package execstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/replica"
	"github.com/execstore/execstore/vfs"
	"github.com/execstore/execstore/wal"
)

// The replicated store: the same Store, its writer submitting through raft.
//
// OpenReplicated returns a *Store whose state machine is a replica.Node's:
// every node of a cluster applies the same commands, in the same order, to
// its own copy of the state. The writer goroutine does on the leader what it
// does on a single node up to the log — takes the queued commands, prechecks
// each against the applied state (a duplicate admission, an idle claim or a
// lost lease is answered at once and never logged), groups acknowledgements
// into one command — and then, instead of writing the WAL and applying,
// proposes the encoded commands to raft (replica.Node.Propose): each is a raft
// log, committed once a majority of the nodes stored it durably, then applied
// by every node's FSM. The writer answers each caller with the result its
// command got from the leader's FSM.
//
// Stamping moves into the node: the commands of a batch carry the leader's
// time, max(its clock, the last time it stamped, the applied state's time),
// taken after the leader applied every log committed before its term, so the
// store's time never goes backwards across a leader change, even when the new
// leader's clock is behind. Lease tokens come from counters in the state, as
// on one node, so they never repeat; generated IDs are made from the store's
// time and random bits on the node that takes the call (the leader), and the
// state machine derives another if one ever collided, as on one node.
//
// Only the FSM's goroutine changes the state; the Store shares the FSM's lock
// (replica.FSMOptions.Lock) and reads the state under it. Await-ers, the
// change feed and dispatchers are woken on every node from what the FSM
// applied (replica.FSMOptions.Applied), and after a snapshot is restored.
//
// A node that is not the leader refuses writes with an error wrapping
// ErrNotLeader (a *NotLeaderError naming the leader when it knows one).
// Reads are linearizable by default: a read confirms with a quorum that this
// node is still the leader, then waits until its state includes every log
// committed before the read began (the read index of the raft paper,
// replica.Node.Read), so a read sees every write that returned before it; on
// a follower they return ErrNotLeader. ReplicaOptions.StaleReads reads this
// node's applied state as it is, on any node, without asking the leader:
// faster, and possibly behind the cluster.

// ErrNotLeader is wrapped by the error of a write, or a linearizable read, on
// a node of a replicated store that is not the leader: the leader's address,
// when this node knows it, is in the *NotLeaderError (errors.As). Nothing was
// done, unless NotLeaderError.Uncertain: the command was submitted and the
// leadership lost before it committed, so it may still have taken effect;
// repeat it on the new leader (an admission repeated gets
// ErrExecutionIDConflict when the first one took effect).
var ErrNotLeader = replica.ErrNotLeader

// NotLeaderError is the error of a write or a linearizable read on a node
// that is not the leader. It wraps ErrNotLeader.
type NotLeaderError = replica.NotLeaderError

// Peer is a member of a replicated store's cluster: its node ID and the
// address its raft transport listens on.
type Peer = replica.Server

// ReplicaOptions configures OpenReplicated.
type ReplicaOptions struct {
	// Options are the store's own. Now stamps the commands while this node
	// leads (it is also the node's clock), NoSync applies to the raft log,
	// FS holds the directory and its lock. The snapshot cadence and
	// SegmentSize of the single-node log are not used: raft decides when to
	// snapshot (Node.SnapshotThreshold) and the log store is Node.WAL's.
	Options
	// Node configures this node: ID and BindAddr (or Transport) are
	// required. Its Clock and Logger default to the store's clock's Now
	// (Options.Now or Options.Clock) and Options.Logger, its WAL.NoSync to
	// Options.NoSync, its WAL.FS to Options.FS (raft's own snapshot files
	// are on the operating system's filesystem). (The writer sends each
	// batch as one raft log of up to replica.MaxEnvelopeCommands commands,
	// so the default MaxAppendEntries, 64 logs of at most
	// replica.MaxEnvelopeBytes each, bounds an append to 256 MiB.)
	Node replica.NodeOptions
	// Peers, when set, bootstrap a new cluster with these members (this node
	// among them) the first time the directory is opened; a directory that
	// already holds raft state ignores them. Leave it empty on a node that
	// joins an existing cluster: the leader adds it (Node().AddVoter).
	Peers []Peer
	// StaleReads lets reads run on any node against its applied state, as
	// it is, without asking the leader: possibly behind the cluster (never
	// ahead of it: no uncommitted write is ever applied). Default:
	// linearizable reads, on the leader only.
	StaleReads bool
}

// OpenReplicated opens (creating if needed) one node of a replicated store
// kept in dir: raft's log in dir/wal, its term and vote in dir/raft, its
// snapshots (in the snapshot package's format) in dir/snapshots. A directory
// that holds raft state resumes it: the node restores its latest snapshot,
// applies the log the leader commits and rejoins its cluster. The returned
// Store has the single-node Store's API; see ErrNotLeader for what a
// follower refuses.
func OpenReplicated(dir string, opts ReplicaOptions) (_ *Store, err error) {
	s, err := newStore(dir, opts.Options)
	if err != nil {
		return nil, err
	}
	rc := &raftCommitter{s: s, stale: opts.StaleReads}
	defer func() {
		if err != nil {
			if rc.n != nil {
				rc.n.Close()
			}
			s.releaseDir()
			err = fmt.Errorf("execstore: open %s: %w", dir, err)
		}
	}()
	if err := checkReplicaDir(s.opts.FS, dir); err != nil {
		return nil, err
	}
	if _, statErr := s.opts.FS.Stat(archiveDir(dir)); s.opts.Archive || statErr == nil {
		// Each replica would build its own archive, but a raft snapshot does
		// not carry one yet: a node that installed one would not find what
		// the others archived.
		return nil, invalidArg("Options.Archive: a replicated store keeps its retired executions in memory (the archive is for a single node)")
	}
	// A command is one raft log's data, whose stored entry adds a header:
	// larger ones are refused in their caller's goroutine (submit).
	s.maxCommand = min(s.maxCommand, wal.MaxPayloadBytes-raftEntryOverhead)
	no := opts.Node
	if no.Clock == nil {
		no.Clock = s.opts.Now
	}
	if no.Logger == nil {
		no.Logger = s.logger
	}
	no.WAL.NoSync = no.WAL.NoSync || s.opts.NoSync
	if no.WAL.FS == nil {
		no.WAL.FS = s.opts.FS
	}
	hooks := replica.FSMOptions{
		Lock:     &s.rw,
		Restored: rc.restored,
		Adopted:  rc.adopted,
		Applied:  rc.appliedOnNode,
	}
	if rc.n, err = replica.Open(dir, no, hooks); err != nil {
		return nil, err
	}
	if len(opts.Peers) > 0 {
		if err := rc.n.Bootstrap(opts.Peers); err != nil && !errors.Is(err, replica.ErrBootstrapped) {
			return nil, err
		}
	}
	s.logger.Info("execstore: opened a replica", "dir", dir, "node", no.ID, "addr", rc.n.Addr())
	s.start(rc)
	go rc.followNode()
	return s, nil
}

// checkReplicaDir refuses a directory that holds a single-node store: its
// log would be read as raft's, and its snapshots ignored. A replica's
// directory holds raft/ (its term and vote) once it opened; a single-node
// store's, log entries or snapshots without it.
func checkReplicaDir(fs vfs.FS, dir string) error {
	if _, err := fs.Stat(filepath.Join(dir, "raft")); err == nil {
		return nil
	}
	single := false
	if names, err := fs.List(filepath.Join(dir, "wal")); err == nil {
		for _, name := range names {
			if info, err := fs.Stat(filepath.Join(dir, "wal", name)); err == nil && info.Mode().IsRegular() && info.Size() > 0 {
				single = true
			}
		}
	}
	if names, err := fs.List(filepath.Join(dir, "snapshots")); err == nil {
		for _, name := range names {
			if ok, _ := filepath.Match("snapshot-*.snap", name); ok {
				single = true
			}
		}
	}
	if single {
		return invalidArg("the directory holds a single-node store (a log or snapshots, no raft/): open it with Open")
	}
	return nil
}

// raftEntryOverhead bounds what a raft log's stored entry adds to its data
// (replica's entry codec: version, type, flags, term, time, lengths).
const raftEntryOverhead = 64

// Node returns the raft node of a replicated store (membership, leadership,
// raft's state), or nil for a single-node store.
func (s *Store) Node() *replica.Node { return s.commit.node() }

// raftCommitter commits a replicated store's batches through raft: on the
// leader, the writer proposes each plan's entries (replica.Node.Propose),
// raft commits them once a majority of the nodes stored them durably, and
// every node's FSM applies them; the writer answers each caller with the
// result its command got from the leader's FSM.
//
// Locking rule: only the FSM's goroutine changes the state, holding s.rw
// (the lock the store lends the FSM, replica.FSMOptions.Lock) for writing;
// every other goroutine, the writer included, reads it under the read lock.
type raftCommitter struct {
	s     *Store
	n     *replica.Node
	stale bool // ReplicaOptions.StaleReads

	changeSeen uint64 // the change feed's position at the FSM's last batch; FSM goroutine only
}

// restored prepares a state the FSM decoded from a snapshot, or its first
// one, before it is adopted.
func (c *raftCommitter) restored(st *fsm.State) {
	st.SetSizes(c.s.opts.sizes)
	if c.s.opts.Retention > 0 {
		st.TrackRetirement()
	}
}

// adopted makes st the store's state. The FSM calls it holding s.rw for
// writing: with its first state, and with each one a snapshot restores. A
// restored state may have ended awaited executions, made some due and moved
// the change feed: everyone waiting is woken to look again.
func (c *raftCommitter) adopted(st *fsm.State) {
	s := c.s
	first := s.state == nil
	s.state = st
	c.changeSeen = st.Meta().ChangeSeq
	if first {
		return
	}
	s.awaits.notifyTerminal(func(id string) bool {
		e, ok := st.Get(id)
		return ok && e.Terminal()
	})
	s.due.notify()
	s.changed.notify()
}

// appliedOnNode wakes, on every node, those waiting for what a batch of logs
// the FSM applied did. It runs in the FSM's goroutine, which alone changes
// the state: it reads the state without the lock.
func (c *raftCommitter) appliedOnNode(cmds []fsm.Command, results []fsm.Result) {
	s := c.s
	seq := s.state.Meta().ChangeSeq
	changed := seq != c.changeSeen
	c.changeSeen = seq
	var became fsm.Transitions
	for i := range results {
		became.Due = became.Due || results[i].Became.Due
		became.Terminal = became.Terminal || results[i].Became.Terminal
	}
	// Only the leader's dispatchers can claim: a follower's hear of its
	// election instead (followNode), rather than failing a claim per batch.
	became.Due = became.Due && c.leads()
	s.wake(became, changed, func(yield func(*fsm.Command, *fsm.Result)) {
		for i := range cmds {
			yield(&cmds[i], &results[i])
		}
	})
}

// followNode wakes the writer and the dispatchers on every change of the
// node's raft state: a new leader's writer has schedules to fire and
// retention to apply, and its dispatchers have executions to claim.
func (c *raftCommitter) followNode() {
	s := c.s
	for {
		ch := c.n.Changed()
		select {
		case <-ch:
			s.due.notify()
			s.changed.notify()
			s.in.signal()
		case <-c.n.Done():
			return
		}
	}
}

// leads reports whether this node is raft's leader.
func (c *raftCommitter) leads() bool { return c.n.State() == raft.Leader }

func (c *raftCommitter) view(fn func(st *fsm.State)) {
	c.s.rw.RLock()
	defer c.s.rw.RUnlock()
	fn(c.s.state)
}

// groupBound is 0: a replica does not wait for its callers, raft batches its
// writes.
func (c *raftCommitter) groupBound(*Options) time.Duration { return 0 }

// raft snapshots a replica (Node.SnapshotThreshold): the writer has no work
// of its own between rounds.
func (c *raftCommitter) poll(*writer)       {}
func (c *raftCommitter) afterRound(*writer) {}
func (c *raftCommitter) finish(*writer)     {}

// proposeTimeout bounds how long the writer waits for raft to take a batch
// and commit it. A leader that cannot reach a quorum steps down within its
// LeaderLeaseTimeout, which fails the batch's futures long before this.
const proposeTimeout = time.Minute

// commit stamps the batch with the node's time, and plans and encodes it
// under the node's stamping lock (replica.Node.Propose); then it answers each
// caller with its command's result once the leader's FSM applied it.
func (c *raftCommitter) commit(w *writer, batch []*request) {
	s := c.s
	ctx, cancel := context.WithTimeout(context.Background(), proposeTimeout)
	defer cancel()
	var p *plan
	out, err := c.n.Propose(ctx, func(now int64) [][]byte {
		s.rw.RLock()
		defer s.rw.RUnlock()
		w.stampAt(now, s.state.Meta().Now)
		p = w.planner.plan(batch, s.state, now, s.failed())
		return encodeEntries(p)
	})
	if p == nil {
		// Nothing was submitted: not the leader, closed, or no catch-up.
		if errors.Is(err, replica.ErrNodeClosed) {
			err = ErrClosed
		}
		s.rw.RLock()
		for _, r := range batch {
			r.err = err
			s.answer(r)
		}
		s.rw.RUnlock()
		return
	}
	for _, r := range p.idle {
		r.done <- struct{}{}
	}
	// What the batch answers from the state without logging (a no-op, a
	// request deferred until the batch is applied) is true of the state only
	// if this node still led when it was read: a deposed leader that has not
	// yet heard of its successor would answer from a stale state. A command
	// of the batch committed afterwards confirms it; without one, a round of
	// heartbeats does (raft's VerifyLeader), as a linearizable read's.
	confirmed := err == nil && anyCommitted(out)
	var refused error
	if !confirmed && len(p.answered)+len(p.deferred) > 0 {
		if refused = c.n.VerifyLeader(ctx); refused == nil {
			confirmed = true
		} else if errors.Is(refused, replica.ErrNodeClosed) {
			refused = ErrClosed
		}
	}
	s.rw.RLock()
	if len(p.logged) > 0 {
		c.answer(p, out, err)
	}
	for _, r := range p.answered {
		if !confirmed {
			r.res, r.err = fsm.Result{}, refused
		}
		s.answer(r)
	}
	if !confirmed {
		for _, r := range p.deferred {
			r.err = refused
			s.answer(r)
		}
		clear(p.deferred)
		p.deferred = p.deferred[:0]
	}
	var again []*request
	if len(p.deferred) > 0 {
		again = settle(p.deferred, s.state, s.failed(), s.answer)
	}
	s.rw.RUnlock()
	if len(again) > 0 {
		s.in.pushFront(again)
	}
	w.planner.done()
	if s.obs != nil {
		s.flushObserved()
	}
}

// anyCommitted reports whether some command of a proposal committed (and so
// this node led when it did).
func anyCommitted(out []replica.Applied) bool {
	for _, a := range out {
		if a.Err == nil {
			return true
		}
	}
	return false
}

// encodeEntries returns each of a plan's entries encoded in a slice of its
// own (raft keeps it), or nil when it logs nothing.
func encodeEntries(p *plan) [][]byte {
	if len(p.entries) == 0 {
		return nil
	}
	datas := make([][]byte, len(p.entries))
	for i := range p.entries {
		datas[i] = fsm.AppendEncode(make([]byte, 0, p.entries[i].size()), p.entries[i].command())
	}
	return datas
}

// answer answers a plan's logged requests from their entries' outcomes.
// The caller holds the read lock.
func (c *raftCommitter) answer(p *plan, out []replica.Applied, err error) {
	for k := range p.entries {
		e := &p.entries[k]
		var a replica.Applied
		switch {
		case err != nil:
			a.Err = err
		case k < len(out):
			a = out[k]
		default:
			a.Err = fmt.Errorf("execstore: raft answered %d of %d commands", len(out), len(p.entries))
		}
		if errors.Is(a.Err, replica.ErrNodeClosed) {
			a.Err = ErrClosed
		}
		for i, r := range e.reqs {
			switch {
			case a.Err != nil:
				r.err = a.Err
			case len(e.reqs) == 1:
				r.res = a.Result
			default:
				r.res = a.Result.Acks[i]
			}
		}
	}
	for _, r := range p.logged {
		c.s.answer(r)
	}
}

// read is linearizable unless ReplicaOptions.StaleReads: see Store.read.
func (c *raftCommitter) read(ctx context.Context, fn func(st *fsm.State)) error {
	if c.stale {
		c.view(fn)
		return nil
	}
	err := c.n.Read(ctx, fn)
	if errors.Is(err, replica.ErrNodeClosed) {
		err = ErrClosed
	}
	return err
}

// readsWait is true: a linearizable read may wait for the leader, and a
// stale one stops with its caller's context too.
func (c *raftCommitter) readsWait() bool { return true }

// snapshot is Snapshot on a replica: raft snapshots the state
// (replica.Node.Snapshot). Nothing applied since the last snapshot is not an
// error: the last one holds the state.
func (c *raftCommitter) snapshot(ctx context.Context) error {
	err := c.n.Snapshot(ctx)
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return err
}

// stats describes the node: its raft log's indexes stand for the WAL's.
func (c *raftCommitter) stats(st *Stats) {
	ns := c.n.Stats()
	st.WALFirstIndex, st.WALLastIndex, st.AppliedIndex = ns.FirstIndex, ns.LastIndex, ns.Applied
	st.Replica = &ns
}

// idTime is the store's time (Now), which never goes back across a leader
// change, even when the new leader's clock is behind.
func (c *raftCommitter) idTime() time.Time { return c.s.Now() }

// close stops the node (a leader hands its leadership over first).
func (c *raftCommitter) close() error { return c.n.Close() }

func (c *raftCommitter) node() *replica.Node { return c.n }
