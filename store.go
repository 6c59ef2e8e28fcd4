package execstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/mutant"
	"github.com/execstore/execstore/replica"
	"github.com/execstore/execstore/wal"
)

// Store is an open execstore: the state machine in memory behind its
// write-ahead log. Every method is safe for concurrent use.
//
// Every write follows one order, and nothing else mutates the state:
//
//  1. the caller's goroutine validates the input and queues the command;
//  2. the writer goroutine takes every queued command (up to MaxBatch),
//     stamps them with now = max(last, clock), and prechecks each against the
//     applied state: one that would change nothing (a duplicate admission, an
//     idle claim, a lost lease) is answered at once and never logged;
//  3. the others are encoded into one WAL batch: one write, one fsync;
//  4. only AFTER the fsync returns are they applied, in order, each getting
//     its own result;
//  5. then each caller is answered, and Await-ers and due-watchers woken.
//
// Reads see only applied state. While one batch is being synced, callers keep
// queueing the next. After a failed write or fsync the store refuses every
// write (ErrStorageFailed, wrapping the cause) until it is reopened.
type Store struct {
	dir    string
	opts   Options
	limits Limits
	logger *slog.Logger
	wal    *wal.Log
	lockf  *os.File

	metrics Metrics   // Options.Metrics; nil: nothing is measured
	obs     *observer // writer-owned; nil unless metrics or warnings are wanted (observe.go)

	// rw guards state against readers; only the writer goroutine changes it.
	rw    sync.RWMutex
	state *fsm.State

	qmu      sync.Mutex
	queue    []*request
	closing  bool          // guarded by qmu: no new requests
	qcalls   int           // guarded by qmu: the calls (submits) queued, counted by their lead requests
	kick     chan struct{} // wakes the writer; capacity 1
	stopped  chan struct{} // closed when the writer has exited
	isClosed atomic.Bool   // set once Close began: every method returns ErrClosed
	failure  atomic.Pointer[error]
	batches  atomic.Uint64 // WAL batches written since Open
	clock    clockWatch    // stamps the clock would have put before the store's time (clock.go)

	// Writer-owned.
	last       int64 // the latest time stamped, never decreasing
	batch      wal.Batch
	encoded    []byte
	logged     []*request  // this batch's requests that are logged
	deferred   []*request  // this batch's requests answered after it is applied
	noops      []*request  // a replica's requests that change nothing, answered once its leadership is confirmed
	view       batchView   // what the logged requests will do
	entries    []logEntry  // their WAL entries
	mergedAcks []fsm.Ack   // backing store of merged acknowledge-batch commands
	mergedBuf  fsm.Buffers // a merged acknowledge-batch command's results, copied out to its requests
	batchBytes int         // encoded bytes of the batch being written

	maxCommand int // the largest encoded command queued (see checkOptions)

	group groupCommit // how many callers a batch waits for (group.go)

	schedTimer scheduleTimer // writer-owned: the timer for the next schedule occurrence (schedules.go)

	applied uint64 // the last WAL index applied to state

	// Published for Stats: applied, and the index the newest snapshot loaded
	// or written since Open covers (0: none).
	appliedIndex  atomic.Uint64
	snapshotIndex atomic.Uint64
	published     publishedSnapshot // the newest snapshot's size and time, for Gauges

	awaits awaiters
	due    dueSignal
	snaps  snapshotter

	// changed is signalled after each applied batch that changed an
	// execution's status: Changes waits on it (list.go).
	changed dueSignal

	fallback fallback      // what recovery would fall back on; checked in the background
	checks   fallbackCheck // that check

	// A replicated store's node (replicated.go); nil on a single node, where
	// the writer logs to wal and applies itself.
	node       *replica.Node
	stale      bool   // ReplicaOptions.StaleReads
	changeSeen uint64 // the change feed's position at the FSM's last batch; FSM goroutine only
}

// request is one queued command and, once done is signalled, its answer.
type request struct {
	cmd  fsm.Command
	size int // fsm.EncodedLen(&cmd), computed in the caller's goroutine
	// logNext: the writer deferred this request once and then found it does
	// change the state; it is logged in the next batch, never deferred again.
	logNext bool
	// lead marks the first request of its submit call: the writer counts
	// calls, not requests, to tell how many callers wait (group.go).
	lead bool
	res  fsm.Result
	buf  fsm.Buffers // lent to the state for res's slices; kept when pooled (free)
	err  error
	done chan struct{} // capacity 1
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// Open opens (creating if needed) the store kept in dir and recovers its
// state: newest valid snapshot, then every WAL entry after it.
func Open(dir string, opts Options) (*Store, error) {
	s, err := newStore(dir, opts)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "raft")); err == nil {
		s.releaseDir()
		return nil, fmt.Errorf("execstore: open %s: %w", dir, invalidArg("the directory holds a node of a replicated store (raft/): open it with OpenReplicated"))
	}
	if err := s.recover(); err != nil {
		s.releaseDir()
		return nil, err
	}
	go s.run()
	s.checks.start(s)
	return s, nil
}

// newStore checks the options, fills in their defaults, and makes and locks
// the directory: what a single-node and a replicated store share before
// their state is loaded.
func newStore(dir string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 4096
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if opts.SnapshotEntries <= 0 {
		opts.SnapshotEntries = DefaultSnapshotEntries
	}
	if opts.SnapshotWALBytes <= 0 {
		opts.SnapshotWALBytes = DefaultSnapshotWALBytes
	}
	scheduleDefaults(&opts)
	if opts.RetentionCheck == 0 {
		opts.RetentionCheck = time.Second
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler) // Enabled is false: nothing is even formatted
	}
	s := &Store{
		dir:     dir,
		opts:    opts,
		limits:  opts.Limits.withDefaults(),
		logger:  logger,
		metrics: opts.Metrics,
		obs:     newObserver(opts.Metrics, logger),
		kick:    make(chan struct{}, 1),
		stopped: make(chan struct{}),
		snaps:   snapshotter{requests: make(chan chan error), done: make(chan snapshotOutcome, 1)},
	}
	maxCommand, err := checkOptions(&s.opts, &s.limits)
	if err != nil {
		return nil, fmt.Errorf("execstore: open %s: %w", dir, err)
	}
	s.maxCommand = maxCommand
	s.awaits.init()
	s.due.init()
	s.changed.init()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("execstore: open %s: %w", dir, err)
	}
	if !opts.NoSync {
		// The data directory's own entry, in case MkdirAll just made it.
		if err := fsyncDir(filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("execstore: open %s: %w", dir, err)
		}
	}
	lockf, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s.lockf = lockf
	return s, nil
}

// lockDir takes an exclusive lock on dir/LOCK so two processes never write
// the same store.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return nil, fmt.Errorf("execstore: lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("execstore: %s is in use by another store (lock: %w)", dir, err)
	}
	return f, nil
}

func (s *Store) releaseDir() {
	if s.wal != nil {
		s.wal.Close()
	}
	if s.lockf != nil {
		unlockDir(s.lockf)
	}
}

// unlockDir releases and closes the directory's lock file.
func unlockDir(f *os.File) error {
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return f.Close()
}

// recover rebuilds the state: the newest valid snapshot, then every later
// WAL entry through the same Apply the writer uses.
func (s *Store) recover() error {
	start := time.Now()
	w, err := wal.Open(filepath.Join(s.dir, "wal"), wal.Options{
		NoSync:      s.opts.NoSync,
		SegmentSize: s.opts.SegmentSize,
		Logger:      s.logger,
		Faults:      s.opts.WALFaults,
	})
	if err != nil {
		return fmt.Errorf("execstore: open write-ahead log: %w", err)
	}
	s.wal = w
	state, applied, fb, err := s.loadSnapshot(w.FirstIndex(), w.LastIndex())
	if err != nil {
		return err
	}
	s.fallback = fb
	if s.opts.Retention > 0 {
		state.TrackRetirement()
	}
	var cmd fsm.Command
	replayed := 0
	err = w.Replay(applied+1, func(index uint64, payload []byte) error {
		if err := fsm.DecodeInto(&cmd, payload); err != nil {
			return fmt.Errorf("entry %d: %w", index, err)
		}
		state.Apply(&cmd)
		replayed++
		return nil
	})
	if err != nil {
		return fmt.Errorf("execstore: replay write-ahead log: %w", err)
	}
	s.state = state
	s.applied = w.LastIndex()
	s.appliedIndex.Store(s.applied)
	s.snapshotIndex.Store(applied)
	s.last = state.Meta().Now
	s.logger.Info("execstore: opened", "dir", s.dir, "executions", state.Len(), "snapshot_index", applied,
		"replayed", replayed, "last_index", s.applied, "took", time.Since(start))
	return nil
}

// Close finishes in-flight writes, syncs and releases the directory. Every
// method called after Close returns ErrClosed.
func (s *Store) Close() error {
	if !s.isClosed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	s.qmu.Lock()
	s.closing = true
	s.qmu.Unlock()
	s.signal()
	<-s.stopped
	if s.node != nil {
		return s.closeReplicated()
	}
	s.checks.stop()
	s.awaits.closeAll()
	err := s.wal.Close()
	if s.lockf != nil {
		if cerr := unlockDir(s.lockf); err == nil {
			err = cerr
		}
	}
	if err != nil && s.failure.Load() == nil {
		return fmt.Errorf("execstore: close: %w", err)
	}
	return nil
}

func (s *Store) signal() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// failed returns the fail-stop error, or nil.
func (s *Store) failed() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// do queues a validated command and waits for its result. If ctx ends first,
// do returns ctx's error; the command may still take effect.
func (s *Store) do(ctx context.Context, c *fsm.Command) (fsm.Result, error) {
	r, err := s.doRequest(ctx, c)
	if err != nil {
		return fsm.Result{}, err
	}
	res, err := r.res, r.err
	r.buf = fsm.Buffers{} // res keeps its slices: the request must not lend them again
	r.free()
	return res, err
}

// doRequest is do for a caller that reads the answer from the request
// (res and err) and then frees it, so that the slices of its result are
// reused by the next request from the pool instead of being allocated
// again. Unless the error is not nil: then there is no request.
func (s *Store) doRequest(ctx context.Context, c *fsm.Command) (*request, error) {
	r := newRequest()
	r.cmd = *c
	one := [1]*request{r}
	if err := s.submit(ctx, one[:]); err != nil {
		return nil, err
	}
	return r, nil
}

// newRequest returns an empty request from the pool, for its caller to fill
// in cmd and submit.
func newRequest() *request { return requestPool.Get().(*request) }

// free returns an answered request to the pool. The writer still owns an
// unanswered one: it must not be freed.
//
// Its result buffers stay with it (the state builds the next result's
// leases and acknowledgement results in them, overwriting what they held)
// unless they are larger than a common claim's. They are not cleared: until
// the next use overwrites them they keep alive at most one claim's or
// batch's worth of record data, mostly shared with the stored records, and
// clearing memory that holds pointers costs the caller a write barrier per
// word while the collector runs.
func (r *request) free() {
	*r = request{done: r.done, buf: fsm.Buffers{Leases: reusable(r.buf.Leases), Acks: reusable(r.buf.Acks)}}
	requestPool.Put(r)
}

// reusable returns s emptied, or nil when it is too large to keep in a
// pooled request.
func reusable[T any](s []T) []T {
	if cap(s) > reusedResultsMax {
		return nil
	}
	return s[:0]
}

// reusedResultsMax bounds the leases or acknowledgement results a pooled
// request keeps room for.
const reusedResultsMax = 256

// submit queues several validated requests at once (so they share a batch)
// and waits until every one is answered in its res and err. The caller then
// reads the answers and frees the requests.
//
// The error is for the call as a whole: a command is larger than one WAL
// entry or batch holds, the store is closed or failed before queueing (the
// requests are freed, none took effect), or ctx ended (the commands may still
// take effect, and the requests must not be touched).
func (s *Store) submit(ctx context.Context, reqs []*request) error {
	err := ctx.Err()
	for _, r := range reqs {
		// Sized here, in the caller's goroutine: the limits bound every
		// command (checkOptions), so this refuses only what they missed.
		if r.size = fsm.EncodedLen(&r.cmd); r.size > s.maxCommand && err == nil {
			err = invalidArg("a %s command of %d bytes, more than the %d one write-ahead log batch holds", r.cmd.Kind, r.size, s.maxCommand)
		}
	}
	s.qmu.Lock()
	if err == nil {
		err = s.failed()
	}
	if err == nil && s.closing {
		err = ErrClosed
	}
	if err != nil {
		s.qmu.Unlock()
		for _, r := range reqs {
			r.free()
		}
		return err
	}
	first := len(s.queue) == 0
	if len(reqs) > 0 {
		reqs[0].lead = true
		s.qcalls++
	}
	s.queue = append(s.queue, reqs...)
	s.qmu.Unlock()
	if first {
		s.signal()
	}
	for _, r := range reqs {
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// run is the writer goroutine.
func (s *Store) run() {
	defer close(s.stopped)
	var taken []*request
	var retireTicker <-chan time.Time
	if s.opts.Retention > 0 && s.opts.RetentionCheck > 0 {
		t := time.NewTicker(s.opts.RetentionCheck)
		defer t.Stop()
		retireTicker = t.C
	}
	for {
		// Snapshot requests and a finished background snapshot are taken on
		// every round, so that a steady stream of writes never starves them.
		s.pollSnapshots()
		s.awaitGroup()
		s.qmu.Lock()
		n := takeBatch(s.queue, s.opts.MaxBatch, s.opts.MaxBatchBytes)
		taken = append(taken[:0], s.queue[:n]...)
		calls := 0
		for _, r := range taken {
			if r.lead {
				calls++
				r.lead = false // a deferred request queued again is not a new call
			}
		}
		s.qcalls -= calls
		rest := copy(s.queue, s.queue[n:])
		clear(s.queue[rest:])
		s.queue = s.queue[:rest]
		if rest == 0 && cap(s.queue) > queueCapMax {
			s.queue = nil // a burst's backing array is not kept for ever
		}
		closing := s.closing
		s.qmu.Unlock()
		// Retire what is due first, so that a write that follows the
		// retention's deadline answers after the retirement. Without the
		// ticker, only requests bring the writer here, and it retires all
		// that is due before taking them.
		more := false
		if s.opts.RetentionCheck >= 0 {
			more = s.retireTick()
		} else if n > 0 {
			for s.retireTick() {
			}
		}
		// Likewise admit the schedules' occurrences that have come, so that
		// a write stamped at or after an occurrence answers after it (unless
		// one command could not hold them all: the rest follow next round).
		if n > 0 || s.opts.ScheduleCheck >= 0 {
			more = s.scheduleTick() && s.opts.ScheduleCheck >= 0 || more
		}
		if n > 0 {
			s.process(taken)
			s.noteGroup(calls)
			clear(taken)
			if cap(taken) > queueCapMax {
				taken = nil
			}
		}
		s.snapshotTick()
		if more {
			rest++ // more to retire: go round again before sleeping
		}
		switch {
		case rest > 0:
			continue
		case closing && n == 0:
			s.finishSnapshots()
			return
		case closing:
			continue
		}
		schedTimer := s.armScheduleTimer()
		select {
		case <-s.kick:
		case <-schedTimer:
		case <-retireTicker:
		case req := <-s.snaps.requests:
			s.snaps.pending = append(s.snaps.pending, req)
		case out := <-s.snaps.done:
			s.snapshotDone(out)
		}
	}
}

// queueCapMax bounds the request slices the writer keeps between batches, so
// that one burst does not pin its memory for the life of the store.
const queueCapMax = 1 << 14

// process runs one batch through precheck, the log, and apply.
func (s *Store) process(batch []*request) {
	if s.node != nil {
		s.processReplicated(batch, nil)
		return
	}
	s.processAt(batch, s.stamp())
}

// processAt is process with the batch's time already stamped.
func (s *Store) processAt(batch []*request, now int64) {
	s.prepare(batch, now)
	if len(s.logged) > 0 {
		s.writeLogged(now)
	}
	s.settleDeferred()
	s.shrinkBuffers()
	if s.obs != nil {
		s.flushObserved()
	}
}

// prepare stamps a batch's commands with now and prechecks each against the
// applied state: it answers those that change nothing (a replica holds them
// in s.noops), and sorts the others into s.logged (to be logged now) and
// s.deferred (to be answered once the logged ones are applied, see
// batchView).
func (s *Store) prepare(batch []*request, now int64) {
	s.logged = s.logged[:0]
	s.noops = s.noops[:0]
	s.deferred = s.deferred[:0]
	s.view.reset()
	for _, r := range batch {
		r.cmd.Now = now
		if r.cmd.Kind == fsm.KindPutSchedule {
			firstOccurrence(&r.cmd) // its first occurrence follows its time
		}
		if err := s.failed(); err != nil {
			r.err = err
			s.answer(r)
			continue
		}
		res, mutates := s.state.Precheck(&r.cmd)
		switch {
		case !mutates && s.node != nil:
			r.res = res
			s.noops = append(s.noops, r) // answered once leadership is confirmed (replicated.go)
		case !mutates:
			r.res = res
			s.answer(r)
		case !r.logNext && s.view.settles(&r.cmd):
			s.deferred = append(s.deferred, r)
		default:
			s.view.note(&r.cmd, s.state)
			s.logged = append(s.logged, r)
		}
	}
}

// answer tells a request's caller its answer, after accounting for it. The
// caller owns the request again afterwards. Writer goroutine only.
func (s *Store) answer(r *request) {
	if s.obs != nil {
		s.observe(r)
	}
	r.done <- struct{}{}
}

// writeLogged logs the batch's logged requests, applies them and answers
// their callers.
func (s *Store) writeLogged(now int64) {
	s.encodeLogged(now)
	if mutant.ApplyBeforeLog {
		s.applyLogged()
	}
	var start time.Time
	if s.metrics != nil {
		start = time.Now()
	}
	first, err := s.wal.Write(&s.batch)
	s.batches.Add(1)
	if s.metrics != nil && err == nil {
		s.metrics.Batch(len(s.entries), s.batchBytes, time.Since(start), s.wal.LastSync())
	}
	if err != nil {
		if !errors.Is(err, wal.ErrFailed) {
			// The log refused the batch before writing a byte: a command the
			// budget should have kept out (a programming error, not a storage
			// failure). Those callers get the error; the store goes on.
			s.logger.Error("execstore: the write-ahead log refused a batch; nothing was written", "err", err)
			err = invalidArg("the write-ahead log refused the batch: %v", err)
		} else {
			s.failStop(err)
			err = s.failed()
		}
		if mutant.ApplyBeforeLog {
			return // already answered
		}
		for _, r := range s.logged {
			r.err = err
			s.answer(r)
		}
		return
	}
	n := len(s.entries)
	if mutant.AppliedCountsRequests {
		n = len(s.logged)
	}
	s.applied = first + uint64(n) - 1
	s.appliedIndex.Store(s.applied)
	s.snaps.entries += len(s.entries)
	if !mutant.ApplyBeforeLog {
		s.applyLogged()
	}
}

// settleDeferred answers the batch's deferred requests from the applied
// state, or queues again, at the front, those that turn out to change it.
func (s *Store) settleDeferred() {
	if len(s.deferred) == 0 {
		return
	}
	var again []*request
	if s.node != nil {
		s.rw.RLock()
	}
	for _, r := range s.deferred {
		if err := s.failed(); err != nil {
			r.err = err
			s.answer(r)
			continue
		}
		res, mutates := s.state.Precheck(&r.cmd)
		if !mutates {
			r.res = res
			s.answer(r)
			continue
		}
		r.logNext = true
		again = append(again, r)
	}
	if s.node != nil {
		s.rw.RUnlock()
	}
	clear(s.deferred)
	if len(again) > 0 {
		s.qmu.Lock()
		s.queue = append(again, s.queue...)
		s.qmu.Unlock()
		s.signal() // the writer must go round again even if nothing else arrives
	}
}

// shrinkBuffers drops the writer's batch buffers after a large batch, so that
// one burst of large commands does not pin its memory for the life of the
// store.
func (s *Store) shrinkBuffers() {
	if s.batchBytes > reusedBytesMax {
		s.batch = wal.Batch{}
	}
	if cap(s.encoded) > reusedBytesMax {
		s.encoded = nil
	}
	if cap(s.logged) > queueCapMax {
		s.logged, s.entries, s.mergedAcks = nil, nil, nil
	}
	if cap(s.mergedBuf.Acks) > reusedResultsMax {
		s.mergedBuf = fsm.Buffers{}
	}
	if cap(s.deferred) > queueCapMax {
		s.deferred = nil
	}
	if cap(s.noops) > queueCapMax {
		s.noops = nil
	}
}

// reusedBytesMax bounds the encoded bytes the writer's buffers keep between
// batches.
const reusedBytesMax = 4 << 20

// logEntry is one logged command: one request's, or a run of consecutive
// acknowledge requests merged into one acknowledge-batch command (which
// applies each exactly as its own command would, with its own result), so
// that concurrent workers' acknowledgements cost one WAL entry, not one each.
type logEntry struct {
	reqs   []*request  // the requests it answers, in order
	merged fsm.Command // the acknowledge-batch command, when len(reqs) > 1
}

// size is an upper bound of the entry's encoded length: its requests'
// (a merged acknowledge-batch takes less).
func (e *logEntry) size() int {
	n := 0
	for _, r := range e.reqs {
		n += r.size
	}
	return n
}

func (e *logEntry) command() *fsm.Command {
	if len(e.reqs) == 1 {
		return &e.reqs[0].cmd
	}
	return &e.merged
}

// encodeLogged groups the logged requests into entries and encodes them into
// the WAL batch. Writer goroutine only.
func (s *Store) encodeLogged(now int64) {
	s.entries = s.entries[:0]
	s.mergedAcks = slices.Grow(s.mergedAcks[:0], len(s.logged)) // never reallocated below
	s.batch.Reset()
	s.batchBytes = 0
	size := 0
	for _, r := range s.logged {
		size += r.size
	}
	s.batch.Grow(size) // an upper bound: merged acknowledgements take less
	for i := 0; i < len(s.logged); {
		j := i + 1
		if s.logged[i].cmd.Kind == fsm.KindAcknowledge {
			for j < len(s.logged) && s.logged[j].cmd.Kind == fsm.KindAcknowledge {
				j++
			}
			run := s.logged[i:j]
			j = i + ackRunLen(len(run), func(k int) (string, *fsm.Outcome) {
				return run[k].cmd.ExecutionID, &run[k].cmd.Outcome
			})
		}
		e := logEntry{reqs: s.logged[i:j]}
		if j-i > 1 {
			start := len(s.mergedAcks)
			for _, r := range e.reqs {
				s.mergedAcks = append(s.mergedAcks, fsm.Ack{ExecutionID: r.cmd.ExecutionID, Token: r.cmd.Token, Outcome: r.cmd.Outcome})
			}
			e.merged = fsm.Command{Kind: fsm.KindAcknowledgeBatch, Now: now, Acks: s.mergedAcks[start:len(s.mergedAcks):len(s.mergedAcks)]}
		}
		s.entries = append(s.entries, e)
		s.encoded = fsm.AppendEncode(s.encoded[:0], e.command())
		s.batch.Add(s.encoded)
		s.batchBytes += len(s.encoded)
		s.snaps.bytes += len(s.encoded)
		i = j
	}
}

// applyLogged applies the logged entries of a batch, in order, and answers
// their callers.
func (s *Store) applyLogged() {
	var became fsm.Transitions
	s.rw.Lock()
	changesBefore := s.state.Meta().ChangeSeq
	for k := range s.entries {
		e := &s.entries[k]
		if len(e.reqs) == 1 {
			r := e.reqs[0]
			r.res = s.state.ApplyWith(e.command(), &r.buf)
			became.Due = became.Due || r.res.Became.Due
			became.Terminal = became.Terminal || r.res.Became.Terminal
			continue
		}
		res := s.state.ApplyWith(e.command(), &s.mergedBuf)
		for i, r := range e.reqs {
			r.res = res.Acks[i]
		}
		became.Due = became.Due || res.Became.Due
		became.Terminal = became.Terminal || res.Became.Terminal
	}
	changed := s.state.Meta().ChangeSeq != changesBefore
	s.rw.Unlock()
	s.wake(became, changed, func(yield func(*fsm.Command, *fsm.Result)) {
		for _, r := range s.logged {
			yield(&r.cmd, &r.res)
		}
	})
	for _, r := range s.logged {
		s.answer(r)
	}
	clear(s.mergedAcks) // drop references to the callers' data
	clear(s.mergedBuf.Acks)
}

// wake tells those waiting what a batch of applied commands did: the change
// feed's readers when it changed, the Await-ers of executions that ended, the
// dispatchers when some execution became due. each yields the batch's
// commands with their results. It reads the state unlocked: only from the
// goroutine that changes it (the writer, or a replica's FSM goroutine).
func (s *Store) wake(became fsm.Transitions, changed bool, each func(yield func(*fsm.Command, *fsm.Result))) {
	if changed {
		s.changed.notify() // after the unlock: a woken Changes reads at once
	}
	if became.Terminal {
		ended := false
		each(func(c *fsm.Command, res *fsm.Result) {
			switch {
			case !res.Became.Terminal:
			case c.Kind == fsm.KindAcknowledgeBatch:
				for i := range res.Acks {
					if a := &res.Acks[i]; a.Became.Terminal {
						s.awaits.notify(a.Exec.ID)
					}
				}
			case c.Kind == fsm.KindAcknowledge:
				s.awaits.notify(res.Exec.ID)
			default: // cancel, claim, release: which ones, the state says
				ended = true
			}
		})
		if ended {
			s.awaits.notifyTerminal(func(id string) bool {
				e, ok := s.state.Get(id)
				return ok && e.Terminal()
			})
		}
	}
	if became.Due {
		s.due.notify()
	}
}

// stamp returns the time for the next batch: the clock, but never earlier
// than any time already stamped (across restarts too: recovery starts from
// the state's latest time).
func (s *Store) stamp() int64 {
	now, ok := nanosFromTime(s.opts.Now())
	s.watchClock(now, ok)
	if !ok || now < s.last {
		now = s.last
	}
	s.last = now
	return now
}

func (s *Store) failStop(cause error) {
	err := storageFailed(cause)
	if s.failure.CompareAndSwap(nil, &err) {
		s.logger.Error("execstore: storage failed; refusing writes until reopened", "dir", s.dir, "err", cause)
	}
}

// readLocal runs fn against this node's applied state under the read lock:
// on a replica, without asking the leader (Stats, Gauges and the like
// describe the node they are asked of).
func (s *Store) readLocal(ctx context.Context, fn func(st *fsm.State)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed.Load() {
		return ErrClosed
	}
	s.rw.RLock()
	fn(s.state)
	s.rw.RUnlock()
	return nil
}

// read runs fn against the applied state under the read lock; on a replica,
// linearizably unless ReplicaOptions.StaleReads (see replicated.go).
func (s *Store) read(ctx context.Context, fn func(st *fsm.State)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed.Load() {
		return ErrClosed
	}
	if s.node != nil && !s.stale {
		err := s.node.Read(ctx, fn)
		if errors.Is(err, replica.ErrNodeClosed) {
			err = ErrClosed
		}
		return err
	}
	s.rw.RLock()
	fn(s.state)
	s.rw.RUnlock()
	return nil
}

// resultErr turns a state-machine result code into the public error.
func resultErr(res *fsm.Result, c *fsm.Command) error {
	switch res.Code {
	case fsm.CodeOK:
		return nil
	case fsm.CodeConflict:
		return errorf(ErrExecutionIDConflict, "%q", c.ExecutionID)
	case fsm.CodeNotFound:
		if c.Kind == fsm.KindDeleteSchedule {
			return errorf(ErrScheduleNotFound, "%q", c.ScheduleID)
		}
		if c.Token != 0 || c.Kind == fsm.KindRenew || c.Kind == fsm.KindRelease ||
			c.Kind == fsm.KindAcknowledge || c.Kind == fsm.KindSaveStep || c.Kind == fsm.KindStart {
			return leaseNotFound(c.ExecutionID)
		}
		return notFound(c.ExecutionID)
	case fsm.CodeLeaseLost:
		return leaseLost(c.ExecutionID, c.Token)
	case fsm.CodeLeaseCancelled:
		return leaseCancelled(c.ExecutionID, c.Token)
	case fsm.CodeMismatch:
		return errorf(ErrStartRequestMismatch, "execution %q step %q already started child %q", c.ExecutionID, c.Key, res.ID)
	case fsm.CodeLimitExceeded:
		if c.Kind == fsm.KindPutSchedule {
			return errorf(ErrLimitExceeded, "there are %d schedules already, the limit", c.Limit)
		}
		return errorf(ErrLimitExceeded, "execution %q has reached its limit of %s", c.ExecutionID, limitName(c.Kind))
	}
	return fmt.Errorf("execstore: unexpected result code %v", res.Code)
}

func limitName(k fsm.Kind) string {
	if k == fsm.KindWatch {
		return fmt.Sprint(MaxWatchesPerExecution, " watches")
	}
	return fmt.Sprint(MaxStepsPerExecution, " steps")
}

// awaiters lets Await sleep until an execution becomes terminal.
type awaiters struct {
	mu     sync.Mutex
	byID   map[string]*awaitEntry
	closed chan struct{} // closed by Close
}

// awaitEntry is shared by every Await of one execution; ch is closed when it
// becomes terminal.
type awaitEntry struct {
	ch chan struct{}
	n  int
}

func (a *awaiters) init() {
	a.byID = make(map[string]*awaitEntry)
	a.closed = make(chan struct{})
}

// acquire returns the entry for id. Acquire BEFORE reading the record, so no
// transition is missed between the read and the wait.
func (a *awaiters) acquire(id string) *awaitEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byID[id]
	if !ok {
		e = &awaitEntry{ch: make(chan struct{})}
		a.byID[id] = e
	}
	e.n++
	return e
}

// release drops one Await's interest, so abandoned waits leave nothing behind.
func (a *awaiters) release(id string, e *awaitEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e.n--
	if e.n == 0 && a.byID[id] == e {
		delete(a.byID, id)
	}
}

func (a *awaiters) notify(id string) {
	a.mu.Lock()
	if e, ok := a.byID[id]; ok {
		close(e.ch)
		delete(a.byID, id)
	}
	a.mu.Unlock()
}

// notifyTerminal wakes the Awaits of every awaited execution that terminal
// says has ended: after a command that may have ended several executions
// it does not name (a cancellation of a tree, a claim that failed
// exhausted attempts). It costs one look per execution awaited.
func (a *awaiters) notifyTerminal(terminal func(id string) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, e := range a.byID {
		if terminal(id) {
			close(e.ch)
			delete(a.byID, id)
		}
	}
}

func (a *awaiters) closeAll() { close(a.closed) }

// dueSignal broadcasts "something may have become due" to dispatchers.
type dueSignal struct {
	mu     sync.Mutex
	ch     chan struct{}
	handed bool // ch was handed out since the last notify: someone may wait on it
}

func (d *dueSignal) init() { d.ch = make(chan struct{}) }

// notify wakes everyone waiting on the channel handed out last. When it was
// not handed out since the last notify, nobody waits on it: it is kept, so
// that a writer nobody watches does not allocate a channel per batch.
func (d *dueSignal) notify() {
	d.mu.Lock()
	if d.handed {
		close(d.ch)
		d.ch = make(chan struct{})
		d.handed = false
	}
	d.mu.Unlock()
}

func (d *dueSignal) channel() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.handed = true
	return d.ch
}

// retireLimit bounds the executions one retire command retires, so that one
// command never holds the writer long.
const retireLimit = 1024

// retireTick logs and applies a retire command when some terminal execution
// is older than the retention. It reports whether more may remain. Writer
// goroutine only.
func (s *Store) retireTick() bool {
	if s.opts.Retention <= 0 || s.failed() != nil || (s.node != nil && !s.isLeader()) {
		return false
	}
	var oldest int64
	ok := false
	s.lockedRead(func() { oldest, ok = s.state.NextRetirable() })
	if !ok {
		return false
	}
	now, _ := nanosFromTime(s.opts.Now())
	cutoff := s.retireCutoff(max(now, s.last))
	if oldest >= cutoff {
		return false
	}
	r := newRequest()
	r.cmd = fsm.Command{Kind: fsm.KindRetire, At: cutoff, Limit: retireLimit}
	if s.node != nil {
		// The cutoff follows the time the node stamps the command with.
		s.processReplicated([]*request{r}, func(now int64) { r.cmd.At = s.retireCutoff(now) })
	} else {
		s.process([]*request{r})
	}
	<-r.done
	more := r.err == nil && r.res.Count == retireLimit
	r.free()
	return more
}

// retireCutoff is the time before which a terminal execution is retired, at
// the store's time now.
func (s *Store) retireCutoff(now int64) int64 {
	cutoff := now - int64(s.opts.Retention)
	if mutant.RetireAtCutoff {
		cutoff++
	}
	return cutoff
}

func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
