package wal

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/execstore/execstore/internal/mutant"
)

// CompactTo removes whole segment files from the front of the log while keeping every entry
// from keepFrom on: the first index becomes that of the newest segment that starts at or
// before keepFrom. It does nothing when that segment is already the first, so it never
// rewrites a segment to free less than one. It returns the log's first index afterwards.
//
// Writes go on while it runs: it holds the lock Write takes only to read and update the
// in-memory range, never while it removes a file or fsyncs the directory. Segment files are
// removed oldest first, and each removal is made durable (a directory fsync, unless NoSync)
// before the next, so that a crash leaves the log a contiguous run of segments (see
// "Compaction" in the package documentation). A storage error fail-stops the Log.
func (l *Log) CompactTo(keepFrom uint64) (uint64, error) {
	l.front.Lock()
	defer l.front.Unlock()
	l.mu.RLock()
	first := l.first.Load()
	cut := first
	for _, start := range l.segs.starts {
		if start <= keepFrom && start > cut {
			cut = start
		}
	}
	if mutant.CompactPastKeep {
		for _, start := range l.segs.starts {
			if start > cut {
				cut = start
				break
			}
		}
	}
	l.mu.RUnlock()
	if cut == first {
		return cut, nil
	}
	if err := l.dropSegmentsBefore(cut); err != nil {
		return l.first.Load(), err
	}
	return cut, nil
}

// dropSegmentsBefore removes every segment file whose first index is below cut, the first
// index of a segment file. The caller holds l.front (so the front of the log changes in no
// other way meanwhile) and not l.mu.
//
// The first index moves to cut BEFORE any file is removed, so that no reader starts reading a
// file being removed; a Read that began earlier gets ErrOutOfRange. tidwall keeps the removed
// segments in its own list, and never opens them again: its reads find each entry at or
// after the first index in a later segment, and it writes, cycles and closes only the tail,
// which is never removed here. Its own TruncateFront would remove them, so l.stale is set.
func (l *Log) dropSegmentsBefore(cut uint64) error {
	l.mu.Lock()
	if err := l.writable(); err != nil {
		l.mu.Unlock()
		return err
	}
	var doomed []uint64
	for _, start := range l.segs.starts {
		if start < cut {
			doomed = append(doomed, start)
		}
	}
	assert(len(doomed) < len(l.segs.starts), "wal: dropSegmentsBefore would remove the tail segment")
	l.first.Store(max(l.first.Load(), cut))
	l.stale = true
	l.mu.Unlock()

	if mutant.CompactNewestFirst {
		for i, j := 0, len(doomed)-1; i < j; i, j = i+1, j-1 {
			doomed[i], doomed[j] = doomed[j], doomed[i]
		}
	}
	for _, start := range doomed {
		if err := l.dropSegment(start); err != nil {
			return err
		}
	}
	return nil
}

// dropSegment removes one segment file and makes the removal durable. The caller holds
// l.front and not l.mu.
func (l *Log) dropSegment(start uint64) error {
	l.mu.RLock()
	err := l.writable()
	l.mu.RUnlock()
	if err != nil {
		return err // a concurrent Write fail-stopped the log
	}
	if err := l.opts.Faults.beforeWrite(); err != nil {
		return l.lockAndFail("remove segment", err)
	}
	if err := os.Remove(filepath.Join(l.dir, segmentName(start))); err != nil {
		return l.lockAndFail("remove segment", err)
	}
	l.mu.Lock()
	l.segs.drop(start)
	l.mu.Unlock()
	if l.opts.NoSync {
		return nil
	}
	if err := syncDir(l.dir, l.opts.Faults); err != nil {
		return l.lockAndFail("fsync directory", fmt.Errorf("after removing segment %s: %w", segmentName(start), err))
	}
	return nil
}

// lockAndFail is fail for a caller that does not hold l.mu.
func (l *Log) lockAndFail(op string, cause error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fail(op, cause)
}
