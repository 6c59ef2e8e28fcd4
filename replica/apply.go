package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/mutant"
)

// Applied is the outcome of one command of ApplyBatch: its result when Err is nil.
type Applied struct {
	Result fsm.Result
	Err    error
	// Index is the raft log that holds the command, once the leader appended it: with Err
	// nil, the committed log whose application gave Result; with an error, the log the
	// command was appended at (it may still commit there, or be replaced under the next
	// leader), or 0 when it never reached the leader's log or no answer came (ctx ended,
	// the node closed).
	Index uint64
}

// Apply stamps cmd on the leader, commits it through raft and returns the state machine's
// result once this node applied it. cmd is not changed (the command logged is a stamped
// copy). On a node that is not the leader it returns a *NotLeaderError naming the leader,
// and submits nothing; an invalid command gets an error wrapping ErrInvalidCommand and
// changes nothing, and so does a ctx already ended. When ctx ends after the command was
// submitted, the leader loses its leadership meanwhile (NotLeaderError.Uncertain), or the
// node is closed meanwhile (ErrNodeClosed), the command's outcome is unknown: it may still
// commit.
func (n *Node) Apply(ctx context.Context, cmd *fsm.Command) (fsm.Result, error) {
	out, err := n.ApplyBatch(ctx, []*fsm.Command{cmd})
	if err != nil {
		return fsm.Result{}, err
	}
	return out[0].Result, out[0].Err
}

// ApplyBatch submits cmds together, stamped with one time, each as its own raft log: raft
// appends and replicates them in batches of up to MaxAppendEntries (one fsync per batch on
// each node), and the FSM applies each batch under one lock. It returns each command's
// outcome at its position; a leadership change in the middle may commit some and not
// others. An error (not the leader, an invalid command, no commands) means nothing was
// submitted.
func (n *Node) ApplyBatch(ctx context.Context, cmds []*fsm.Command) ([]Applied, error) {
	if len(cmds) == 0 {
		return nil, fmt.Errorf("%w: no commands", ErrInvalidCommand)
	}
	futures, err := n.submit(ctx, cmds)
	if err != nil {
		return nil, err
	}
	out := make([]Applied, len(futures))
	for i, f := range futures {
		out[i] = n.await(ctx, f)
	}
	return out, nil
}

// submit stamps the commands and hands them to raft, in one critical section so that the
// log holds stamped times in order.
func (n *Node) submit(ctx context.Context, cmds []*fsm.Command) ([]raft.ApplyFuture, error) {
	if n.closed() {
		return nil, ErrNodeClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("replica: %w (nothing was submitted)", err)
	}
	stamped := make([]fsm.Command, len(cmds))
	for i, cmd := range cmds {
		if cmd == nil {
			return nil, fmt.Errorf("%w: command %d is nil", ErrInvalidCommand, i)
		}
		stamped[i] = *cmd
		// Checked before it is stamped, so that a refused command costs no log (not even
		// catchUp's barrier): with a placeholder time, as Check asks only that the time
		// be positive, and every stamp is.
		stamped[i].Now = 1
		if err := stamped[i].Check(); err != nil {
			return nil, fmt.Errorf("%w: command %d (%v): %w", ErrInvalidCommand, i, cmd.Kind, err)
		}
	}
	n.stampMu.Lock()
	defer n.stampMu.Unlock()
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	if err := n.catchUp(ctx); err != nil {
		return nil, err
	}
	now := n.stampTime()
	n.lastStamp = now
	timeout := n.enqueueTimeout(ctx)
	futures := make([]raft.ApplyFuture, len(stamped))
	for i := range stamped {
		stamped[i].Now = now
		futures[i] = n.raft.Apply(fsm.AppendEncode(nil, &stamped[i]), timeout)
	}
	return futures, nil
}

// catchUp makes sure, once per term, that this leader applied every log committed before
// its term (a raft barrier) before it stamps: a new leader's state may lag its log, and the
// stamp reads the state's time. The caller holds stampMu.
func (n *Node) catchUp(ctx context.Context) error {
	term := n.raft.CurrentTerm()
	if term == n.readyTerm {
		return nil
	}
	if _, err := n.waitFuture(ctx, n.raft.Barrier(n.enqueueTimeout(ctx))); err != nil {
		return n.raftError(err, false)
	}
	n.readyTerm = term
	return nil
}

// stampTime is the time of the next commands: max(the clock, the last time this node
// stamped, the applied state's time). The state's time is the latest any leader stamped
// and this node applied (every committed log, after catchUp), so time never goes backwards
// across a leader change, even when this leader's clock is behind the last one's. The
// caller holds stampMu.
func (n *Node) stampTime() int64 {
	if mutant.ReplicaStampsOwnClock {
		return n.opts.Clock().UnixNano()
	}
	var stateNow int64
	n.fsm.View(func(st *fsm.State, _ uint64) { stateNow = st.Meta().Now })
	return max(n.opts.Clock().UnixNano(), n.lastStamp, stateNow, 1)
}

// await waits for one submitted command's result.
func (n *Node) await(ctx context.Context, f raft.ApplyFuture) Applied {
	if answered, err := n.waitFuture(ctx, f); err != nil {
		a := Applied{Err: n.raftError(err, true)}
		if answered {
			a.Index = f.Index() // raft wrote it, if at all, before it answered
		}
		return a
	}
	switch r := f.Response().(type) {
	case fsm.Result:
		return Applied{Result: r, Index: f.Index()}
	case error:
		return Applied{Err: r, Index: f.Index()}
	default:
		return Applied{Err: fmt.Errorf("replica: log %d: unexpected response %T", f.Index(), r), Index: f.Index()}
	}
}

// Read calls fn with the state, linearizably: fn sees every write that completed before Read
// was called. It is the read index of the raft paper: the node confirms it is still the
// leader (raft.VerifyLeader: a quorum answers a round of heartbeats in its term), takes its
// last log index at that moment (every log committed before the call is in a confirmed
// leader's log, at or below it), and waits until its FSM applied up to it. fn runs under
// the FSM's read lock: it must not keep the state or change it. A node that is not the
// leader returns a *NotLeaderError.
//
// The index waited for is the last command or configuration log at or below the last
// index, since raft gives its no-op and barrier logs to no FSM; it includes this leader's
// own uncommitted logs, so a read under heavy writes waits for the writes submitted before
// it to commit.
func (n *Node) Read(ctx context.Context, fn func(*fsm.State)) error {
	if n.closed() {
		return ErrNodeClosed
	}
	if _, err := n.waitFuture(ctx, n.raft.VerifyLeader()); err != nil {
		return n.raftError(err, false)
	}
	if err := n.fsm.waitApplied(ctx, n.readIndex(n.raft.LastIndex()), n.done); err != nil {
		if errors.Is(err, ErrClosed) {
			return ErrNodeClosed
		}
		return err
	}
	n.fsm.View(func(st *fsm.State, _ uint64) { fn(st) })
	return nil
}

// readIndex returns the index of the last log at or below last that the FSM is given (a
// command or a configuration), or the FSM's applied index if it is already past them.
func (n *Node) readIndex(last uint64) uint64 {
	applied := n.fsm.Applied()
	for i := last; i > applied; i-- {
		var l raft.Log
		if err := n.logs.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				return applied // compacted: a snapshot the FSM holds covers it
			}
			return i
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return i
		}
	}
	return applied
}

// ReadStale calls fn with this node's state as it is, on any node: no leader is consulted,
// so on a follower (or a deposed leader) the state may lag the cluster's by the logs it has
// not yet received or applied; it never holds an uncommitted write. fn runs under the FSM's
// read lock: it must not keep the state or change it.
func (n *Node) ReadStale(fn func(*fsm.State)) {
	n.fsm.View(func(st *fsm.State, _ uint64) { fn(st) })
}

// Propose is the submission path of an owner that stamps, prechecks and encodes commands
// itself (the replicated execstore.Store's writer): on the leader, once it has applied
// every log committed before its term, it calls prepare with the time of the next commands
// — max(the clock, the last time stamped, the applied state's time), as Apply stamps —
// and submits the encoded commands prepare returns, in order, as few raft logs as the
// envelope's bounds allow (one for a batch of up to MaxEnvelopeCommands commands and
// MaxEnvelopeBytes bytes; a lone command is a plain log). prepare runs under the lock that
// orders stamping, so that no other submission on this node comes between; it may read
// the state under the FSM's lock and must not call the node. Propose then waits for the
// logs' outcomes and returns each command's at its position; nil when prepare returned
// nothing. The commands' encoded bytes become raft's: prepare must not reuse them.
//
// The error is for the call as a whole, with nothing submitted and prepare not called: not
// the leader (a *NotLeaderError naming the leader), the node is closed, ctx ended, or the
// leader could not catch up.
func (n *Node) Propose(ctx context.Context, prepare func(now int64) [][]byte) ([]Applied, error) {
	futures, counts, err := n.propose(ctx, prepare)
	if err != nil || len(futures) == 0 {
		return nil, err
	}
	var out []Applied
	for i, f := range futures {
		out = appendOutcomes(out, n.awaitEach(ctx, f, counts[i]), counts[i])
	}
	return out, nil
}

// appendOutcomes appends the outcomes of one log of count commands: each's, or one error
// for all.
func appendOutcomes(out, each []Applied, count int) []Applied {
	if len(each) == count {
		return append(out, each...)
	}
	for range count {
		out = append(out, each[0])
	}
	return out
}

// awaitEach waits for a log of count commands: it returns their outcomes, or a single
// outcome holding the error that befell them all.
func (n *Node) awaitEach(ctx context.Context, f raft.ApplyFuture, count int) []Applied {
	if count == 1 {
		return []Applied{n.await(ctx, f)}
	}
	if answered, err := n.waitFuture(ctx, f); err != nil {
		a := Applied{Err: n.raftError(err, true)}
		if answered {
			a.Index = f.Index() // raft wrote it, if at all, before it answered
		}
		return []Applied{a}
	}
	switch r := f.Response().(type) {
	case []Applied:
		if len(r) == count {
			for i := range r {
				r[i].Index = f.Index()
			}
			return r
		}
		return []Applied{{Err: fmt.Errorf("replica: log %d: %d outcomes for %d commands", f.Index(), len(r), count), Index: f.Index()}}
	case error:
		return []Applied{{Err: r, Index: f.Index()}}
	default:
		return []Applied{{Err: fmt.Errorf("replica: log %d: unexpected response %T", f.Index(), r), Index: f.Index()}}
	}
}

func (n *Node) propose(ctx context.Context, prepare func(now int64) [][]byte) ([]raft.ApplyFuture, []int, error) {
	if n.closed() {
		return nil, nil, ErrNodeClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("replica: %w (nothing was submitted)", err)
	}
	n.stampMu.Lock()
	defer n.stampMu.Unlock()
	if n.raft.State() != raft.Leader {
		return nil, nil, n.notLeader()
	}
	if err := n.catchUp(ctx); err != nil {
		return nil, nil, err
	}
	now := n.stampTime()
	n.lastStamp = now
	datas := prepare(now)
	if len(datas) == 0 {
		return nil, nil, nil
	}
	timeout := n.enqueueTimeout(ctx)
	var futures []raft.ApplyFuture
	var counts []int
	for len(datas) > 0 {
		k, size := 1, envelopeLen(datas[:1])
		for k < len(datas) && k < MaxEnvelopeCommands {
			next := size + uvarintLen(uint64(len(datas[k]))) + len(datas[k]) + 1 // the count may grow a byte
			if next > MaxEnvelopeBytes {
				break
			}
			size, k = next, k+1
		}
		data := datas[0]
		if k > 1 {
			data = appendEnvelope(make([]byte, 0, size), datas[:k])
		}
		futures = append(futures, n.raft.Apply(data, timeout))
		counts = append(counts, k)
		datas = datas[k:]
	}
	return futures, counts, nil
}
