package execstore

import (
	"context"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/replica"
)

// Stats is a point-in-time summary of the store, for monitoring and tests.
type Stats struct {
	Executions int // records, terminal ones included
	Terminal   int // records with a terminal status
	Retired    int // terminal records retired (params, context and steps dropped), archived ones included
	// Archived counts the retired executions in the archive
	// (Options.Archive), and ArchiveBytes is the archive's size on disk.
	Archived     int
	ArchiveBytes uint64
	// ForgottenBefore is the forget cutoff (Options.ForgetAfter): the
	// archived executions that ended before it are forgotten, and counted
	// nowhere. Zero if nothing was ever forgotten.
	ForgottenBefore time.Time
	// ArchiveLookups counts the reads of the archive since Open: IDs not in
	// memory that the state machine checked (an admission's conflict, a
	// wake or an acknowledgement of an ended execution) and reads of
	// callers that fell through to it.
	ArchiveLookups uint64
	// ArchiveErr is the first error a read of the archive met since Open
	// (damaged data, or the engine's error), or nil. The read that met it
	// returned it; the store goes on, and /healthz says it is degraded.
	ArchiveErr    error
	Pending       int       // executions with a pending wake or a current lease
	NextDue       time.Time // earliest time an execution can be claimed; zero if none
	Now           time.Time // the store's latest stamped time
	WALFirstIndex uint64    // first entry still in the write-ahead log
	WALLastIndex  uint64    // last entry written (the number of logged commands, before truncation)
	WALBatches    uint64    // WAL batches (writes, each with one fsync) since Open
	// Waits of the writer for the callers of its latest batch before a
	// durable batch (Options.GroupWait) since Open: those that ended with the
	// callers back, and those that ended at their bound.
	GroupWaits       uint64
	GroupWaitsMissed uint64
	Queued           int    // commands waiting for the writer
	AppliedIndex     uint64 // last log entry applied to the state; WALLastIndex unless a write failed
	SnapshotIndex    uint64 // last log entry the newest snapshot loaded or written since Open covers; 0 if none
	Failed           error  // the fail-stop cause, or nil

	// FallbackChecked: the background check after Open has read every byte
	// recovery would fall back on if the newest snapshot were lost (the
	// older kept snapshot and the log between the two).
	FallbackChecked bool
	// FallbackErr is what that check found damaged, or nil. The store takes a
	// snapshot at once, after which the damaged part is no longer needed;
	// the error stays until the next Open checks again.
	FallbackErr error

	// Clock trouble since Open. Each batch of commands is stamped with
	// max(latest stamped time, clock); a clock reading earlier than that (it
	// was stepped back, or an earlier jump ahead was corrected) holds the
	// store's time still until the clock catches up.
	ClockBehindStamps uint64        // batches stamped with the store's time because the clock read earlier
	ClockBehindMax    time.Duration // the largest such gap between the store's time and the clock
	ClockBehind       time.Duration // the gap at the latest stamp; zero once the clock has caught up

	// Counts by status and by workflow, retired records included (List
	// shows only those not retired). ByWorkflow holds the first
	// StatsWorkflowsMax workflow IDs in byte order; WorkflowsOmitted counts
	// the others.
	ByStatus         map[Status]int
	ByWorkflow       map[string]int
	WorkflowsOmitted int
	// LastChange is the latest position of the change feed (see Changes).
	LastChange uint64

	// Replica is a replicated store's raft state (its role, the leader it
	// knows, its term and indexes); nil on a single node. There the WAL
	// indexes are the raft log's and AppliedIndex the last raft log applied;
	// WALBatches and SnapshotIndex stay zero (raft's snapshots are its own).
	Replica *replica.Stats
}

// StatsWorkflowsMax bounds Stats.ByWorkflow, so that a store with many
// distinct workflow IDs does not make every Stats call large.
const StatsWorkflowsMax = 1000

// NextDueIn is NextDue for the executions of the named queues (every queue
// when none is named): when a claim of those queues (ClaimRequest.Queues)
// may next lease something.
func (s *Store) NextDueIn(ctx context.Context, queues []string) (time.Time, error) {
	var next time.Time
	err := s.readLocal(ctx, func(state *fsm.State) {
		if at, ok := state.NextDueIn(queues); ok {
			next = timeFromNanos(at)
		}
	})
	return next, err
}

// NextDue returns the earliest time at which an execution can be claimed (a
// pending wake or a current lease's expiry), or the zero time if none is
// pending: Stats.NextDue without the rest of Stats, for a dispatcher that
// asks on every idle loop.
func (s *Store) NextDue(ctx context.Context) (time.Time, error) {
	var next time.Time
	err := s.readLocal(ctx, func(state *fsm.State) {
		if at, ok := state.NextDue(); ok {
			next = timeFromNanos(at)
		}
	})
	return next, err
}

// Stats returns a summary of the applied state. On a replicated store it
// describes the node it is asked of, from its own applied state, on a
// follower too (as do NextDue, Gauges and CheckInvariants): it never asks
// the leader.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := s.readLocal(ctx, func(state *fsm.State) {
		m := state.Meta()
		st.Executions = state.Len()
		st.Terminal = m.Terminal
		st.Retired = m.Retired + m.Archived
		st.Archived = m.Archived
		if m.ForgotBefore > 0 {
			st.ForgottenBefore = timeFromNanos(m.ForgotBefore)
		}
		st.Pending = state.DueLen()
		if at, ok := state.NextDue(); ok {
			st.NextDue = timeFromNanos(at)
		}
		st.Now = timeFromNanos(m.Now)
		st.ByStatus = make(map[Status]int, len(fsm.AllStatuses))
		for _, x := range fsm.AllStatuses {
			st.ByStatus[statusFromFSM(x)] = state.CountByStatus(x)
		}
		st.ByWorkflow = make(map[string]int, min(state.WorkflowCount(), StatsWorkflowsMax))
		state.Workflows(func(w string, n int) bool {
			if len(st.ByWorkflow) == StatsWorkflowsMax {
				return false
			}
			st.ByWorkflow[w] = n
			return true
		})
		st.WorkflowsOmitted = state.WorkflowCount() - len(st.ByWorkflow)
		st.LastChange = m.ChangeSeq
	})
	if err == nil {
		s.commit.stats(&st)
	}
	if err == nil && s.archive != nil {
		if as, aerr := s.archive.a.Stats(); aerr == nil {
			st.ArchiveBytes = as.DiskBytes
		}
		st.ArchiveLookups = s.archive.lookups.Load()
		if p := s.archive.readErr.Load(); p != nil {
			st.ArchiveErr = *p
		}
	}
	st.GroupWaits, st.GroupWaitsMissed = s.w.group.waited.Load(), s.w.group.missed.Load()
	_, st.Queued, _ = s.in.state()
	st.ClockBehindStamps = s.clock.heldBack.Load()
	st.ClockBehindMax = time.Duration(s.clock.behindMax.Load())
	st.ClockBehind = time.Duration(s.clock.behind.Load())
	st.Failed = s.failed()
	return st, err
}

// CheckInvariants verifies the state machine's indexes against its records
// (see fsm.State.CheckInvariants). It reads the whole state under the read
// lock: for tests, the simulator and operators' checks, not for hot paths.
func (s *Store) CheckInvariants() error {
	var err error
	if rerr := s.readLocal(context.Background(), func(st *fsm.State) { err = st.CheckInvariants() }); rerr != nil {
		return rerr
	}
	return err
}

// DueChanged returns a channel that is closed the next time a command may
// have made an execution due (an admission, a wake, a release, a child start,
// a commit that fires a watch, a child's outcome waking its parent), and
// when the store closes, so that a waiter learns at once that no claim will
// lease anything more.
// Dispatchers wait on it, and on a timer for Stats.NextDue, instead of
// polling: an idle dispatcher hears of new work within microseconds.
func (s *Store) DueChanged() <-chan struct{} { return s.due.channel() }
