package execstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/mutant"
	"github.com/execstore/execstore/snapshot"
)

// Snapshot cadence defaults.
const (
	DefaultSnapshotEntries  = 100_000
	DefaultSnapshotWALBytes = 64 << 20
)

// snapshotter is a single node's bookkeeping for snapshots. Only the
// writer goroutine touches it, except asked and stopped (under mu) and the
// done channel.
type snapshotter struct {
	mu      sync.Mutex
	asked   []chan error // Snapshot calls the writer has not taken yet
	stopped bool         // the writer exited: Snapshot calls are refused

	done     chan snapshotOutcome // from the background encoder, to the writer
	inFlight bool
	waiters  []chan error // answered when the in-flight snapshot is durable
	pending  []chan error // need a snapshot taken after the in-flight one
	entries  int          // commands logged since the last capture
	bytes    int          // WAL payload bytes logged since the last capture
	size     int64        // bytes of the last snapshot written since Open; 0 if none
}

func (sn *snapshotter) init() { sn.done = make(chan snapshotOutcome, 1) }

// snapshotDue reports whether the log written since the last capture warrants
// another snapshot: Options.SnapshotEntries commands or
// Options.SnapshotWALBytes bytes of it, but at least an eighth as many
// commands as the state has records, or bytes half the last snapshot's size.
// Writing a snapshot costs time in proportion to the whole state, so a
// fixed cadence would spend ever more of the machine on snapshots as
// terminal records accumulate; in proportion, the cost per logged command
// stays bounded, and replaying the log at Open stays a fraction of loading
// the snapshot.
func snapshotDue(o *Options, entries, bytes, records int, lastSize int64) bool {
	return entries >= max(o.SnapshotEntries, records/8) ||
		int64(bytes) >= max(int64(o.SnapshotWALBytes), lastSize/2)
}

type snapshotOutcome struct {
	// state is the copy the snapshot was encoded from, which nothing reads
	// once the outcome is sent: the writer releases it (fsm.State.Release),
	// so that its records are changed in place again.
	state   *fsm.State
	info    snapshot.Info
	records int
	size    int64 // bytes of the snapshot file
	took    time.Duration
	err     error
	walErr  error // compacting the WAL failed: the store must fail-stop
	// The log's first index before and after compacting it (equal: nothing
	// was removed).
	walFirstBefore, walFirstAfter uint64
}

func (s *Store) snapshotDir() string { return filepath.Join(s.dir, "snapshots") }

// Snapshot writes a point-in-time snapshot of the whole state and returns
// once it is durable. It includes every write that returned before the call.
// The store also snapshots on its own every Options.SnapshotEntries commands
// or Options.SnapshotWALBytes of log, or less often for a large state (see
// Options.SnapshotEntries). snapshots/ keeps the newest two; the
// WAL front is truncated only up to the older of them, so a corrupt newest
// snapshot falls back to the older one plus the WAL, losing nothing.
func (s *Store) Snapshot(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed.Load() {
		return ErrClosed
	}
	return s.commit.snapshot(ctx)
}

// snapshot hands a Snapshot call to the writer and waits for its answer.
func (c *logCommitter) snapshot(ctx context.Context) error {
	sn := &c.snaps
	done := make(chan error, 1)
	sn.mu.Lock()
	if sn.stopped {
		sn.mu.Unlock()
		return ErrClosed
	}
	sn.asked = append(sn.asked, done)
	sn.mu.Unlock()
	c.s.in.signal()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// poll takes, without waiting, every Snapshot call asked and a finished
// background snapshot. Writer goroutine only.
func (c *logCommitter) poll(*writer) {
	sn := &c.snaps
	sn.mu.Lock()
	sn.pending = append(sn.pending, sn.asked...)
	clear(sn.asked)
	sn.asked = sn.asked[:0]
	sn.mu.Unlock()
	select {
	case out := <-sn.done:
		c.snapshotDone(out)
	default:
	}
}

// afterRound starts a capture when one was asked for or the cadence is
// reached, unless one is in flight. Writer goroutine only.
func (c *logCommitter) afterRound(*writer) {
	s := c.s
	sn := &c.snaps
	if err := s.failed(); err != nil && !sn.inFlight {
		// A failed store takes no snapshot: its state may be ahead of no
		// log, and its log refuses writes. Answer the callers at once.
		for _, w := range sn.pending {
			w <- err
		}
		sn.pending = nil
		return
	}
	// The records a snapshot holds: the archived ones are not in it, and
	// counting them would space snapshots out, and grow the log to replay,
	// with every execution ever archived.
	due := snapshotDue(&s.opts, sn.entries, sn.bytes, s.state.Len()-s.state.Meta().Archived, sn.size)
	if sn.inFlight || (len(sn.pending) == 0 && !due) {
		return
	}
	s.rw.Lock() // Copy touches the trees' bookkeeping; readers must not race it
	st := s.state.Copy()
	s.rw.Unlock()
	hdr := snapshot.Header{Index: c.applied, Clock: st.Meta().Now, Records: uint64(st.Len())}
	sn.inFlight = true
	s.published.started(time.Now())
	sn.waiters, sn.pending = sn.pending, nil
	sn.entries, sn.bytes = 0, 0
	go c.writeSnapshot(st, hdr)
}

// writeSnapshot runs in the background: encode, write durably, prune to two,
// compact the WAL up to the older kept snapshot. It hands the outcome to the
// writer and wakes it.
func (c *logCommitter) writeSnapshot(st *fsm.State, hdr snapshot.Header) {
	s := c.s
	start := time.Now()
	out := snapshotOutcome{state: st, records: st.Len()}
	opts := snapshot.Options{NoSync: s.opts.NoSync, FS: s.opts.FS}
	if s.archive != nil && !mutant.SnapshotBeforeArchiveFlush {
		// The snapshot no longer holds what was archived through its index:
		// the archive must, durably, before the snapshot can replace the log.
		if out.err = s.archive.a.Flush(); out.err != nil {
			out.err = fmt.Errorf("execstore: flush the archive before a snapshot: %w", out.err)
		}
	}
	if out.err == nil {
		out.info, out.err = snapshot.Write(s.snapshotDir(), st, hdr, opts)
	}
	if out.err == nil {
		// Read the new file back, decoding all of it, before anything older
		// is removed.
		if out.err = snapshot.Check(s.opts.FS, out.info.Path, hdr, st); out.err != nil {
			// Recovery would skip it too; removed, it cannot count as one
			// of the two kept. (An unlink lost in a crash leaves it to
			// recovery to skip.)
			s.opts.FS.Remove(out.info.Path)
		}
	}
	if out.err == nil {
		var fi os.FileInfo
		if fi, out.err = s.opts.FS.Stat(out.info.Path); out.err == nil {
			out.size = fi.Size()
		}
	}
	if out.err == nil {
		var kept []snapshot.Info
		kept, out.err = snapshot.Prune(s.snapshotDir(), 2, opts)
		if out.err == nil && len(kept) == 2 {
			out.walFirstBefore = c.wal.FirstIndex()
			out.walFirstAfter, out.walErr = c.wal.CompactTo(kept[1].Index + 1)
		}
		if out.err == nil && s.archive != nil {
			s.archive.forgetKept(s.logger, st.ForgotBefore())
		}
	}
	out.took = time.Since(start)
	c.snaps.done <- out
	s.in.signal()
}

// snapshotDone records a finished snapshot and answers its waiters. Writer
// goroutine only.
func (c *logCommitter) snapshotDone(out snapshotOutcome) {
	s := c.s
	sn := &c.snaps
	sn.inFlight = false
	s.rw.Lock() // as at the capture: the state's bookkeeping, not readers' data
	s.state.Release(out.state)
	s.rw.Unlock()
	s.published.started(time.Time{})
	err := out.err
	switch {
	case out.walErr != nil:
		s.failStop(out.walErr)
		err = s.failed()
	case err != nil:
		s.logger.Error("execstore: snapshot failed; the log keeps everything and a later snapshot will retry", "err", err)
		err = fmt.Errorf("execstore: snapshot: %w", err)
	default:
		sn.size = out.size
		c.snapshotIndex.Store(out.info.Index)
		s.published.snapshot(out.size, time.Now(), out.took)
		s.logger.Info("execstore: snapshot written", "path", out.info.Path, "index", out.info.Index,
			"records", out.records, "bytes", out.size, "took", out.took, "wal_first_index", c.wal.FirstIndex())
		if out.walFirstAfter > out.walFirstBefore {
			s.logger.Info("execstore: log compacted", "first_index_before", out.walFirstBefore,
				"first_index", out.walFirstAfter, "entries_removed", out.walFirstAfter-out.walFirstBefore)
		}
	}
	if s.metrics != nil {
		s.metrics.Snapshot(out.size, out.took, err)
	}
	for _, w := range sn.waiters {
		w <- err
	}
	sn.waiters = nil
}

// finish waits for an in-flight snapshot at Close and refuses the Snapshot
// calls still pending, and every later one. Writer goroutine only.
func (c *logCommitter) finish(*writer) {
	sn := &c.snaps
	if sn.inFlight {
		c.snapshotDone(<-sn.done)
	}
	sn.mu.Lock()
	sn.stopped = true
	sn.pending = append(sn.pending, sn.asked...)
	sn.asked = nil
	sn.mu.Unlock()
	for _, w := range sn.pending {
		w <- ErrClosed
	}
	sn.pending = nil
}

// loadSnapshot returns the newest snapshot that reads back whole and that the
// WAL continues, or an empty state at index 0 when the WAL still starts at
// its first entry. A snapshot that fails is skipped with a loud log line. It
// also returns what recovery would fall back on if the loaded snapshot were
// lost: the next older snapshot the log continues (or the log from its
// start), with the entries between them, which this Open does not read.
func (c *logCommitter) loadSnapshot(walFirst, walLast uint64) (*fsm.State, uint64, fallback, error) {
	s := c.s
	infos, err := snapshot.List(s.opts.FS, s.snapshotDir())
	if err != nil {
		return nil, 0, fallback{}, err
	}
	var unreadable []string
	// setAside renames the unreadable snapshots newer than the one loaded
	// out of the snapshots' names, so that pruning, which keeps the two
	// newest, never keeps one of them as a fallback and deletes a good
	// older one instead. The file stays, for a person to look at.
	setAside := func() {
		for _, p := range unreadable {
			if err := s.opts.FS.Rename(p, p+unreadableSuffix); err != nil {
				s.logger.Error("execstore: could not set an unreadable snapshot aside", "path", p, "err", err)
			}
		}
	}
	for i, info := range infos {
		st, hdr, err := snapshot.Read(s.opts.FS, info.Path)
		if err != nil {
			s.logger.Error("execstore: skipping unreadable snapshot; falling back to an older one", "path", info.Path, "err", err)
			unreadable = append(unreadable, info.Path)
			continue
		}
		if hdr.Index+1 < walFirst {
			s.logger.Error("execstore: skipping snapshot the log no longer continues", "path", info.Path,
				"index", hdr.Index, "wal_first_index", walFirst)
			continue
		}
		if hdr.Index > walLast {
			return nil, 0, fallback{}, fmt.Errorf("execstore: snapshot %s covers up to index %d but the write-ahead log ends at %d: "+
				"logged commands were lost (was the store run with NoSync?)", info.Path, hdr.Index, walLast)
		}
		if fi, err := s.opts.FS.Stat(info.Path); err == nil {
			s.published.snapshot(fi.Size(), fi.ModTime(), 0)
		}
		setAside()
		return st, hdr.Index, fallbackOf(infos[i+1:], hdr.Index, walFirst), nil
	}
	if walFirst > 1 {
		return nil, 0, fallback{}, errors.New("execstore: no valid snapshot covers the write-ahead log, which starts at index " +
			fmt.Sprint(walFirst) + "; refusing to open with the earlier commands missing")
	}
	setAside()
	return fsm.New(), 0, fallback{}, nil
}

// unreadableSuffix is appended to the name of a snapshot that Open could not
// read and fell back past (see loadSnapshot).
const unreadableSuffix = ".unreadable"
