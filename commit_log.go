package execstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/mutant"
	"github.com/execstore/execstore/replica"
	"github.com/execstore/execstore/wal"
)

// logCommitter commits a single-node store's batches: each plan's entries
// are one write to the store's own write-ahead log (one fsync), applied once
// it returned, in the writer goroutine.
//
// Locking rule: only the writer goroutine changes the state, holding s.rw
// for writing while it applies or copies it; the writer reads it without the
// lock, and every other goroutine under the read lock.
type logCommitter struct {
	s   *Store
	wal *wal.Log

	// Writer-owned: buffers reused from batch to batch.
	batch      wal.Batch
	batchBytes int // encoded bytes of the latest batch
	encoded    []byte
	mergedBuf  fsm.Buffers // a merged acknowledge-batch command's results, copied out to its requests

	applied uint64 // the last WAL index applied to the state; writer-owned

	// Published for Stats: applied, and the index the newest snapshot loaded
	// or written since Open covers (0: none), and the batches written.
	appliedIndex  atomic.Uint64
	snapshotIndex atomic.Uint64
	batches       atomic.Uint64

	// applyFirst is the log index of the first entry apply applies.
	applyFirst uint64

	snaps    snapshotter
	fallback fallback      // what recovery would fall back on; checked in the background
	checks   fallbackCheck // that check
}

// openLog opens the write-ahead log in s.dir and recovers the state: the
// newest valid snapshot, then every later WAL entry through the same Apply
// the writer uses.
func openLog(s *Store) (*logCommitter, error) {
	start := time.Now()
	w, err := wal.Open(filepath.Join(s.dir, "wal"), wal.Options{
		NoSync:      s.opts.NoSync,
		SegmentSize: s.opts.SegmentSize,
		Logger:      s.logger,
		FS:          s.opts.FS,
	})
	if err != nil {
		return nil, fmt.Errorf("execstore: open write-ahead log: %w", err)
	}
	c := &logCommitter{s: s, wal: w}
	c.snaps.init()
	state, applied, fb, err := c.loadSnapshot(w.FirstIndex(), w.LastIndex())
	if err != nil {
		w.Close()
		return nil, err
	}
	c.fallback = fb
	state.SetSizes(s.opts.sizes)
	if s.opts.Retention > 0 {
		state.TrackRetirement()
	}
	if s.archive != nil {
		if err := s.archive.recover(state, applied); err != nil {
			w.Close()
			return nil, err
		}
	}
	var cmd fsm.Command
	replayed := 0
	err = w.Replay(applied+1, func(index uint64, payload []byte) error {
		if err := fsm.DecodeInto(&cmd, payload); err != nil {
			return fmt.Errorf("entry %d: %w", index, err)
		}
		res := state.Apply(&cmd)
		replayed++
		if s.archive != nil {
			if err := s.archive.put(&res, index, state); err != nil {
				return err
			}
			return s.archive.check()
		}
		return nil
	})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("execstore: replay write-ahead log: %w", err)
	}
	s.state = state
	c.applied = w.LastIndex()
	c.appliedIndex.Store(c.applied)
	c.snapshotIndex.Store(applied)
	s.logger.Info("execstore: opened", "dir", s.dir, "executions", state.Len(), "snapshot_index", applied,
		"replayed", replayed, "last_index", c.applied, "took", time.Since(start))
	return c, nil
}

func (c *logCommitter) commit(w *writer, batch []*request) {
	s := c.s
	now := w.stamp()
	p := w.planner.plan(batch, s.state, now, s.failed())
	if s.archive != nil && s.failed() == nil {
		if err := s.archive.check(); err != nil {
			// A precheck decided on a read of the archive that failed.
			s.failStop(err)
			p = w.planner.plan(batch, s.state, now, s.failed())
		}
	}
	for _, r := range p.answered {
		s.answer(r)
	}
	for _, r := range p.idle {
		r.done <- struct{}{}
	}
	if len(p.logged) > 0 {
		c.write(p)
	}
	if len(p.deferred) > 0 {
		if again := settle(p.deferred, s.state, s.failed(), s.answer); len(again) > 0 {
			s.in.pushFront(again)
		}
	}
	w.planner.done()
	c.shrink()
	if s.archive != nil {
		s.archive.batchDone()
	}
	if s.obs != nil {
		s.flushObserved()
	}
}

// write logs a plan's entries as one WAL batch, applies them and answers
// their callers; or, when the log fails, answers them with its error.
func (c *logCommitter) write(p *plan) {
	s := c.s
	bytes := c.encode(p)
	if mutant.ApplyBeforeLog {
		c.applyFirst = c.applied + 1
		c.apply(p)
	}
	var start time.Time
	if s.metrics != nil {
		start = time.Now()
	}
	first, err := c.wal.Write(&c.batch)
	c.batches.Add(1)
	if s.metrics != nil && err == nil {
		s.metrics.Batch(len(p.entries), bytes, time.Since(start), c.wal.LastSync())
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
		for _, r := range p.logged {
			r.err = err
			s.answer(r)
		}
		return
	}
	n := len(p.entries)
	if mutant.AppliedCountsRequests {
		n = len(p.logged)
	}
	c.applied = first + uint64(n) - 1
	c.applyFirst = first
	c.appliedIndex.Store(c.applied)
	c.snaps.entries += len(p.entries)
	if !mutant.ApplyBeforeLog {
		c.apply(p)
	}
}

// encode encodes a plan's entries into the WAL batch, and returns their
// bytes.
func (c *logCommitter) encode(p *plan) int {
	c.batch.Reset()
	c.batch.Grow(p.size()) // an upper bound: merged acknowledgements take less
	bytes := 0
	for k := range p.entries {
		c.encoded = fsm.AppendEncode(c.encoded[:0], p.entries[k].command())
		c.batch.Add(c.encoded)
		bytes += len(c.encoded)
	}
	c.snaps.bytes += bytes
	c.batchBytes = bytes
	return bytes
}

// apply applies a plan's logged entries, in order, and answers their
// callers.
func (c *logCommitter) apply(p *plan) {
	s := c.s
	var became fsm.Transitions
	s.rw.Lock()
	changesBefore := s.state.Meta().ChangeSeq
	var archiveErr error
	for k := range p.entries {
		e := &p.entries[k]
		if len(e.reqs) == 1 {
			r := e.reqs[0]
			r.res = s.state.ApplyWith(e.command(), &r.buf)
			became.Due = became.Due || r.res.Became.Due
			became.Terminal = became.Terminal || r.res.Became.Terminal
			if s.archive != nil && archiveErr == nil {
				// Before the next command, which may ask the archive.
				archiveErr = s.archive.put(&r.res, c.applyFirst+uint64(k), s.state)
			}
			continue
		}
		res := s.state.ApplyWith(e.command(), &c.mergedBuf)
		for i, r := range e.reqs {
			r.res = res.Acks[i]
		}
		became.Due = became.Due || res.Became.Due
		became.Terminal = became.Terminal || res.Became.Terminal
	}
	changed := s.state.Meta().ChangeSeq != changesBefore
	s.rw.Unlock()
	if s.archive != nil {
		if archiveErr == nil {
			archiveErr = s.archive.check()
		}
		if archiveErr != nil {
			// The state may hold a decision made on a failed read, or lack
			// records the archive does not have: nothing of it is answered.
			s.failStop(archiveErr)
			for _, r := range p.logged {
				r.err = s.failed()
				s.answer(r)
			}
			clear(c.mergedBuf.Acks)
			return
		}
	}
	s.wake(became, changed, func(yield func(*fsm.Command, *fsm.Result)) {
		for _, r := range p.logged {
			yield(&r.cmd, &r.res)
		}
	})
	for _, r := range p.logged {
		s.answer(r)
	}
	clear(c.mergedBuf.Acks) // drop references to the callers' data
}

// shrink drops the batch buffers after a large batch, so that one burst of
// large commands does not pin its memory for the life of the store.
func (c *logCommitter) shrink() {
	if c.batchBytes > reusedBytesMax {
		c.batch = wal.Batch{}
	}
	if cap(c.encoded) > reusedBytesMax {
		c.encoded = nil
	}
	if cap(c.mergedBuf.Acks) > reusedResultsMax {
		c.mergedBuf = fsm.Buffers{}
	}
}

// reusedBytesMax bounds the encoded bytes the writer's buffers keep between
// batches.
const reusedBytesMax = 4 << 20

func (c *logCommitter) view(fn func(st *fsm.State)) { fn(c.s.state) }

func (c *logCommitter) leads() bool { return true }

func (c *logCommitter) groupBound(o *Options) time.Duration {
	switch {
	case o.NoSync || o.GroupWait < 0:
		return 0 // nothing to share: no fsync
	case o.GroupWait > 0:
		return o.GroupWait
	default:
		// A wait that saves an fsync pays while it is shorter than one.
		return min(c.wal.LastSync()/2, groupWaitMax)
	}
}

func (c *logCommitter) read(ctx context.Context, fn func(st *fsm.State)) error {
	c.s.rw.RLock()
	fn(c.s.state)
	c.s.rw.RUnlock()
	return nil
}

func (c *logCommitter) readsWait() bool { return false }

func (c *logCommitter) stats(st *Stats) {
	st.WALFirstIndex = c.wal.FirstIndex()
	st.WALLastIndex = c.wal.LastIndex()
	st.WALBatches = c.batches.Load()
	st.AppliedIndex = c.appliedIndex.Load()
	st.SnapshotIndex = c.snapshotIndex.Load()
	st.FallbackChecked, st.FallbackErr = c.checks.result()
}

// idTime is the clock's time: a single node's generated IDs then sort by
// creation, as the simulator relies on.
func (c *logCommitter) idTime() time.Time { return c.s.opts.Now() }

func (c *logCommitter) close() error {
	c.checks.stop()
	return c.wal.Close()
}

func (c *logCommitter) node() *replica.Node { return nil }
