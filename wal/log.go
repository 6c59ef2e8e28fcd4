package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/execstore/execstore/internal/mutant"
	"github.com/execstore/execstore/internal/prealloc"
	tidwall "github.com/execstore/execstore/internal/tidwall/wal"
	"github.com/execstore/execstore/vfs"
)

// Log is a write-ahead log of framed command entries. Writes are serialized by the Log; reads
// may run concurrently with them and see only entries whose Write has returned successfully.
type Log struct {
	dir  string
	opts Options
	// tw is replaced only by the methods that reopen tidwall (TruncateBack, Reset, and
	// TruncateFront after a compaction), which hold mu and twMu. Readers take twMu shared
	// around their use of tw; every other user holds mu.
	tw   *tidwall.Log
	twMu sync.RWMutex

	// first and last are the durable range readers may see; they move only after the fsync.
	first  atomic.Uint64
	last   atomic.Uint64
	closed atomic.Bool
	// lastSync is the latest Write's time in syncWrite, in nanoseconds (LastSync).
	lastSync atomic.Int64

	// front serializes the methods that remove segments from the front of the log
	// (CompactTo, TruncateFront) with each other and with Close. It is taken before mu, and
	// is held during their file I/O, which mu never is while CompactTo removes files.
	front sync.Mutex

	mu     sync.RWMutex // held for writing by every method that changes the log
	segs   segmentMirror
	failed error         // non-nil once fail-stopped; wraps ErrFailed and the cause
	tb     tidwall.Batch // reused so that Write does not allocate
	frame  []byte        // reused frame buffer
	repair *TornTailError

	// stale is set once this package removed segment files that tidwall still lists. tidwall
	// never touches them again for reads, writes, cycling or Close, but its own TruncateFront
	// would try to remove them: TruncateFront reopens tidwall first when stale is set.
	stale bool

	// pre prepares the next segment's file; nil with NoSync. tailPrepared is set when the
	// tail segment's file was prepared, and still holds padding when the log was opened: a
	// tail written by appending is left for a prepared file as soon as one is ready.
	pre          *prealloc.Preparer
	tailPrepared bool
}

// Open opens the log in dir, creating it if needed. It finishes an interrupted truncation,
// refuses segments that do not hold one contiguous run of entries, cuts a torn tail from the
// last segment (saving the bytes in a side file) and refuses a last segment holding damaged
// durable entries with a *CorruptionError. Unless the log was closed cleanly, it then rewrites
// the last segment into a new file and fsyncs it, so that every entry it replays is on disk
// (see "Reopening after an unclean stop" in the package documentation). The frames of other
// segments are checked as they are read: replay the whole log to check them all.
func Open(dir string, opts Options) (*Log, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := opts.FS.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("wal: open: %w", err)
	}
	if !opts.NoSync {
		// The log directory's own entry, in case MkdirAll just made it.
		if err := syncDir(opts, filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("wal: open: %w", err)
		}
	}
	if err := resolvePending(dir, opts); err != nil {
		return nil, fmt.Errorf("wal: open: %w", err)
	}
	repair, err := prepareSegments(dir, opts)
	if err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: opts, repair: repair}
	if !opts.NoSync {
		inline := !prepareInBackground(opts.FS)
		l.pre = prealloc.New(opts.FS, dir, opts.SegmentSize+prealloc.Slack(opts.SegmentSize), inline, opts.Logger)
	}
	tw, err := tidwall.Open(dir, tidwallOptions(opts, l.newSegment()))
	if err != nil {
		l.pre.Close()
		return nil, fmt.Errorf("wal: open: %w", err)
	}
	l.tw = tw
	if err := l.load(); err != nil {
		l.pre.Close()
		tw.Close()
		return nil, err
	}
	l.prepareNext()
	return l, nil
}

// newSegment is what tidwall creates new segment files with: the preparer's Take, or nil
// (tidwall's own empty file) with NoSync. tidwall calls it inside a Write (l.mu held), or
// inside Open.
func (l *Log) newSegment() func(path string) (vfs.File, error) {
	if l.pre == nil {
		return nil
	}
	return func(path string) (vfs.File, error) {
		f, prepared, err := l.pre.Take(path)
		l.tailPrepared = prepared
		return f, err
	}
}

// prepareInBackground reports whether the next segment's file is prepared on a goroutine of
// the log's, or inline, in the goroutine of the Write that asks for it: in the background only
// on the operating system's filesystem (see "Preallocated segments" in the package
// documentation). Every other operation of the log happens inside a call the caller makes,
// in an order those calls fix; a background preparation happens when the scheduler lets it.
// On another filesystem (one in memory, or one that wraps the operating system's to observe
// it or to inject faults, as the crash simulator's does) the log prepares inline, so that
// the filesystem sees one sequence of operations for one sequence of calls, and what the
// directory holds after each Write does not depend on timing.
func prepareInBackground(fs vfs.FS) bool { return fs == vfs.Default }

// prepareAfter is how many bytes the tail segment holds when the next segment's file is asked
// for: 1 MiB, or a quarter of a smaller SegmentSize. A log that never writes that much never
// prepares a file.
func (l *Log) prepareAfter() int { return min(l.opts.SegmentSize/4, 1<<20) }

// prepareNext asks for the next segment's file once the tail segment holds prepareAfter
// bytes. The caller holds l.mu, or is Open.
func (l *Log) prepareNext() {
	if l.pre != nil && l.segs.tailBytes >= l.prepareAfter() {
		l.pre.Request()
	}
}

// switchNow reports whether the next Write starts a new segment on a prepared file before its
// entries: the tail was written by appending (a new log's first segment, one started while a
// preparation failed, one a repair or truncation cut, one an earlier version wrote), holds
// twice prepareAfter bytes (so a preparation was asked for), and a prepared file is ready,
// once one under way has ended: where segments start depends on what was written, not on
// timing. The caller holds l.mu.
func (l *Log) switchNow() bool {
	return l.pre != nil && !l.tailPrepared && l.segs.tailBytes >= 2*l.prepareAfter() && l.pre.Await()
}

// loadSegments reads the segment mirror from the directory and tidwall, and whether the tail
// segment's file still holds padding. The caller holds l.mu, or is Open.
func (l *Log) loadSegments() error {
	if err := l.segs.load(l.opts.FS, l.dir, l.tw); err != nil {
		return err
	}
	fi, err := l.opts.FS.Stat(l.tailPath())
	if err != nil {
		return err
	}
	l.tailPrepared = fi.Size() > int64(l.segs.tailBytes)
	return nil
}

// prepareSegments readies the segment files for tidwall: it takes the clean-close marker,
// checks that the segments are contiguous, repairs a torn tail and, after an unclean stop,
// rewrites the last segment so that what tidwall loads is durable.
func prepareSegments(dir string, opts Options) (*TornTailError, error) {
	clean, err := takeCleanMarker(opts.FS, dir)
	if err != nil {
		return nil, fmt.Errorf("wal: open: %w", err)
	}
	starts, err := listSegments(opts.FS, dir)
	if err != nil {
		return nil, fmt.Errorf("wal: open: %w", err)
	}
	if len(starts) == 0 {
		return nil, nil
	}
	if err := checkContiguous(opts.FS, dir, starts); err != nil {
		return nil, err
	}
	last := starts[len(starts)-1]
	vouched := clean.vouchesFor(opts.FS, dir, last)
	repair, err := repairTail(dir, last, opts)
	if err != nil {
		return nil, err
	}
	if !vouched && !opts.NoSync {
		if err := rewriteTail(dir, last, opts); err != nil {
			return nil, fmt.Errorf("wal: open: rewrite the last segment after an unclean stop: %w", err)
		}
	}
	return repair, nil
}

// load reads the index range and the segment mirror after tidwall opened, then fsyncs the
// directory. Every open does: besides a new log's first segment, which tidwall just created,
// the directory may hold a segment created by a write whose fsync then failed (the store
// fail-stopped and was reopened); new entries appended to it would be acknowledged while its
// name could still vanish in a crash.
func (l *Log) load() error {
	first, err := l.tw.FirstIndex()
	if err != nil {
		return fmt.Errorf("wal: open: %w", err)
	}
	last, err := l.tw.LastIndex()
	if err != nil {
		return fmt.Errorf("wal: open: %w", err)
	}
	l.first.Store(first)
	l.last.Store(last)
	l.segs.limit = l.opts.SegmentSize
	if err := l.loadSegments(); err != nil {
		return fmt.Errorf("wal: open: %w", err)
	}
	if !l.opts.NoSync {
		if err := syncDir(l.opts, l.dir); err != nil {
			return fmt.Errorf("wal: open: %w", err)
		}
	}
	return nil
}

// TailRepair returns the torn tail Open cut, as a *TornTailError, or nil if the last segment
// was clean.
func (l *Log) TailRepair() error {
	if l.repair == nil {
		return nil
	}
	return l.repair
}

// FirstIndex is the index of the first entry. For an empty log FirstIndex() == LastIndex()+1.
func (l *Log) FirstIndex() uint64 { return l.first.Load() }

// LastSync returns how long the latest successful Write spent making its
// batch durable (the segment's fsync, and the directory's when it created a
// segment): for metrics. Zero with NoSync.
func (l *Log) LastSync() time.Duration { return time.Duration(l.lastSync.Load()) }

// LastIndex is the index of the last durable entry; 0 for a log that never held one.
func (l *Log) LastIndex() uint64 { return l.last.Load() }

// Write appends the batch's payloads as consecutive entries (one tidwall WriteBatch), then
// fsyncs the segment file (unless NoSync), then fsyncs the directory if tidwall created a
// segment file during the write. Only then does it return the index of the first entry. For
// an empty batch it writes nothing and returns LastIndex()+1. A batch holding an Add error is
// refused without writing. Any storage error fail-stops the Log.
func (l *Log) Write(b *Batch) (first uint64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return 0, err
	}
	if b.err != nil {
		return 0, b.err
	}
	first = l.last.Load() + 1
	if b.Len() == 0 {
		return first, nil
	}
	switchNow := l.switchNow()
	created := l.stage(b, first, switchNow)
	if switchNow {
		if err := l.tw.Cycle(); err != nil {
			return 0, l.fail("start a segment on its prepared file", err)
		}
	}
	if err := l.tw.WriteBatch(&l.tb); err != nil {
		return 0, l.fail("write segment", err)
	}
	syncStart := time.Now()
	if err := l.syncWrite(created > 0); err != nil {
		return 0, err
	}
	l.lastSync.Store(int64(time.Since(syncStart)))
	l.last.Store(first + uint64(b.Len()) - 1)
	l.shrinkBuffers(b)
	l.prepareNext()
	return first, nil
}

// reusedBufferMax bounds what the reused buffers keep between writes, so that one large batch
// does not pin its memory for the life of the log.
const reusedBufferMax = 4 << 20

func (l *Log) shrinkBuffers(b *Batch) {
	if cap(l.frame) > reusedBufferMax {
		l.frame = nil
	}
	// tidwall's batch keeps the capacity of the largest batch it held.
	if len(b.data)+b.Len()*frameHeaderSize > reusedBufferMax {
		l.tb = tidwall.Batch{}
	}
}

// stage encodes the batch into the reusable tidwall batch and advances the segment mirror,
// first starting a new segment when switchNow is set. It returns how many segment files
// tidwall will create while writing it, the switch included.
func (l *Log) stage(b *Batch, first uint64, switchNow bool) (created int) {
	l.tb.Clear()
	if switchNow {
		l.segs.cycle(first)
		created++
	}
	created += l.segs.beginBatch(first)
	n := uint32(b.Len())
	for i := range b.Len() {
		index := first + uint64(i)
		l.frame = appendFrame(l.frame[:0], frameHeader{index: index, batchPos: uint32(i), batchLen: n}, b.payload(i))
		l.tb.Write(index, l.frame)
		created += l.segs.addEntry(index, len(l.frame))
	}
	return created
}

// syncWrite makes a written batch durable: the tail segment, then the directory when a segment
// file was created (tidwall fsyncs the segment it closes, never the directory).
func (l *Log) syncWrite(created bool) error {
	if l.opts.NoSync || mutant.SkipFsync {
		return nil
	}
	if err := l.tw.Sync(); err != nil {
		return l.fail("fsync segment", err)
	}
	if created {
		if err := syncDir(l.opts, l.dir); err != nil {
			return l.fail("fsync directory", err)
		}
	}
	return nil
}

// writable is nil when the log accepts changes.
func (l *Log) writable() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return l.failed
}

// fail enters the fail-stop state; the caller holds l.mu. After a failed write or fsync the
// page cache may hold bytes the disk does not (or the reverse), so the only safe continuation
// is to reopen and let Open read what is really there. Write and CompactTo may fail
// concurrently: the first cause is kept, both are logged.
func (l *Log) fail(op string, cause error) error {
	l.opts.Logger.Error("wal: fail-stop", "op", op, "err", cause)
	if l.failed == nil {
		l.failed = fmt.Errorf("%w: %s: %w", ErrFailed, op, cause)
	}
	return l.failed
}

// Read returns the payload of entry index after verifying its frame. A damaged entry gives a
// *CorruptionError.
func (l *Log) Read(index uint64) ([]byte, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if first, last := l.first.Load(), l.last.Load(); index < first || index > last {
		return nil, fmt.Errorf("%w: read %d, log holds [%d, %d]", ErrOutOfRange, index, first, last)
	}
	data, err := l.readEntry(index)
	if err != nil {
		return nil, err
	}
	h, payload, reason := decodeFrame(data)
	if reason == "" && h.index != index {
		reason = fmt.Sprintf("frame holds index %d", h.index)
	}
	if reason != "" {
		return nil, l.corruption(index, reason)
	}
	return payload, nil
}

// readEntry reads the data of one tidwall entry and classifies tidwall's errors.
func (l *Log) readEntry(index uint64) (data []byte, err error) {
	defer func() {
		// tidwall indexes its entry table without a bounds check, so a segment holding fewer
		// entries than the next segment's name implies panics inside Read.
		if r := recover(); r != nil {
			err = l.corruption(index, fmt.Sprintf("segment holds fewer entries than expected (%v)", r))
		}
	}()
	data, err = l.readTidwall(index)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, tidwall.ErrCorrupt):
		return nil, l.unparsable(index)
	case errors.Is(err, tidwall.ErrClosed):
		return nil, ErrClosed
	case errors.Is(err, tidwall.ErrNotFound),
		errors.Is(err, os.ErrNotExist) && index < l.first.Load():
		return nil, fmt.Errorf("%w: read %d: truncated concurrently", ErrOutOfRange, index)
	}
	return nil, fmt.Errorf("wal: read %d: %w", index, err)
}

// readTidwall reads one tidwall entry under twMu, so that a reopen never swaps tw under it.
func (l *Log) readTidwall(index uint64) ([]byte, error) {
	l.twMu.RLock()
	defer l.twMu.RUnlock()
	return l.tw.Read(index)
}

// Replay calls fn for every entry from `from` to LastIndex (as of the call) in order, verifying
// each frame. fn owns the payload. An error from fn stops the replay and is returned as is.
// from may be LastIndex()+1, which visits nothing.
func (l *Log) Replay(from uint64, fn func(index uint64, payload []byte) error) error {
	first, last := l.first.Load(), l.last.Load()
	if from < first || from > last+1 {
		return fmt.Errorf("%w: replay from %d, log holds [%d, %d]", ErrOutOfRange, from, first, last)
	}
	for index := from; index <= last; index++ {
		payload, err := l.Read(index)
		if err != nil {
			return err
		}
		if err := fn(index, payload); err != nil {
			return err
		}
	}
	return nil
}

// TruncateFront removes every entry before index, so that entry index becomes the first.
// index may be LastIndex()+1, which empties the log; the next Write continues the numbering.
// When index is the first index of a segment file, it removes the older segment files as
// CompactTo does, without holding up writes. Otherwise it uses tidwall's truncation, which
// copies the rest of the segment holding index into a new file while writes wait, then fsyncs
// the directory (unless NoSync) because tidwall removes and renames files without doing so.
// A storage error fail-stops the Log.
func (l *Log) TruncateFront(index uint64) error {
	l.front.Lock()
	defer l.front.Unlock()
	l.mu.Lock()
	if err := l.writable(); err != nil {
		l.mu.Unlock()
		return err
	}
	first, last := l.first.Load(), l.last.Load()
	if index < first || index > last+1 {
		l.mu.Unlock()
		return fmt.Errorf("%w: truncate front to %d, log holds [%d, %d]", ErrOutOfRange, index, first, last)
	}
	if index == first {
		l.mu.Unlock()
		return nil
	}
	if _, boundary := slices.BinarySearch(l.segs.starts, index); boundary {
		l.mu.Unlock()
		dropped, err := l.dropSegmentsBefore(index)
		l.discard(dropped)
		return err
	}
	defer l.mu.Unlock()
	return l.truncateInsideSegment(index)
}

// truncateInsideSegment is tidwall's front truncation. The caller holds l.front and l.mu.
func (l *Log) truncateInsideSegment(index uint64) error {
	if l.stale {
		if err := l.reopenTidwall(); err != nil {
			return l.fail("truncate front: reopen", err)
		}
	}
	if err := l.tw.TruncateFront(index); err != nil {
		return l.fail("truncate front", err)
	}
	l.first.Store(index)
	if !l.opts.NoSync {
		if err := syncDir(l.opts, l.dir); err != nil {
			return l.fail("fsync directory", err)
		}
	}
	if err := l.loadSegments(); err != nil {
		return l.fail("list segments", err)
	}
	return nil
}

// reopenTidwall closes tidwall and opens it again, so that its list of segments matches the
// directory after this package removed some. The caller holds l.front and l.mu.
func (l *Log) reopenTidwall() error {
	l.twMu.Lock()
	defer l.twMu.Unlock()
	if err := l.tw.Close(); err != nil {
		return err
	}
	tw, err := tidwall.Open(l.dir, tidwallOptions(l.opts, l.newSegment()))
	if err != nil {
		return err // l.tw stays closed: the log fail-stops, and Close reports it
	}
	l.tw, l.stale = tw, false
	return nil
}

// Sync fsyncs the tail segment and the directory, even with NoSync: it is how a NoSync user
// makes everything written so far durable. A storage error fail-stops the Log.
func (l *Log) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if err := l.tw.Sync(); err != nil {
		return l.fail("fsync segment", err)
	}
	if err := syncDir(l.opts, l.dir); err != nil {
		return l.fail("fsync directory", err)
	}
	return nil
}

// tailPath is the path of the tail segment, the file tidwall's Sync fsyncs. The caller holds
// l.mu.
func (l *Log) tailPath() string {
	return filepath.Join(l.dir, segmentName(l.segs.starts[len(l.segs.starts)-1]))
}

// Close closes the log. tidwall fsyncs the tail segment while closing, even with NoSync. If
// the log never fail-stopped and that fsync succeeded, Close leaves a clean-close marker so
// that the next Open can trust the tail segment without rewriting it. A fail-stopped log
// closes too; reopen it to continue. Close waits for a CompactTo in progress.
func (l *Log) Close() error {
	l.front.Lock()
	defer l.front.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	l.closed.Store(true)
	l.pre.Close()
	if err := l.tw.Close(); err != nil {
		return fmt.Errorf("wal: close: %w", err)
	}
	if l.failed == nil {
		writeCleanMarker(l.opts.FS, l.dir, l.segs.starts[len(l.segs.starts)-1], l.opts.Logger)
	}
	return nil
}

// corruption builds the error for entry index whose frame is invalid, locating it in its
// segment file.
func (l *Log) corruption(index uint64, reason string) error {
	name, start := l.segmentOf(index)
	w := walkSegment(l.opts.FS, l.dir, name, index-start)
	if w.target < 0 {
		reason += fmt.Sprintf("; the segment file holds only %d entries", w.entries)
	}
	return &CorruptionError{Segment: name, Index: index, Offset: w.target, Reason: reason}
}

// unparsable builds the error for a segment tidwall could not parse while reading index. The
// damaged entry is the first unparsable one, which may lie after index.
func (l *Log) unparsable(index uint64) error {
	name, start := l.segmentOf(index)
	w := walkSegment(l.opts.FS, l.dir, name, index-start)
	if w.failOffset < 0 {
		return &CorruptionError{Segment: name, Index: index, Offset: w.target, Reason: "segment file does not parse"}
	}
	return &CorruptionError{Segment: name, Index: start + w.entries, Offset: w.failOffset,
		Reason: "segment file does not parse: " + w.failReason}
}

// segmentOf names the segment file holding index and returns its first index.
func (l *Log) segmentOf(index uint64) (name string, start uint64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	name = l.segs.segmentOf(index)
	start, _ = parseSegmentName(name)
	return name, start
}
