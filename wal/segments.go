package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"

	tidwall "github.com/execstore/execstore/internal/tidwall/wal"
	"github.com/execstore/execstore/vfs"
)

// segmentName is tidwall's file name for the segment whose first entry is index.
func segmentName(index uint64) string {
	return fmt.Sprintf("%020d", index)
}

// listSegments returns the first index of every segment file in dir, ascending. It applies
// tidwall's rule: a regular file whose name is exactly 20 decimal digits, not all zero. Side
// files, START/END/TEMP files and anything else are not segments.
func listSegments(fs vfs.FS, dir string) ([]uint64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	var starts []uint64
	for _, name := range names {
		if len(name) != 20 {
			continue
		}
		index, err := strconv.ParseUint(name, 10, 64)
		if err != nil || index == 0 {
			continue
		}
		if fi, err := fs.Stat(filepath.Join(dir, name)); err == nil && fi.IsDir() {
			continue
		}
		starts = append(starts, index)
	}
	slices.Sort(starts)
	return starts, nil
}

// segmentMirror predicts the segment files tidwall keeps, so that Write knows when tidwall
// created a file and the directory must be fsynced. tidwall creates files inside its cycle()
// without telling the caller; mirroring its rule avoids listing the directory on every Write.
//
// Invariant: tailBytes equals the length of tidwall's in-memory buffer of the tail segment:
// the bytes its entries take in the file, which may be longer (padded with zeros). A test
// checks the prediction against the directory after every Write.
type segmentMirror struct {
	starts    []uint64 // first index of every segment file, ascending; never empty once loaded
	tailBytes int      // bytes in the tail segment
	limit     int      // Options.SegmentSize, which tidwall compares against
}

// load reads the segment files from dir and the size of the tail's entries from tw, which is
// open on dir.
func (m *segmentMirror) load(fs vfs.FS, dir string, tw *tidwall.Log) error {
	starts, err := listSegments(fs, dir)
	if err != nil {
		return err
	}
	if len(starts) == 0 {
		return errors.New("wal: no segment file in " + dir)
	}
	size, err := tw.TailSize()
	if err != nil {
		return err
	}
	m.starts = starts
	m.tailBytes = size
	return nil
}

// beginBatch applies tidwall's first cycling condition (writeBatch: the tail buffer is already
// larger than SegmentSize) to a batch whose first entry is first. It returns the number of
// segment files created (0 or 1).
func (m *segmentMirror) beginBatch(first uint64) int {
	if m.tailBytes > m.limit {
		m.cycle(first)
		return 1
	}
	return 0
}

// addEntry applies tidwall's second cycling condition (after appending an entry the tail
// buffer holds SegmentSize bytes or more; tidwall then starts a new segment at index+1, even
// after the batch's last entry). frameLen is the length of the entry's data, to which tidwall
// adds its uvarint length prefix.
func (m *segmentMirror) addEntry(index uint64, frameLen int) int {
	m.tailBytes += uvarintLen(uint64(frameLen)) + frameLen
	if m.tailBytes >= m.limit {
		m.cycle(index + 1)
		return 1
	}
	return 0
}

// drop forgets a segment whose file was removed; never the tail.
func (m *segmentMirror) drop(start uint64) {
	i := slices.Index(m.starts, start)
	assert(i >= 0 && i < len(m.starts)-1, "wal: segment mirror: removed segment is unknown or the tail")
	m.starts = slices.Delete(m.starts, i, i+1)
}

func (m *segmentMirror) cycle(first uint64) {
	m.starts = append(m.starts, first)
	m.tailBytes = 0
}

// segmentOf names the segment file that holds index.
func (m *segmentMirror) segmentOf(index uint64) string {
	i, found := slices.BinarySearch(m.starts, index)
	if !found {
		i--
	}
	if i < 0 {
		return "(none)"
	}
	return segmentName(m.starts[i])
}

// names lists the predicted segment file names, ascending.
func (m *segmentMirror) names() []string {
	out := make([]string, len(m.starts))
	for i, s := range m.starts {
		out[i] = segmentName(s)
	}
	return out
}

// syncDir fsyncs a directory so that file creations, renames, removals and truncations in it
// survive a crash.
func syncDir(o Options, dir string) error { return vfs.SyncDir(o.FS, dir) }

// parseSegmentName is the inverse of segmentName.
func parseSegmentName(name string) (uint64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	index, err := strconv.ParseUint(name, 10, 64)
	return index, err == nil && index != 0
}

// segmentWalk is what walking a segment file's tidwall entries found. It serves error
// reports only, so it rereads the file rather than trusting tidwall's cached view.
type segmentWalk struct {
	target     int64  // offset of the entry sought; -1 if the walk never reached it
	entries    uint64 // entries parsed before the end or the first failure
	failOffset int64  // offset of the first unparsable entry; -1 if none
	failReason string // why it does not parse
}

// walkSegment parses segment name in dir from its start and locates its entry k (0-based).
func walkSegment(fs vfs.FS, dir, name string, k uint64) segmentWalk {
	w := segmentWalk{target: -1, failOffset: -1}
	data, err := vfs.ReadFile(fs, filepath.Join(dir, name))
	if err != nil {
		w.failReason = "cannot read segment: " + err.Error()
		return w
	}
	off := 0
	for ; off < len(data) && !isPadding(data[off:]); w.entries++ {
		if w.entries == k {
			w.target = int64(off)
		}
		_, size, reason := nextEntry(data[off:])
		if reason != "" {
			w.failOffset, w.failReason = int64(off), reason
			return w
		}
		off += size
	}
	return w
}

// checkContiguous refuses segment files that do not hold one run of consecutive entries:
// every segment but the last must hold exactly as many entries as the next one's name says
// (next start - start). Front compaction removes files oldest first, each removal durable
// before the next, and the store never removes anything else, so a crash cannot leave a gap
// or an overlap: either is damage, refused with a *CorruptionError rather than left for a
// replay that might never read that far (entries a snapshot covers are never read again,
// and FirstIndex would name an entry that is not there). Only the entry lengths are walked;
// the frames are verified when read. A segment whose lengths do not parse is damaged, not
// missing: its count is unknown, so it is left to the reads that meet it.
func checkContiguous(fs vfs.FS, dir string, starts []uint64) error {
	var r *bufio.Reader // one buffer for every segment
	if len(starts) > 1 {
		r = bufio.NewReaderSize(nil, 256<<10)
	}
	for i := 0; i+1 < len(starts); i++ {
		name := segmentName(starts[i])
		count, end, reason, err := countEntries(fs, filepath.Join(dir, name), r)
		if err != nil {
			return fmt.Errorf("wal: open: read segment %s: %w", name, err)
		}
		if reason != "" {
			// Damage, not a gap: the name still says which entries the file holds, and
			// reading any of them reports a *CorruptionError. Refusing to open here would
			// refuse a store whose damage lies wholly behind its snapshot, which it never
			// reads again (the store checks that range in the background instead).
			continue
		}
		switch want := starts[i+1] - starts[i]; {
		case count < want:
			return &CorruptionError{Segment: name, Index: starts[i] + count, Offset: end,
				Reason: fmt.Sprintf("the segment holds %d entries and the next segment starts at %d: entries %d to %d are missing",
					count, starts[i+1], starts[i]+count, starts[i+1]-1)}
		case count > want:
			return &CorruptionError{Segment: name, Index: starts[i+1], Offset: -1,
				Reason: fmt.Sprintf("the segment holds %d entries, past the start of the next segment (%d)", count, starts[i+1])}
		}
	}
	return nil
}

// restIsZero reads r to its end and reports whether every byte was zero.
func restIsZero(r *bufio.Reader) (bool, error) {
	for {
		b, err := r.Peek(r.Size())
		if !tidwall.AllZero(b) {
			return false, nil
		}
		if _, derr := r.Discard(len(b)); derr != nil {
			return false, derr
		}
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return false, err
		}
	}
}

// countEntries walks the tidwall entries of a segment file by their lengths alone, through
// r, and returns how many it holds. reason is "" when the whole file parses; otherwise end is
// the offset of the entry that does not, and reason says why.
func countEntries(fs vfs.FS, path string, r *bufio.Reader) (count uint64, end int64, reason string, err error) {
	f, err := fs.Open(path)
	if err != nil {
		return 0, 0, "", err
	}
	defer f.Close()
	r.Reset(f)
	for {
		head, err := r.Peek(binary.MaxVarintLen64)
		if len(head) == 0 && errors.Is(err, io.EOF) {
			return count, end, "", nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return count, end, "", err
		}
		if head[0] == 0 {
			// Padding, if zeros run to the end: a segment is cut to its entries when the
			// next one starts, so this is only met in a file left otherwise.
			zeros, err := restIsZero(r)
			if err != nil {
				return count, end, "", err
			}
			if zeros {
				return count, end, "", nil
			}
			return count, end, "a zero byte where an entry starts, and other bytes after it", nil
		}
		n, k := binary.Uvarint(head)
		switch {
		case k == 0:
			return count, end, "entry length truncated", nil
		case k < 0:
			return count, end, "entry length overflows 64 bits", nil
		case n <= frameHeaderSize || n > frameHeaderSize+MaxPayloadBytes:
			return count, end, fmt.Sprintf("entry of %d bytes cannot hold a frame", n), nil
		}
		if _, err := r.Discard(k); err != nil {
			return count, end, "", err
		}
		if _, err := r.Discard(int(n)); errors.Is(err, io.EOF) {
			return count, end, fmt.Sprintf("entry of %d bytes runs past the end of the segment", n), nil
		} else if err != nil {
			return count, end, "", err
		}
		count++
		end += int64(k) + int64(n)
	}
}
