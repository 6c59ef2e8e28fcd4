package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// segmentName is tidwall's file name for the segment whose first entry is index.
func segmentName(index uint64) string {
	return fmt.Sprintf("%020d", index)
}

// listSegments returns the first index of every segment file in dir, ascending. It applies
// tidwall's rule: a regular file whose name is exactly 20 decimal digits, not all zero. Side
// files, START/END/TEMP files and anything else are not segments.
func listSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var starts []uint64
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || len(name) != 20 {
			continue
		}
		index, err := strconv.ParseUint(name, 10, 64)
		if err != nil || index == 0 {
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
// Invariant: tailBytes equals the length of tidwall's in-memory buffer of the tail segment,
// which equals the tail file's size: tidwall loads the whole file at open and appends every
// entry it writes. A test checks the prediction against the directory after every Write.
type segmentMirror struct {
	starts    []uint64 // first index of every segment file, ascending; never empty once loaded
	tailBytes int      // bytes in the tail segment
	limit     int      // Options.SegmentSize, which tidwall compares against
}

// load reads the segment files and the tail's size from dir.
func (m *segmentMirror) load(dir string) error {
	starts, err := listSegments(dir)
	if err != nil {
		return err
	}
	if len(starts) == 0 {
		return errors.New("wal: no segment file in " + dir)
	}
	fi, err := os.Stat(filepath.Join(dir, segmentName(starts[len(starts)-1])))
	if err != nil {
		return err
	}
	m.starts = starts
	m.tailBytes = int(fi.Size())
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
func syncDir(dir string, faults *Faults) error {
	if err := faults.beforeSync(); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	if err := d.Close(); err != nil {
		return err
	}
	return faults.afterSync(dir)
}

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
func walkSegment(dir, name string, k uint64) segmentWalk {
	w := segmentWalk{target: -1, failOffset: -1}
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		w.failReason = "cannot read segment: " + err.Error()
		return w
	}
	off := 0
	for ; off < len(data); w.entries++ {
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
