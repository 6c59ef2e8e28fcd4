package wal

import (
	"fmt"
	"path/filepath"
	"slices"

	tidwall "github.com/execstore/execstore/internal/tidwall/wal"
	"github.com/execstore/execstore/vfs"
)

// MaxResetIndex is the largest index Reset accepts, so that no index the log then assigns can
// overflow.
const MaxResetIndex = 1 << 62

// TruncateBack removes every entry after index, so that entry index becomes the last. index
// may be FirstIndex()-1, which empties the log; the next Write then appends FirstIndex(). A
// replicated log needs it: a follower drops the entries a new leader's log does not have.
//
// It is durable when it returns, and a crash at any instant leaves the log holding the
// entries from FirstIndex to some k in [index, LastIndex()], each unchanged: segment files
// that start after index leave the log NEWEST first, each by a rename made durable (a
// directory fsync, unless NoSync) before the next; then the segment holding index is
// truncated after it and fsynced (see "Truncating the back" in the package documentation).
// Writes, compactions and reads wait until it returns. A segment whose entries do not parse
// gives a *CorruptionError and changes nothing; a storage error fail-stops the Log.
func (l *Log) TruncateBack(index uint64) error {
	dropped, err := l.truncateBack(index)
	l.discard(dropped)
	return err
}

func (l *Log) truncateBack(index uint64) ([]string, error) {
	l.front.Lock()
	defer l.front.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return nil, err
	}
	first, last := l.first.Load(), l.last.Load()
	if index+1 < first || index > last {
		return nil, fmt.Errorf("%w: truncate back to %d, log holds [%d, %d]", ErrOutOfRange, index, first, last)
	}
	if index == last {
		return nil, nil
	}
	// Every segment starting after index leaves, except the first: an emptied log keeps its
	// first segment, emptied, whose name says where the numbering continues.
	starts := l.segs.starts
	keep := max(1, sortedCount(starts, index))
	tail := starts[keep-1]
	assert(index+1 >= tail, "wal: truncate back: the first segment starts after the first index")
	path := filepath.Join(l.dir, segmentName(tail))
	k := keepEntries(l.opts.FS, path, index+1-tail)
	if k.err != nil {
		return nil, fmt.Errorf("wal: truncate back: %w", k.err)
	}
	if k.reason != "" {
		return nil, &CorruptionError{Segment: segmentName(tail), Index: tail + k.parsed, Offset: k.cut,
			Reason: "truncate back: " + k.reason}
	}
	cut, size := k.cut, k.size
	drop := slices.Clone(starts[keep:])
	slices.Reverse(drop)
	l.last.Store(index) // readers stop at index at once
	return l.reshape("truncate back", first, index, func() ([]string, error) {
		dropped, err := l.takeOutSegments(drop)
		if err != nil || cut == size {
			return dropped, err
		}
		return dropped, l.truncateSegment(path, cut)
	})
}

// Reset removes every entry and restarts the numbering: the log is empty, and the next
// Write appends entry next (1 to MaxResetIndex), wherever the log ended. A replicated log
// needs it: after installing a snapshot it continues at the snapshot's index + 1, which may
// lie before, inside or after what it held.
//
// It is durable when it returns, and a crash at any instant leaves either the entries from
// some segment start to LastIndex(), each unchanged, or an empty log, numbered from the old
// tail segment's start or from next: segment files leave the log OLDEST first, each by a
// rename made durable before the next; then the tail segment is truncated to nothing and
// fsynced, and renamed after next, with a directory fsync. Writes, compactions and reads
// wait until it returns. A storage error fail-stops the Log.
func (l *Log) Reset(next uint64) error {
	dropped, err := l.reset(next)
	l.discard(dropped)
	return err
}

func (l *Log) reset(next uint64) ([]string, error) {
	l.front.Lock()
	defer l.front.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return nil, err
	}
	if next == 0 || next > MaxResetIndex {
		return nil, fmt.Errorf("%w: reset to %d, want 1 to %d", ErrOutOfRange, next, uint64(MaxResetIndex))
	}
	if l.first.Load() == next && l.last.Load() == next-1 {
		return nil, nil
	}
	starts := slices.Clone(l.segs.starts)
	tail := starts[len(starts)-1]
	// Readers stop at once. A reader that passed the range check before finds nothing after
	// the reopen (or, once a Write follows, the entry now at its index).
	l.first.Store(next)
	l.last.Store(next - 1)
	return l.reshape("reset", next, next-1, func() ([]string, error) {
		dropped, err := l.takeOutSegments(starts[:len(starts)-1])
		if err != nil {
			return dropped, err
		}
		path := filepath.Join(l.dir, segmentName(tail))
		if fi, err := l.opts.FS.Stat(path); err != nil {
			return dropped, err
		} else if fi.Size() > 0 {
			if err := l.truncateSegment(path, 0); err != nil {
				return dropped, err
			}
		}
		if tail == next {
			return dropped, nil
		}
		if err := l.opts.FS.Rename(path, filepath.Join(l.dir, segmentName(next))); err != nil {
			return dropped, err
		}
		if l.opts.NoSync {
			return dropped, nil
		}
		return dropped, syncDir(l.opts, l.dir)
	})
}

// reshape runs fn, which changes the segment files, with tidwall closed (it keeps the tail
// segment open and its entries in memory), then opens tidwall again and checks that it holds
// [first, last]. It returns the files fn took out of the log, to discard. A failure
// fail-stops the Log; tidwall is reopened on what fn left if it can be, so that reads of
// the entries kept go on until the Log is closed. The caller holds l.front and l.mu.
func (l *Log) reshape(op string, first, last uint64, fn func() ([]string, error)) ([]string, error) {
	l.twMu.Lock()
	defer l.twMu.Unlock()
	if err := l.tw.Close(); err != nil {
		return nil, l.fail(op+": close", err)
	}
	dropped, err := fn()
	tw, openErr := tidwall.Open(l.dir, tidwallOptions(l.opts, l.newSegment()))
	if openErr == nil {
		l.tw, l.stale = tw, false
	}
	switch {
	case err != nil:
		return dropped, l.fail(op, err)
	case openErr != nil:
		return dropped, l.fail(op+": reopen", openErr) // l.tw stays closed; Close reports it
	}
	if err := l.loadSegments(); err != nil {
		return dropped, l.fail(op+": list segments", err)
	}
	gotFirst, _ := tw.FirstIndex()
	gotLast, _ := tw.LastIndex()
	if gotFirst != first || gotLast != last {
		return dropped, l.fail(op, fmt.Errorf("the log holds [%d, %d] afterwards, want [%d, %d]", gotFirst, gotLast, first, last))
	}
	return dropped, nil
}

// takeOutSegments renames the segment files starting at starts out of the log, in the order
// given, each rename made durable (unless NoSync) before the next. It returns the paths they
// were renamed to. The caller holds l.mu and has closed tidwall.
func (l *Log) takeOutSegments(starts []uint64) (dropped []string, err error) {
	for _, start := range starts {
		path := filepath.Join(l.dir, segmentName(start))
		if err := l.opts.FS.Rename(path, path+droppedSuffix); err != nil {
			return dropped, err
		}
		dropped = append(dropped, path+droppedSuffix)
		if l.opts.NoSync {
			continue
		}
		if err := syncDir(l.opts, l.dir); err != nil {
			return dropped, fmt.Errorf("after removing segment %s: %w", segmentName(start), err)
		}
	}
	return dropped, nil
}

// truncateSegment cuts a segment file to size bytes and fsyncs it (unless NoSync). The
// caller holds l.mu and has closed tidwall.
func (l *Log) truncateSegment(path string, size int64) error {
	f, err := l.opts.FS.OpenReadWrite(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	if !l.opts.NoSync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return f.Close()
}

// entriesKept says where a segment file must be cut to keep its first entries.
type entriesKept struct {
	cut    int64  // offset of the first entry not kept; the file's size when it holds exactly those
	size   int64  // the file's size
	parsed uint64 // entries parsed before a failure
	reason string // why the file cannot keep them: it holds fewer, or they do not parse; "" if it can
	err    error  // reading the file failed
}

// keepEntries finds where the segment file at path must be cut to keep its first k entries.
func keepEntries(fs vfs.FS, path string, k uint64) entriesKept {
	data, err := vfs.ReadFile(fs, path)
	if err != nil {
		return entriesKept{err: err}
	}
	out := entriesKept{size: int64(len(data))}
	for ; out.parsed < k; out.parsed++ {
		if out.cut == out.size || isPadding(data[out.cut:]) {
			out.reason = fmt.Sprintf("the segment holds %d entries, want at least %d", out.parsed, k)
			return out
		}
		_, n, reason := nextEntry(data[out.cut:])
		if reason != "" {
			out.reason = reason
			return out
		}
		out.cut += int64(n)
	}
	return out
}

// sortedCount is the number of values in the ascending slice s that are at most v.
func sortedCount(s []uint64, v uint64) int {
	i, found := slices.BinarySearch(s, v)
	if found {
		i++
	}
	return i
}
