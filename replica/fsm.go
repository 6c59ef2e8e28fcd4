package replica

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/mutant"
	"github.com/execstore/execstore/snapshot"
)

// This file must stay deterministic: what it does with a log depends on the log and the
// state alone. It reads no clock (not even raft.Log.AppendedAt, the leader's wall time),
// draws no randomness and touches no file; a test checks its imports. Time, generated IDs
// and schedule occurrences arrive in the commands, stamped by the leader; lease tokens come
// from counters in the state.

// FSM is the state machine (package fsm) behind raft: raft.BatchingFSM over one *fsm.State.
// A command log's data is one command in fsm's codec (fsm.AppendEncode), whose response is
// the command's fsm.Result (a value) or a *CommandError when the data does not decode; or an
// envelope of several (envelope.go), whose response is a []Applied, one per command in
// order, or a *CommandError when its framing is bad (then none applied). Other logs
// (configuration changes) get a nil response and change nothing.
//
// raft calls Apply, ApplyBatch, Snapshot and Restore from one goroutine; View may run
// concurrently with them.
type FSM struct {
	opts FSMOptions

	mu      *sync.RWMutex // held for writing while the state changes or is copied
	state   *fsm.State
	applied uint64 // index of the last log given to the FSM
	// advanced is closed, and replaced, whenever applied grows: WaitApplied waits on it
	// instead of polling. Guarded by mu.
	advanced chan struct{}
}

// FSMOptions configures NewFSM. Every field is optional.
type FSMOptions struct {
	// Restored, when non-nil, is called with every state Restore decodes, before the FSM
	// adopts it: for what a state does not keep in its encoding (fsm.State.TrackRetirement).
	Restored func(*fsm.State)

	// Lock, when non-nil, is the lock that guards the state, shared with an owner that reads
	// the state under it directly rather than through View (the replicated execstore.Store).
	// The FSM holds it for writing while the state changes, is copied or is replaced.
	// Default: a lock of the FSM's own.
	Lock *sync.RWMutex
	// Adopted, when non-nil, is called with the FSM's first state (in NewFSM) and with every
	// state it adopts from a snapshot, while the FSM holds the lock for writing: an owner
	// that keeps a pointer to the state replaces it here, so that it never reads a state the
	// FSM no longer changes.
	Adopted func(*fsm.State)
	// Applied, when non-nil, is called after every batch of logs (Apply is a batch of one),
	// once the lock is released and before raft answers the batch's futures, with the
	// batch's command logs (decoded) and their results, in order; logs that are not
	// commands, or do not decode, are left out. It runs in raft's FSM goroutine, the only
	// one that changes the state, so it may read the state without the lock; it must not
	// keep cmds or results, nor block for long (raft applies nothing meanwhile).
	Applied func(cmds []fsm.Command, results []fsm.Result)
}

var _ raft.BatchingFSM = (*FSM)(nil)

// NewFSM returns an FSM over st, which it owns from now on: change it only through raft.
// applied is the index of the last log st includes (0 for a new state).
func NewFSM(st *fsm.State, applied uint64, opts FSMOptions) *FSM {
	f := &FSM{opts: opts, mu: opts.Lock, state: st, applied: applied, advanced: make(chan struct{})}
	if f.mu == nil {
		f.mu = new(sync.RWMutex)
	}
	if opts.Adopted != nil {
		f.mu.Lock()
		opts.Adopted(st)
		f.mu.Unlock()
	}
	return f
}

// Apply applies one log.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies the logs of one raft batch in order, under one lock, and returns each
// log's response at its position: the group commit of the single-node store, kept.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	var cmds []fsm.Command
	var results []fsm.Result
	if f.opts.Applied != nil {
		cmds = make([]fsm.Command, 0, len(logs))
		results = make([]fsm.Result, 0, len(logs))
	}
	f.mu.Lock()
	for i, l := range logs {
		f.applied = l.Index
		if l.Type != raft.LogCommand {
			continue
		}
		if !isEnvelope(l.Data) {
			var c fsm.Command
			out[i] = f.apply(l.Index, l.Data, &c)
			if res, ok := out[i].(fsm.Result); ok && f.opts.Applied != nil {
				cmds = append(cmds, c)
				results = append(results, res)
			}
			continue
		}
		datas, err := splitEnvelope(l.Data)
		if err != nil {
			out[i] = &CommandError{Index: l.Index, Err: err}
			continue
		}
		each := make([]Applied, len(datas))
		for k, d := range datas {
			var c fsm.Command
			switch r := f.apply(l.Index, d, &c).(type) {
			case fsm.Result:
				each[k].Result = r
				if f.opts.Applied != nil {
					cmds = append(cmds, c)
					results = append(results, r)
				}
			case error:
				each[k].Err = r
			}
		}
		out[i] = each
	}
	f.signal()
	f.mu.Unlock()
	if len(cmds) > 0 {
		f.opts.Applied(cmds, results)
	}
	return out
}

// apply applies the command encoded in data, decoding it into c, and returns its
// fsm.Result, or a *CommandError naming the log at index when it does not decode. The
// caller holds f.mu.
func (f *FSM) apply(index uint64, data []byte, c *fsm.Command) any {
	if err := fsm.DecodeInto(c, data); err != nil {
		return &CommandError{Index: index, Err: err}
	}
	// Apply, never a variant that builds results in reused buffers: a response reaches
	// its future's reader after later logs were applied, so it must own its slices.
	return f.state.Apply(c)
}

// View calls fn with the state and the index of the last log applied, under a read lock:
// fn must not keep the state, change it, or call the FSM.
func (f *FSM) View(fn func(st *fsm.State, applied uint64)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state, f.applied)
}

// Copy returns a point-in-time copy of the state, in O(1), and the index of the last log it
// includes. The copy is the caller's: it may read it in any goroutine. Until it is handed
// back with Release, the FSM replaces every record the copy shares on its first change
// instead of changing it in place (fsm.State.Copy): a copy never released costs an
// allocation per changed record for as long as the FSM runs.
func (f *FSM) Copy() (*fsm.State, uint64) {
	f.mu.Lock() // Copy changes the trees' bookkeeping
	defer f.mu.Unlock()
	return f.state.Copy(), f.applied
}

// Release hands back a Copy once nothing reads it any more. A copy of a state the FSM has
// since replaced (Restore) is released to that state, which nothing changes any more; a
// copy already released is left alone. Release may be called from any goroutine.
func (f *FSM) Release(c *fsm.State) {
	f.mu.Lock() // the state's count of copies is Apply's to read
	defer f.mu.Unlock()
	if o := c.Origin(); o != nil {
		o.Release(c)
	}
}

// Snapshot captures the state in O(1) (fsm.State.Copy: the trees are copy-on-write); raft
// then calls Persist from another goroutine while Apply goes on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	st, applied := f.Copy()
	return &fsmSnapshot{f: f, state: st, header: snapshot.Header{
		Index: applied, Clock: st.Meta().Now, Records: uint64(st.Len())}}, nil
}

// Restore replaces the state with the one a snapshot holds, once it decoded and checked
// whole; on an error the state is unchanged.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, h, err := snapshot.Decode(rc)
	if err != nil {
		return fmt.Errorf("replica: restore: %w", err)
	}
	if mutant.ReplicaRestoreKeepsState {
		return nil
	}
	if f.opts.Restored != nil {
		f.opts.Restored(st)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = st
	if !mutant.ReplicaRestoreKeepsApplied {
		f.applied = h.Index
	}
	if f.opts.Adopted != nil {
		f.opts.Adopted(st)
	}
	f.signal()
	return nil
}

// signal wakes the waiters of WaitApplied; the caller holds f.mu for writing.
func (f *FSM) signal() {
	close(f.advanced)
	f.advanced = make(chan struct{})
}

// Applied returns the index of the last log given to the FSM: the state includes every
// command log up to it. raft's no-op and barrier logs never reach the FSM, so Applied may
// stay below an index raft applied (Node.Read accounts for that).
func (f *FSM) Applied() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// WaitApplied blocks until the FSM was given the log at index (or a later one, or a
// snapshot past it), or ctx ends; it returns ctx's error then. It waits on a channel the
// FSM closes whenever it advances, without polling.
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	return f.waitApplied(ctx, index, nil)
}

// waitApplied is WaitApplied that also gives up, with ErrClosed, when stop is closed.
func (f *FSM) waitApplied(ctx context.Context, index uint64, stop <-chan struct{}) error {
	for {
		f.mu.RLock()
		applied, advanced := f.applied, f.advanced
		f.mu.RUnlock()
		if applied >= index {
			return nil
		}
		select {
		case <-advanced:
		case <-stop:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("replica: waiting for log %d to be applied (applied %d): %w", index, applied, ctx.Err())
		}
	}
}

// fsmSnapshot is a state captured by Snapshot and its header.
type fsmSnapshot struct {
	f      *FSM
	state  *fsm.State
	header snapshot.Header
}

// Persist writes the state to the sink in the snapshot package's format (the bytes of a
// single-node snapshot file): the header's Index is the last log the FSM was given, raft's
// own metadata holds the snapshot's index and term.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := snapshot.Encode(sink, s.state, s.header); err != nil {
		sink.Cancel()
		return fmt.Errorf("replica: persist: %w", err)
	}
	return sink.Close()
}

// Release hands the captured state back to the FSM (raft calls it once Persist is done or
// the snapshot was given up), so that the FSM changes its records in place again.
func (s *fsmSnapshot) Release() {
	if s.state != nil {
		s.f.Release(s.state)
		s.state = nil
	}
}
