package wal

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/execstore/execstore/internal/mutant"
	"github.com/execstore/execstore/vfs"
)

// droppedSuffix marks a segment file that compaction took out of the log: tidwall and Open
// ignore it as a segment, and Open deletes it. Part of the on-disk format.
const droppedSuffix = ".DROPPED"

// A dropped segment file is cut down by discardStepBytes at a time, with a pause after each
// step, before it is deleted: freeing a whole segment's pages and blocks at once keeps the
// file system busy long enough to hold up the fsyncs of concurrent Writes.
const (
	discardStepBytes = 256 << 10
	discardPause     = time.Millisecond
)

// CompactTo removes whole segment files from the front of the log while keeping every entry
// from keepFrom on: the first index becomes that of the newest segment that starts at or
// before keepFrom. It does nothing when that segment is already the first, so it never
// rewrites a segment to free less than one. It returns the log's first index afterwards.
//
// Writes go on while it runs: it holds the lock Write takes only to read and update the
// in-memory range, never while it touches a file. Segment files leave the log oldest first,
// each by a rename made durable (a directory fsync, unless NoSync) before the next, so that
// a crash leaves the log a contiguous run of segments; then their space is freed a little at
// a time (see "Compaction" in the package documentation). A storage error while taking a
// file out of the log fail-stops the Log.
func (l *Log) CompactTo(keepFrom uint64) (uint64, error) {
	l.front.Lock()
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
		l.front.Unlock()
		return cut, nil
	}
	dropped, err := l.dropSegmentsBefore(cut)
	l.front.Unlock()
	l.discard(dropped)
	if err != nil {
		return l.first.Load(), err
	}
	return cut, nil
}

// dropSegmentsBefore takes every segment file whose first index is below cut, the first
// index of a segment file, out of the log, and returns the paths they were renamed to. The
// caller holds l.front (so the front of the log changes in no other way meanwhile) and not
// l.mu, and discards the returned files.
//
// The first index moves to cut BEFORE any file is touched, so that no reader starts reading
// a file about to go; a Read that began earlier gets ErrOutOfRange. tidwall keeps the removed
// segments in its own list, and never opens them again: its reads find each entry at or
// after the first index in a later segment, and it writes, cycles and closes only the tail,
// which is never removed here. Its own TruncateFront would remove them, so l.stale is set.
func (l *Log) dropSegmentsBefore(cut uint64) (dropped []string, err error) {
	l.mu.Lock()
	if err := l.writable(); err != nil {
		l.mu.Unlock()
		return nil, err
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
		path, err := l.dropSegment(start)
		if path != "" {
			dropped = append(dropped, path)
		}
		if err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// dropSegment takes one segment file out of the log: it renames it to a name tidwall and
// Open do not take for a segment, then makes the rename durable. It returns the new path once
// the rename happened. The caller holds l.front and not l.mu.
func (l *Log) dropSegment(start uint64) (string, error) {
	l.mu.RLock()
	err := l.writable()
	l.mu.RUnlock()
	if err != nil {
		return "", err // a concurrent Write fail-stopped the log
	}
	path := filepath.Join(l.dir, segmentName(start))
	if err := l.opts.FS.Rename(path, path+droppedSuffix); err != nil {
		return "", l.lockAndFail("remove segment", err)
	}
	l.mu.Lock()
	l.segs.drop(start)
	l.mu.Unlock()
	if l.opts.NoSync {
		return path + droppedSuffix, nil
	}
	if err := syncDir(l.opts, l.dir); err != nil {
		return path + droppedSuffix, l.lockAndFail("fsync directory",
			fmt.Errorf("after removing segment %s: %w", segmentName(start), err))
	}
	return path + droppedSuffix, nil
}

// discard frees the space of segment files taken out of the log: it truncates each by
// discardStepBytes at a time, pausing after each step, until what is left is one step or
// less, then deletes it. The files are no
// longer part of the log, so nothing here needs to be durable, and a failure only leaves a
// file for the next Open to delete: it is logged, not returned.
func (l *Log) discard(paths []string) {
	for _, path := range paths {
		if err := shrinkAndRemove(l.opts.FS, path); err != nil {
			l.opts.Logger.Warn("wal: could not delete a segment file compaction removed; the next open deletes it",
				"path", path, "err", err)
		}
	}
}

func shrinkAndRemove(fs vfs.FS, path string) error {
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	for size := fi.Size(); size > discardStepBytes; {
		size -= discardStepBytes
		if err := f.Truncate(size); err != nil {
			f.Close()
			return err
		}
		time.Sleep(discardPause)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return fs.Remove(path)
}

// lockAndFail is fail for a caller that does not hold l.mu.
func (l *Log) lockAndFail(op string, cause error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fail(op, cause)
}
