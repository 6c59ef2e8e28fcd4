package sim

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/tune"
)

// Bit rot: damage to bytes that were durable. The log must refuse to open
// rather than start with a changed command: the store promises to tell a torn
// tail (an unacknowledged write, safe to cut) from corruption (acknowledged
// data, never cut silently).

// walEntry is one entry of a segment file, parsed by the wire format in
// wal/doc.go: a uvarint length, then the frame (CRC-32C, version, kind,
// reserved, index, batch position, batch length, payload length, payload).
type walEntry struct {
	index, batchFirst uint64
	payload           [2]int // offsets of the payload in the segment file
}

const frameHeader = 28

// parseSegment returns the entries of a segment file up to the first one that
// does not parse.
func parseSegment(data []byte) []walEntry {
	var out []walEntry
	for off := 0; off < len(data); {
		n, k := binary.Uvarint(data[off:])
		if k <= 0 || n < frameHeader || n > uint64(len(data)-off-k) {
			break
		}
		frame := data[off+k : off+k+int(n)]
		index := binary.LittleEndian.Uint64(frame[8:])
		pos := binary.LittleEndian.Uint32(frame[16:])
		start := off + k + frameHeader
		out = append(out, walEntry{index: index, batchFirst: index - uint64(pos), payload: [2]int{start, off + k + int(n)}})
		off += k + int(n)
	}
	return out
}

// rotCandidate is a byte whose damage the log must detect.
type rotCandidate struct {
	file  int // in the image's files
	off   int
	index uint64
}

// rotCandidates lists payload bytes of entries whose damage is provably not a
// torn write: an entry of a segment that is not the last, or one followed in
// the last segment by an entry of a later batch. Entries a snapshot covers are
// never read again and are left out, and so are bytes that are not lower-case
// letters: flipping a letter's low bit changes a string, so the command still
// decodes and only the checksum can tell.
func rotCandidates(im *crashImage) []rotCandidate {
	snapIndex := uint64(0)
	var segs []int
	for i, f := range im.files {
		if name, ok := strings.CutPrefix(f.rel, "snapshots/snapshot-"); ok && strings.HasSuffix(name, ".snap") {
			if v, err := strconv.ParseUint(strings.TrimSuffix(name, ".snap"), 10, 64); err == nil {
				snapIndex = max(snapIndex, v)
			}
		}
		if name, ok := strings.CutPrefix(f.rel, "wal/"); ok {
			if _, seg := segmentIndex(name); seg {
				segs = append(segs, i)
			}
		}
	}
	var out []rotCandidate
	for si, fi := range segs {
		entries := parseSegment(im.files[fi].data)
		for ei, e := range entries {
			if e.index <= snapIndex {
				continue
			}
			proven := si < len(segs)-1 || slices.ContainsFunc(entries[ei+1:], func(l walEntry) bool { return l.batchFirst > e.index })
			if !proven {
				continue
			}
			for off := e.payload[0]; off < e.payload[1]; off++ {
				if c := im.files[fi].data[off]; c >= 'a' && c <= 'z' {
					out = append(out, rotCandidate{file: fi, off: off, index: e.index})
				}
			}
		}
	}
	return out
}

// rot damages one durable byte of a copy of the store's directory and checks
// that the store refuses to open it. The run continues on the undamaged store.
func (w *world) rot() error {
	w.barrier()
	im, err := w.storage.quiescentImage()
	if err != nil {
		return err
	}
	cands := rotCandidates(im)
	if len(cands) == 0 {
		return nil
	}
	c := cands[w.rng.IntN(len(cands))]
	f := &im.files[c.file]
	f.data = slices.Clone(f.data)
	f.data[c.off] ^= 1
	dir := filepath.Join(w.base, "rot")
	defer os.RemoveAll(dir)
	if err := im.write(dir); err != nil {
		return err
	}
	opts := w.opts
	opts.FS = nil
	if im.archive != nil {
		fs := cloneArchive(im.archive)
		if err := archiveAt(fs, im.archiveRoot, dir); err != nil {
			return err
		}
		tune.SetArchiveFS(&opts, fs)
	}
	s, err := execstore.Open(dir, opts)
	w.tr.line("%d rot: %s offset %d (entry %d) -> %v", w.ops, f.rel, c.off, c.index, err != nil)
	if err == nil {
		s.Close()
		return violationf("the store opened a log whose durable entry %d was damaged (%s, offset %d)", c.index, f.rel, c.off)
	}
	return nil
}

// snapshotRot damages one byte of the newest snapshot in a copy of the store's
// directory: the store must fall back to the older snapshot and the log after
// it, and open with the same state, losing nothing. It relies on the log
// keeping every entry after the older of the two kept snapshots. The run
// continues on the undamaged store.
func (w *world) snapshotRot() error {
	w.barrier()
	im, err := w.storage.quiescentImage()
	if err != nil {
		return err
	}
	newest := -1
	for i, f := range im.files {
		if strings.HasPrefix(f.rel, "snapshots/snapshot-") && strings.HasSuffix(f.rel, ".snap") &&
			(newest < 0 || f.rel > im.files[newest].rel) {
			newest = i
		}
	}
	if newest < 0 {
		return nil
	}
	f := &im.files[newest]
	f.data = slices.Clone(f.data)
	off := w.rng.IntN(len(f.data))
	f.data[off] ^= 1 << w.rng.IntN(8)
	dir := filepath.Join(w.base, "rot")
	defer os.RemoveAll(dir)
	if err := im.write(dir); err != nil {
		return err
	}
	opts := w.opts
	opts.FS = nil
	if im.archive != nil {
		fs := cloneArchive(im.archive)
		if err := archiveAt(fs, im.archiveRoot, dir); err != nil {
			return err
		}
		tune.SetArchiveFS(&opts, fs)
	}
	s, err := execstore.Open(dir, opts)
	w.tr.line("%d snapshot rot: %s offset %d -> %v", w.ops, f.rel, off, err == nil)
	if err != nil {
		return violationf("the store does not open when its newest snapshot (%s) is damaged: %v", f.rel, err)
	}
	defer s.Close()
	return w.checkFull(s, "after falling back from a damaged newest snapshot")
}
