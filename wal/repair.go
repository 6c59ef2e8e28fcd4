package wal

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	tidwall "github.com/execstore/execstore/internal/tidwall/wal"
	"github.com/execstore/execstore/vfs"
)

// resolvePending finishes what a crash interrupted before the log is scanned: it deletes
// stale TEMP files and segment files compaction took out of the log, and lets tidwall resolve
// START/END files.
func resolvePending(dir string, o Options) error {
	names, err := o.FS.List(dir)
	if err != nil {
		return err
	}
	changed, pending := false, false
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, ".TEMP"), strings.HasSuffix(name, droppedSuffix):
			// A TEMP file is a START/END file or a rewritten segment that was never
			// renamed into place, so it holds nothing the log needs; a DROPPED file is a
			// segment compaction took out of the log.
			if err := o.FS.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
			changed = true
		case strings.HasSuffix(name, ".START"), strings.HasSuffix(name, ".END"):
			pending = true
		}
	}
	if pending {
		if err := resolveTruncation(dir, o); err != nil {
			return err
		}
		o.Logger.Info("wal: finished an interrupted truncation", "dir", dir)
		changed = true
	}
	if changed && !o.NoSync {
		return syncDir(o, dir)
	}
	return nil
}

// resolveTruncation opens tidwall once so that it completes an interrupted truncation. tidwall
// renames START/END files before it loads the last segment, so ErrCorrupt from a torn last
// segment still leaves the renames done; the tail is repaired afterwards.
func resolveTruncation(dir string, o Options) error {
	// On ErrCorrupt tidwall returns without closing the tail segment it opened. Nothing is
	// written through that handle, and the runtime closes it when it is collected.
	tw, err := tidwall.Open(dir, tidwallOptions(o, nil))
	switch {
	case err == nil:
		if err := tw.Close(); err != nil {
			return fmt.Errorf("wal: resolve truncation: %w", err)
		}
	case !errors.Is(err, tidwall.ErrCorrupt):
		return fmt.Errorf("wal: resolve truncation: %w", err)
	}
	names, err := o.FS.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".START") || strings.HasSuffix(n, ".END") {
			return fmt.Errorf("wal: unresolved truncation file %s in %s", n, dir)
		}
	}
	return nil
}

// segmentScan is the result of walking a segment's entries from its start.
type segmentScan struct {
	cut      int    // offset of the first bad entry, or of the padding; the segment's size when all are valid
	badIndex uint64 // index the first bad entry should have had
	reason   string // why it is bad; "" when the segment is clean
}

// scanSegment walks the tidwall entries of a segment whose first entry is first and stops at
// the first entry that is incomplete or whose frame is invalid, or at the padding: zero bytes
// from where an entry would start to the end of the file (a prepared segment file not yet
// filled), which leave the segment clean.
func scanSegment(data []byte, first uint64) segmentScan {
	off := 0
	for index := first; off < len(data); index++ {
		if isPadding(data[off:]) {
			return segmentScan{cut: off}
		}
		frame, size, reason := nextEntry(data[off:])
		if reason == "" {
			var h frameHeader
			h, _, reason = decodeFrame(frame)
			if reason == "" && h.index != index {
				reason = fmt.Sprintf("frame holds index %d", h.index)
			}
		}
		if reason != "" {
			return segmentScan{cut: off, badIndex: index, reason: reason}
		}
		off += size
	}
	return segmentScan{cut: len(data)}
}

// findLaterBatch searches data from offset from, at every byte offset, for a valid entry that
// was written by a batch starting after index bad. Such an entry proves that the batch holding
// bad was fsynced before it (batches are written one at a time and each is fsynced before the
// next starts), so the bad entry is damaged durable data, not a torn write. Entries of bad's
// own batch, and stale entries with smaller indexes, prove nothing and are skipped.
func findLaterBatch(data []byte, from int, bad uint64) (index uint64, off int, found bool) {
	for off = from; off < len(data); off++ {
		frame, _, reason := nextEntry(data[off:])
		if reason != "" {
			continue
		}
		h, _, reason := decodeFrame(frame)
		if reason == "" && h.batchFirst() > bad {
			return h.index, off, true
		}
	}
	return 0, 0, false
}

// repairTail checks the last segment (first entry start). A torn tail is saved to a side file
// and cut; damaged durable data is refused with a *CorruptionError. It returns nil, nil for a
// clean segment.
func repairTail(dir string, start uint64, o Options) (*TornTailError, error) {
	name := segmentName(start)
	path := filepath.Join(dir, name)
	data, err := vfs.ReadFile(o.FS, path)
	if err != nil {
		return nil, fmt.Errorf("wal: open: read last segment: %w", err)
	}
	scan := scanSegment(data, start)
	if scan.reason == "" {
		return nil, nil
	}
	if index, off, found := findLaterBatch(data, scan.cut, scan.badIndex); found {
		return nil, &CorruptionError{Segment: name, Index: scan.badIndex, Offset: int64(scan.cut),
			Reason: fmt.Sprintf("%s; entry %d at offset %d belongs to a later batch, so this one was durable",
				scan.reason, index, off)}
	}
	torn := &TornTailError{Segment: name, Index: scan.badIndex, Offset: int64(scan.cut),
		Bytes: int64(len(data) - scan.cut), Reason: scan.reason}
	if err := cutTail(dir, path, torn, trimZeros(data[scan.cut:]), o); err != nil {
		return nil, fmt.Errorf("wal: repair torn tail of segment %s: %w", name, err)
	}
	o.Logger.Error("wal: cut torn tail", "segment", name, "index", torn.Index, "offset", torn.Offset,
		"bytes", torn.Bytes, "side_file", torn.SideFile, "reason", torn.Reason)
	return torn, nil
}

// cutTail keeps the torn bytes in a side file and makes it durable (file and directory entry)
// BEFORE the segment is truncated, so that a wrong repair destroys nothing; then it truncates
// the segment and makes that durable too.
func cutTail(dir, path string, torn *TornTailError, tail []byte, o Options) error {
	torn.SideFile = fmt.Sprintf("torn-%s-%d-%d.bin", torn.Segment, torn.Offset, time.Now().UnixNano())
	if err := writeSideFile(filepath.Join(dir, torn.SideFile), tail, o); err != nil {
		return err
	}
	if !o.NoSync {
		if err := syncDir(o, dir); err != nil {
			return err
		}
	}
	f, err := o.FS.OpenReadWrite(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(torn.Offset); err != nil {
		return err
	}
	if !o.NoSync {
		if err := f.Sync(); err != nil {
			return err
		}
		if err := syncDir(o, dir); err != nil {
			return err
		}
	}
	return f.Close()
}

// writeSideFile creates path (which must not exist) holding data. Its name does not start with
// 20 digits, so tidwall ignores it.
func writeSideFile(path string, data []byte, o Options) error {
	return writeThrough(o.FS.CreateNew, path, data, !o.NoSync)
}
