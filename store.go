package execstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/vfs"
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
	lock   io.Closer // the directory's LOCK, held while the store is open

	metrics Metrics   // Options.Metrics; nil: nothing is measured
	obs     *observer // writer-owned; nil unless metrics or warnings are wanted (observe.go)

	// rw guards state against readers; only the writer goroutine (on a
	// replica, the FSM's) changes it: see the committer's locking rule.
	rw    sync.RWMutex
	state *fsm.State

	in     inbox     // the requests queued for the writer (inbox.go)
	w      writer    // the writer goroutine's own state (writer.go)
	commit committer // chosen at Open: the log or raft (committer.go)

	stopped    chan struct{} // closed when the writer has exited
	isClosed   atomic.Bool   // set once Close began: every method returns ErrClosed
	failure    atomic.Pointer[error]
	clock      clockWatch        // stamps the clock would have put before the store's time (clock.go)
	maxCommand int               // the largest encoded command queued (see checkOptions)
	published  publishedSnapshot // the newest snapshot's size and time, for Gauges

	awaits awaiters
	due    dueSignal
	// archive holds the retired executions, when the store has one
	// (Options.Archive; archived.go).
	archive *storeArchive
	// changed is signalled after each applied batch that changed an
	// execution's status: Changes waits on it (list.go).
	changed dueSignal
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
	// fill, on the writer's own commands, fills in the command at the
	// batch's time from the applied state (planner.plan), or reports that
	// there is nothing to do at that time.
	fill func(c *fsm.Command, st *fsm.State) bool
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
	if _, err := s.opts.FS.Stat(filepath.Join(dir, "raft")); err == nil {
		s.releaseDir()
		return nil, fmt.Errorf("execstore: open %s: %w", dir, invalidArg("the directory holds a node of a replicated store (raft/): open it with OpenReplicated"))
	}
	if err := s.openArchive(); err != nil {
		s.releaseDir()
		return nil, err
	}
	lc, err := openLog(s)
	if err != nil {
		s.closeArchive()
		s.releaseDir()
		return nil, err
	}
	s.start(lc)
	lc.checks.start(lc)
	return s, nil
}

// start starts the writer with its committer, from the recovered state.
func (s *Store) start(c committer) {
	s.commit = c
	s.w = writer{s: s, c: c}
	c.view(func(st *fsm.State) { s.w.last = st.Meta().Now })
	go s.w.run()
}

// newStore checks the options, fills in their defaults, and makes and locks
// the directory: what a single-node and a replicated store share before
// their state is loaded.
func newStore(dir string, opts Options) (*Store, error) {
	if err := clockOptions(&opts); err != nil {
		return nil, fmt.Errorf("execstore: open %s: %w", dir, err)
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
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
		stopped: make(chan struct{}),
	}
	s.in.init()
	maxCommand, err := checkOptions(&s.opts, &s.limits)
	if err != nil {
		return nil, fmt.Errorf("execstore: open %s: %w", dir, err)
	}
	s.maxCommand = maxCommand
	s.awaits.init()
	s.due.init()
	s.changed.init()
	fs := s.opts.FS
	if err := fs.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("execstore: open %s: %w", dir, err)
	}
	if !opts.NoSync {
		// The data directory's own entry, in case MkdirAll just made it.
		if err := vfs.SyncDir(fs, filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("execstore: open %s: %w", dir, err)
		}
	}
	lock, err := lockDir(fs, dir)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// lockDir takes an exclusive lock on dir/LOCK so two processes never write
// the same store.
func lockDir(fs vfs.FS, dir string) (io.Closer, error) {
	lock, err := fs.Lock(filepath.Join(dir, "LOCK"))
	switch {
	case errors.Is(err, syscall.EWOULDBLOCK):
		return nil, fmt.Errorf("execstore: %s is in use by another store (lock: %w)", dir, err)
	case err != nil:
		return nil, fmt.Errorf("execstore: lock %s: %w", dir, err)
	}
	return lock, nil
}

// releaseDir releases the directory's lock.
func (s *Store) releaseDir() {
	if s.lock != nil {
		s.lock.Close()
	}
}

// Close finishes in-flight writes, syncs and releases the directory. Every
// method called after Close returns ErrClosed.
func (s *Store) Close() error {
	if !s.isClosed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	s.in.close()
	<-s.stopped
	err := s.commit.close()
	if aerr := s.closeArchive(); err == nil {
		err = aerr
	}
	s.awaits.closeAll()
	s.due.notify() // whoever waits for work learns at once that there will be none
	if s.lock != nil {
		if cerr := s.lock.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil && s.failure.Load() == nil {
		return fmt.Errorf("execstore: close: %w", err)
	}
	return nil
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
	if err == nil {
		err = s.in.push(reqs, s.failed)
	}
	if err != nil {
		for _, r := range reqs {
			r.free()
		}
		return err
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

// answer tells a request's caller its answer, after accounting for it. The
// caller owns the request again afterwards. Writer goroutine only.
func (s *Store) answer(r *request) {
	if s.obs != nil {
		s.observe(r)
	}
	r.done <- struct{}{}
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
	return s.commit.read(ctx, fn)
}

// resultErr turns a state-machine result code into the public error.
func resultErr(res *fsm.Result, c *fsm.Command) error {
	switch res.Code {
	case fsm.CodeOK:
		return nil
	case fsm.CodeConflict:
		return errorf(ErrExecutionIDConflict, "%q", c.ExecutionID)
	case fsm.CodeNotFound:
		switch fsm.NotFoundOf(c.Kind) {
		case fsm.NotFoundSchedule:
			return errorf(ErrScheduleNotFound, "%q", c.ScheduleID)
		case fsm.NotFoundLease:
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
		switch fsm.LimitOf(c.Kind) {
		case fsm.LimitSchedules:
			return errorf(ErrLimitExceeded, "there are %d schedules already, the limit", c.Limit)
		case fsm.LimitQueueSettings:
			return errorf(ErrLimitExceeded, "there are %d queues with settings already, the limit", c.Limit)
		case fsm.LimitWatches:
			return errorf(ErrLimitExceeded, "execution %q has reached its limit of %d watches", c.ExecutionID, MaxWatchesPerExecution)
		case fsm.LimitSteps:
			return errorf(ErrLimitExceeded, "execution %q has reached its limit of %d steps", c.ExecutionID, MaxStepsPerExecution)
		}
	}
	return fmt.Errorf("execstore: unexpected result code %v of a %s command", res.Code, c.Kind)
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
