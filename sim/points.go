package sim

import (
	"strings"

	"github.com/execstore/execstore/internal/prealloc"
	"github.com/execstore/execstore/vfs"
)

// The store's filesystem reports every operation on the store's files (see
// vfs.WithFaults); the simulator crashes and injects errors at some of them,
// its crash points, and learns what is durable from the syncs among them.
//
// The crash points are the steps of the store's durability protocol, where
// its log and snapshot code moves from one state on disk to the next:
//
//   - before the log changes its directory: before a write's first operation
//     (the first write of its entries, or, when the write starts a segment
//     first, the cut or the fsync of the segment it closes), before each
//     segment file it takes out of the log (the rename to .DROPPED), before a
//     torn tail's side file is created, before the copy of the last segment
//     that Open rewrites is created ("before-write");
//   - before and after each fsync the log issues itself: a write's fdatasync
//     of its tail segment, the fsync of the log directory or of the store
//     directory when the log opens, of a torn tail's side file, of a segment
//     a repair cut, of the rewritten copy ("before-sync", "after-sync");
//   - in the snapshot package, before the temporary file is created, before
//     it is renamed to the snapshot's name, before each file pruning removes,
//     and before and after each fsync ("snapshot before-write", ...).
//
// The operations in between are not crash points: tidwall/wal's own work
// inside a write (the segment it closes cut to its entries and fsynced, the
// next segment's file created or taken from the prepared one, the entries
// written after the first), the preparation of the next segment's file (its
// zeros hold nothing of the log), the clean-close marker, the removal of
// files that are no longer part of the log, the temporary file's contents,
// and the store directory's own creation and lock. What a crash between them
// leaves is what a crash at the next crash point leaves, less changes that
// make no difference to the log (see disk, which models them).
//
// The filesystem reports operations, not the code that issued them, so
// points tells the log's steps apart by what it saw before: a write is
// under way from its first operation to the fdatasync of its tail (its other
// operations are tidwall's), a repair from the side file's creation to the
// fsync of the segment it cut, and an fsync of a segment outside both is the
// first step of a write that starts a segment on a prepared file, when one
// is ready, and otherwise tidwall's own at Close. The store directory is
// fsynced by the log and by the snapshot package, each right after it made
// its own directory. These are the sequences a single-node store issues;
// replication's truncations of the log (TruncateBack, Reset) are not mapped.
type points struct {
	group     pointGroup
	prepared  bool            // the next segment's file is prepared and not yet taken
	lastMkdir string          // "wal" or "snapshots": which of them made its directory last
	syncing   map[string]bool // files whose sync under way is a crash point
	// aborted: a snapshot failed at a crash point; the removals that follow are its
	// cleanup, not pruning, until the next snapshot makes its directory.
	aborted bool
}

type pointGroup int

const (
	noGroup     pointGroup = iota
	writeGroup             // a log write, from its first operation to its tail's fdatasync
	repairGroup            // a torn-tail repair, from the side file's creation to the cut segment's fsync
)

// point is what an operation is to the simulator: a crash point or nothing.
type point struct {
	ev     crashPoint
	synced string // for an after-sync, the path synced
	ok     bool
}

// classify maps an operation on the store's files to its crash point, if it
// is one. rel is the operation's path relative to the store directory, or
// "" outside it. The caller holds storage.mu.
func (p *points) classify(op vfs.Op, rel string) point {
	if p.syncing == nil {
		p.syncing = map[string]bool{}
	}
	sub, name, _ := strings.Cut(rel, "/")
	switch {
	case rel == "" || sub == "..":
		return point{} // the store directory's parent, or elsewhere
	case rel == ".":
		return p.storeDir(op)
	case sub == "wal" && name == "", sub == "snapshots" && name == "":
		if op.Kind == vfs.OpMkdirAll {
			p.lastMkdir = sub
			p.aborted = p.aborted && sub != "snapshots"
			return point{}
		}
		return p.sync(op, sub == "snapshots", true)
	case sub == "snapshots":
		return p.snapshotFile(op)
	case sub == "wal":
		return p.walFile(op, name)
	}
	return point{} // the LOCK
}

// storeDir classifies an operation on the store directory itself: its fsync
// is the log's when the log made its directory last, else the snapshot
// package's.
func (p *points) storeDir(op vfs.Op) point {
	if op.Kind == vfs.OpMkdirAll {
		return point{}
	}
	return p.sync(op, p.lastMkdir == "snapshots", true)
}

// sync classifies the operations of a sync that is a crash point when
// isPoint is set: before it, and after it succeeded.
func (p *points) sync(op vfs.Op, snapshot, isPoint bool) point {
	switch op.Kind {
	case vfs.OpSync, vfs.OpSyncData:
		p.syncing[op.Path] = isPoint
		if !isPoint {
			return point{}
		}
		if snapshot {
			return point{ev: crashPoint{kind: snapBeforeSync, path: op.Path}, ok: true}
		}
		return point{ev: crashPoint{kind: "before-sync"}, ok: true}
	case vfs.OpSynced:
		if !p.syncing[op.Path] {
			return point{}
		}
		delete(p.syncing, op.Path)
		if snapshot {
			return point{ev: crashPoint{kind: snapAfterSync}, synced: op.Path, ok: true}
		}
		return point{ev: crashPoint{kind: "after-sync"}, synced: op.Path, ok: true}
	}
	return point{}
}

// snapshotFile classifies an operation on a file in snapshots/.
func (p *points) snapshotFile(op vfs.Op) point {
	before := func(path string) point {
		return point{ev: crashPoint{kind: snapBeforeWrite, path: path}, ok: true}
	}
	switch op.Kind {
	case vfs.OpCreate:
		return before(op.Path)
	case vfs.OpRemove:
		if !p.aborted {
			return before(op.Path) // pruning
		}
	case vfs.OpRename:
		if strings.HasSuffix(op.Path, ".tmp") { // not the store setting an unreadable one aside
			return before(op.NewPath)
		}
	case vfs.OpSync, vfs.OpSynced:
		return p.sync(op, true, true)
	}
	return point{}
}

// walFile classifies an operation on a file in wal/.
func (p *points) walFile(op vfs.Op, name string) point {
	_, segment := segmentIndex(name)
	switch {
	case name == prealloc.Name:
		switch op.Kind {
		case vfs.OpSynced:
			p.prepared = true
		case vfs.OpRemove, vfs.OpReuseForWrite:
			p.prepared = false
		}
		return point{}
	case segment:
		return p.segmentFile(op)
	case strings.HasPrefix(name, "torn-"):
		if op.Kind == vfs.OpCreate {
			p.group = repairGroup
			return p.beforeWrite()
		}
	case strings.HasSuffix(name, rewriteSuffix), strings.HasSuffix(name, ".START.TEMP"), strings.HasSuffix(name, ".END.TEMP"):
		if op.Kind == vfs.OpCreate {
			return p.beforeWrite()
		}
	}
	if op.Kind == vfs.OpSync || op.Kind == vfs.OpSynced {
		// A side file's or the rewritten copy's fsync is the log's own;
		// tidwall's truncation files are synced by tidwall.
		own := strings.HasPrefix(name, "torn-") || strings.HasSuffix(name, rewriteSuffix)
		return p.sync(op, false, own)
	}
	return point{}
}

// segmentFile classifies an operation on a segment file.
func (p *points) segmentFile(op vfs.Op) point {
	switch op.Kind {
	case vfs.OpWrite, vfs.OpTruncate:
		if p.group == noGroup {
			p.group = writeGroup
			return p.beforeWrite()
		}
	case vfs.OpSync:
		switch {
		case p.group == repairGroup:
			p.group = noGroup
			return p.sync(op, false, true) // the segment the repair cut
		case p.group == noGroup && p.prepared:
			// A write that starts a segment on the prepared file first
			// closes the tail: tidwall's fsync of it is the write's
			// first step.
			p.syncing[op.Path] = false
			p.group = writeGroup
			return p.beforeWrite()
		}
		return p.sync(op, false, false) // tidwall's, in a write or at Close
	case vfs.OpSyncData:
		p.group = noGroup
		return p.sync(op, false, true) // the write's fdatasync of its tail
	case vfs.OpSynced:
		return p.sync(op, false, false)
	case vfs.OpCreate:
		p.prepared = false // a segment started on a new file: nothing prepared is left
	case vfs.OpRename:
		return p.beforeWrite() // a segment taken out of the log (compaction), or renamed (Reset)
	}
	return point{}
}

func (p *points) beforeWrite() point {
	return point{ev: crashPoint{kind: "before-write"}, ok: true}
}

// failed records that the store failed an operation at a crash point: the
// step under way ends there.
func (p *points) failed(at crashPoint) {
	p.reset()
	p.aborted = at.snapshot()
}

// reset forgets the steps under way: an operation failed, or the store
// directory changed.
func (p *points) reset() {
	p.group = noGroup
	p.aborted = false
	clear(p.syncing)
}
