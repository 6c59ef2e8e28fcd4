// Package prealloc prepares the file of a tidwall/wal log's next segment ahead of time: zero
// bytes, written and fsynced before the log needs the segment, renamed to the segment's name
// when it starts, and written over from the start.
//
// An fsync after an append must commit the file's new size and its newly allocated blocks
// through the file system's journal; an fsync after overwriting blocks that are already
// allocated, written and durable only writes the data, which takes about half as long. The
// write-ahead log (package wal, which documents the whole scheme under "Preallocated
// segments") and the benchmark harness's raw-log floor both use it, so that the floor writes
// the way the log does.
//
// A Preparer prepares one file at a time, on its own goroutine or, inline, in the caller's
// (so that a test sees every step in one order). Its I/O holds none of the log's data: a
// failure only costs the speed-up. It is logged and not retried until the next segment starts.
package prealloc

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/execstore/execstore/vfs"
)

// Name is the file the next segment is prepared in, in the log's directory. It ends in .TEMP,
// so the log's Open removes one that a crash or a Close left (as earlier versions of the log
// do, which remove every .TEMP file): a prepared file holds nothing the log needs.
const Name = "next-segment.PREALLOC.TEMP"

// chunk is how many zero bytes a preparation writes at a time; it checks for Close between
// chunks.
const chunk = 1 << 20

// Slack is what a prepared file holds beyond segmentSize, for the entry that crosses it
// (tidwall starts the next segment after the entry that reaches the segment size): 64 KiB,
// or a quarter of a small segment. A longer entry extends the file as an append does.
func Slack(segmentSize int) int { return min(64<<10, segmentSize/4) }

// Counts are what a Preparer did, for tests and reports.
type Counts struct {
	Prepared int // prepared files written and fsynced
	Taken    int // segments started on a prepared file
	Appended int // segments started on an empty file because none was ready
	Failed   int // preparations that failed (logged)
}

// Preparer prepares the next segment's file for the log in one directory.
type Preparer struct {
	fs     vfs.FS
	path   string // the prepared file
	size   int    // its size
	logger *slog.Logger
	inline bool
	wake   chan struct{} // capacity 1; the goroutine prepares when it receives
	done   chan struct{} // closed when the goroutine has returned

	mu      sync.Mutex
	idle    sync.Cond // on mu: broadcast when a preparation ends
	ready   vfs.File  // the prepared file at path, fsynced; nil if none
	busy    bool      // a preparation has been asked for and has not ended
	skip    bool      // the last preparation failed: none until the next segment starts
	closed  bool      // Close or Settle was called: no more requests; wake is closed
	stopped bool      // a preparation under way stops at its next chunk
	counts  Counts
}

// New returns a Preparer of files of size bytes in dir, on fs. Inline, each Request prepares
// the file before it returns; otherwise a goroutine of the Preparer's does, until Close. A nil
// logger discards.
func New(fs vfs.FS, dir string, size int, inline bool, logger *slog.Logger) *Preparer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Preparer{
		fs:     fs,
		path:   filepath.Join(dir, Name),
		size:   size,
		logger: logger,
		inline: inline,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	p.idle.L = &p.mu
	if inline {
		close(p.done)
	} else {
		go p.run()
	}
	return p
}

// Request asks for the next segment's file to be prepared, unless one is ready or under way,
// or the last attempt failed since a segment started. Inline, it prepares it before returning.
func (p *Preparer) Request() {
	p.mu.Lock()
	if p.ready != nil || p.busy || p.skip || p.closed {
		p.mu.Unlock()
		return
	}
	p.busy = true
	if !p.inline {
		p.wake <- struct{}{} // never blocks: busy was false, so the goroutine holds no wake-up
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.prepareAndRecord()
}

func (p *Preparer) run() {
	defer close(p.done)
	for range p.wake {
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		p.prepareAndRecord()
	}
}

// prepareAndRecord prepares the file and records the outcome.
func (p *Preparer) prepareAndRecord() {
	f, err := p.prepare()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busy = false
	p.idle.Broadcast()
	switch {
	case err == nil && p.stopped:
		p.discard(f)
	case err == nil:
		p.ready = f
		p.counts.Prepared++
	case errors.Is(err, errStopped):
	default:
		p.skip = true
		p.counts.Failed++
		p.logger.Warn("wal: could not prepare the next segment's file; it will be written by appending", "file", p.path, "err", err)
	}
}

var errStopped = errors.New("prealloc: stopped by Close")

// zeroChunk is chunk zero bytes, allocated once, the first time a file is prepared, and only
// ever read.
var zeroChunk = sync.OnceValue(func() []byte { return make([]byte, chunk) })

// prepare creates the zero-filled file and fsyncs it, and returns it open. The file must not
// exist (the log's Open removes one left by a crash): a file at the path that this Preparer
// did not create is never taken. On failure it removes what it wrote.
func (p *Preparer) prepare() (_ vfs.File, err error) {
	f, err := p.fs.CreateNew(p.path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.discard(f)
		}
	}()
	// Zeros written, not a hole made by Truncate or an extent reserved by fallocate: writing
	// over either allocates or converts blocks, which is metadata the fsync must commit.
	for left := p.size; left > 0; {
		if p.isStopped() {
			return nil, errStopped
		}
		n, err := f.Write(zeroChunk()[:min(chunk, left)])
		if err != nil {
			return nil, err
		}
		left -= n
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return f, nil
}

// discard closes a file the Preparer created and removes it, if it is still at the path.
func (p *Preparer) discard(f vfs.File) {
	if p.ours(f) {
		p.fs.Remove(p.path)
	}
	f.Close()
}

// ours reports whether the prepared path names the file f is open on.
func (p *Preparer) ours(f vfs.File) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	at, err := p.fs.Stat(p.path)
	return err == nil && os.SameFile(fi, at)
}

func (p *Preparer) isStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// Take creates the file of a new segment at path, open for writing from its start: the
// prepared file renamed to path (the FS's ReuseForWrite) when one is ready and is still the
// file at the prepared path (prepared is then true), an empty file otherwise. tidwall's
// NewSegment calls it, while tidwall holds its lock (inside a write, or inside Open for a
// new log). The rename happens under the Preparer's lock, so no preparation can start on the
// file while it is renamed.
//
// A preparation under way is waited for: which segments start on prepared files then depends
// on what was written, not on timing. It was asked for a segment's worth of writes earlier,
// so it has normally long finished.
func (p *Preparer) Take(path string) (f vfs.File, prepared bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.busy {
		p.idle.Wait()
	}
	ready := p.ready
	p.ready, p.skip = nil, false
	if ready != nil {
		err := errors.New("the prepared file was replaced or removed")
		if p.ours(ready) {
			f, err = p.fs.ReuseForWrite(p.path, path)
		}
		ready.Close()
		if err == nil {
			p.counts.Taken++
			return f, true, nil
		}
		p.logger.Warn("wal: could not take the prepared segment file; the segment will be written by appending", "segment", filepath.Base(path), "err", err)
	}
	p.counts.Appended++
	f, err = p.fs.Create(path)
	return f, false, err
}

// Ready reports whether a prepared file is ready to be taken.
func (p *Preparer) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready != nil
}

// Await waits for a preparation under way to end, then reports whether a prepared file is
// ready to be taken.
func (p *Preparer) Await() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.busy {
		p.idle.Wait()
	}
	return p.ready != nil
}

// Counts returns what the Preparer did so far.
func (p *Preparer) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts
}

// Close stops the goroutine, waits for a preparation under way to stop, and removes the
// prepared file (the log's next Open would remove it anyway). A nil Preparer does nothing.
func (p *Preparer) Close() {
	if p == nil || !p.shut(true) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ready != nil {
		p.discard(p.ready)
		p.ready = nil
	}
}

// Settle lets a preparation under way finish, then stops the goroutine and leaves the files
// as they are, as a process that dies would: for tests that stop a log without closing it
// and need the directory not to depend on timing. A nil Preparer does nothing.
func (p *Preparer) Settle() {
	if p == nil || !p.shut(false) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.ready != nil {
		p.ready.Close()
		p.ready = nil
	}
}

// shut refuses further requests and waits for the goroutine to return, first stopping a
// preparation under way when abort is set. It reports false if the Preparer was shut already.
func (p *Preparer) shut(abort bool) bool {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	p.closed = true
	p.stopped = abort
	if !p.inline {
		close(p.wake)
	}
	p.mu.Unlock()
	<-p.done
	return true
}
