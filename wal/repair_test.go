package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/execstore/execstore/vfs"
)

// cleanLog writes batches of the given payload sizes into a new single-segment log, closes it
// and returns its directory and entries.
func cleanLog(t testing.TB, batches ...[]int) (dir string, want []entry) {
	t.Helper()
	dir = t.TempDir()
	l := openLog(t, dir, Options{NoSync: true})
	for _, b := range batches {
		want = append(want, writeBatch(t, l, b...)...)
	}
	closeLog(t, l)
	return dir, want
}

// checkAppendSurvives appends a batch after a repair and checks it gets the next indexes and
// survives another reopen.
func checkAppendSurvives(t *testing.T, dir string, l *Log, want []entry) {
	t.Helper()
	want = append(want, writeBatch(t, l, 33, 34)...)
	closeLog(t, l)
	l = openLog(t, dir, Options{NoSync: true})
	defer closeLog(t, l)
	if l.TailRepair() != nil {
		t.Fatalf("second open repaired again: %v", l.TailRepair())
	}
	checkEntries(t, l, want)
}

func TestEveryCutInsideTheFinalBatchIsRepaired(t *testing.T) {
	base, earlier := cleanLog(t, []int{50, 51, 52}, []int{53}, []int{48, 49, 50, 51})
	baseSize := len(readFile(t, lastSegment(t, base)))
	l := openLog(t, base, Options{NoSync: true})
	final := writeBatch(t, l, 50, 47, 52)
	closeLog(t, l)
	data := readFile(t, lastSegment(t, base))
	ends := entryBounds(t, data)
	name := filepath.Base(lastSegment(t, base))

	for cut := baseSize; cut < len(data); cut++ {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, name), data[:cut])
		l := openLog(t, dir, Options{NoSync: true})

		// The final batch keeps exactly the entries that were whole before the cut.
		want := append([]entry(nil), earlier...)
		boundary := baseSize
		for i, end := range ends[len(earlier):] {
			if end <= cut {
				want = append(want, final[i])
				boundary = end
			}
		}
		checkEntries(t, l, want)
		sides := sideFiles(t, dir)
		if cut == boundary {
			if l.TailRepair() != nil || len(sides) != 0 {
				t.Fatalf("cut %d on an entry boundary: repair %v, side files %v; want none", cut, l.TailRepair(), sides)
			}
		} else {
			if !IsTornTail(l.TailRepair()) || len(sides) != 1 {
				t.Fatalf("cut %d: repair %v, side files %v; want one torn tail", cut, l.TailRepair(), sides)
			}
			// The side file keeps the cut bytes less the zeros they end with.
			if got := readFile(t, filepath.Join(dir, sides[0])); !bytes.Equal(got, trimZeros(data[boundary:cut])) {
				t.Fatalf("cut %d: side file holds %d bytes, want the %d cut, less the zeros they end with", cut, len(got), cut-boundary)
			}
		}
		checkAppendSurvives(t, dir, l, want)
	}
}

func TestJunkAfterTheLastEntryIsCut(t *testing.T) {
	junk := func(seed uint64, n int) []byte {
		r := rand.New(rand.NewPCG(seed, 0))
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	tests := []struct {
		name string
		tail []byte
	}{
		{"zeros, then a garbage byte", append(make([]byte, 512), 7)},
		{"1 garbage byte", junk(1, 1)},
		{"3 garbage bytes", junk(2, 3)},
		{"100 garbage bytes", junk(3, 100)},
		{"5000 garbage bytes", junk(4, 5000)},
		{"a length past the end", []byte{0xff, 0xff, 0x03, 1, 2, 3}},
		{"an overflowing length", bytes.Repeat([]byte{0xff}, 11)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, want := cleanLog(t, sizes(3, 40), sizes(2, 60))
			seg := lastSegment(t, dir)
			clean := readFile(t, seg)
			writeFile(t, seg, append(bytes.Clone(clean), tt.tail...))

			l := openLog(t, dir, Options{NoSync: true})
			checkEntries(t, l, want)
			torn := new(TornTailError)
			if !errors.As(l.TailRepair(), &torn) || torn.Bytes != int64(len(tt.tail)) || torn.Offset != int64(len(clean)) {
				t.Fatalf("repair = %v, want %d bytes cut at %d", l.TailRepair(), len(tt.tail), len(clean))
			}
			if got := readFile(t, seg); !bytes.Equal(got, clean) {
				t.Fatalf("segment holds %d bytes after repair, want the clean %d", len(got), len(clean))
			}
			checkAppendSurvives(t, dir, l, want)
		})
	}
}

// damage returns a copy of data with bytes [from, to) overwritten by fill.
func damage(data []byte, from, to int, fill byte) []byte {
	out := bytes.Clone(data)
	for i := from; i < to; i++ {
		out[i] ^= fill
		if fill == 0 {
			out[i] = 0
		}
	}
	return out
}

func TestDamageInsideTheFinalBatchIsATornTail(t *testing.T) {
	tests := []struct {
		name     string
		entry    int // entry of the final batch (0-based) whose bytes are damaged
		from, to int // damaged byte range relative to the entry's start
		fill     byte
	}{
		{"first entry zeroed", 0, 0, 79, 0},
		{"middle entry zeroed", 1, 0, 79, 0},
		{"middle entry payload zeroed", 1, 40, 60, 0},
		{"middle entry length garbled", 1, 0, 1, 0x55},
		{"middle entry checksum garbled", 1, 1, 5, 0xa5},
		{"middle entry header garbled", 1, 5, 29, 0x3c},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, earlier := cleanLog(t, sizes(2, 50), sizes(3, 50))
			l := openLog(t, dir, Options{NoSync: true})
			final := writeBatch(t, l, sizes(4, 50)...)
			closeLog(t, l)
			seg := lastSegment(t, dir)
			data := readFile(t, seg)
			ends := entryBounds(t, data)
			start := ends[len(earlier)+tt.entry-1]
			// Later entries of the same batch stay valid: one write's pages reach the disk in
			// any order, so they prove nothing about the damaged one.
			writeFile(t, seg, damage(data, start+tt.from, start+tt.to, tt.fill))

			l = openLog(t, dir, Options{NoSync: true})
			if !IsTornTail(l.TailRepair()) {
				t.Fatalf("repair = %v, want a torn tail", l.TailRepair())
			}
			want := append(earlier, final[:tt.entry]...)
			checkEntries(t, l, want)
			checkAppendSurvives(t, dir, l, want)
		})
	}
}

func TestBatchAfterARepairedPrefixIsNotALaterBatch(t *testing.T) {
	// A torn batch of 3 keeps only its first entry; the next batch then starts right after
	// that prefix. Damage in that next batch, with its later entries intact, is still torn.
	dir, want := cleanLog(t, sizes(2, 50))
	l := openLog(t, dir, Options{NoSync: true})
	prefix := writeBatch(t, l, 50, 50, 50)[:1]
	closeLog(t, l)
	seg := lastSegment(t, dir)
	data := readFile(t, seg)
	ends := entryBounds(t, data)
	writeFile(t, seg, data[:ends[3]-10])

	l = openLog(t, dir, Options{NoSync: true})
	want = append(want, prefix...)
	checkEntries(t, l, want)
	next := writeBatch(t, l, 50, 50, 50)
	closeLog(t, l)
	data = readFile(t, seg)
	ends = entryBounds(t, data)
	// Entry 4 (first of the new batch) is damaged; entries 5 and 6 say their batch began at
	// 4, after the prefix's batch (3) but not after the damaged entry.
	writeFile(t, seg, damage(data, ends[2]+5, ends[3]-5, 0))

	l = openLog(t, dir, Options{NoSync: true})
	if !IsTornTail(l.TailRepair()) {
		t.Fatalf("repair = %v, want a torn tail", l.TailRepair())
	}
	if len(next) != 3 {
		t.Fatal("want a batch of 3")
	}
	checkEntries(t, l, want)
	checkAppendSurvives(t, dir, l, want)
}

func TestDamagedEarlierBatchInTheLastSegmentRefusesToOpen(t *testing.T) {
	tests := []struct {
		name     string
		from, to int // damaged range relative to the start of entry 4 (second of batch 2)
		fill     byte
	}{
		{"payload bit flipped", 60, 61, 0x01},
		{"entry zeroed", 0, 79, 0},
		{"checksum garbled", 1, 5, 0xff},
		{"version changed", 5, 6, 0x02},
		{"index changed", 9, 10, 0x01},
		{"length garbled", 0, 1, 0x40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, _ := cleanLog(t, sizes(2, 50), sizes(3, 50), sizes(2, 50))
			seg := lastSegment(t, dir)
			data := readFile(t, seg)
			ends := entryBounds(t, data)
			writeFile(t, seg, damage(data, ends[2]+tt.from, ends[2]+tt.to, tt.fill))

			_, err := Open(dir, Options{NoSync: true})
			var c *CorruptionError
			if !errors.As(err, &c) || c.Segment != filepath.Base(seg) || c.Index != 4 || c.Offset != int64(ends[2]) {
				t.Fatalf("Open = %v; want a *CorruptionError for index 4 at offset %d of %s", err, ends[2], filepath.Base(seg))
			}
			if IsTornTail(err) || !IsCorruption(err) {
				t.Fatalf("corruption classified as a torn tail: %v", err)
			}
			if got := readFile(t, seg); !bytes.Equal(got, damage(data, ends[2]+tt.from, ends[2]+tt.to, tt.fill)) {
				t.Fatal("a refused open changed the segment")
			}
		})
	}
}

func TestDamagedOlderSegmentIsRefused(t *testing.T) {
	// A segment holding the wrong number of whole entries (a gap in the log) is refused at
	// Open, which counts them; bytes that do not parse, or a changed byte inside an entry, are
	// refused when the entry is read, so damage behind a snapshot does not refuse the store.
	tests := []struct {
		name   string
		mangle func(data []byte, ends []int) []byte
		index  uint64 // index the error names
		atOpen bool
	}{
		{"payload bit flipped", func(d []byte, e []int) []byte { return damage(d, e[1]+50, e[1]+51, 0x08) }, 3, false},
		{"entry zeroed", func(d []byte, e []int) []byte { return damage(d, e[0], e[1], 0) }, 2, false},
		{"cut inside an entry", func(d []byte, e []int) []byte { return d[:e[2]-3] }, 3, false},
		{"cut on an entry boundary", func(d []byte, e []int) []byte { return d[:e[2]] }, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{NoSync: true, SegmentSize: 300}
			l := openLog(t, dir, opts)
			for range 4 {
				writeBatch(t, l, sizes(3, 50)...)
			}
			closeLog(t, l)
			names := segmentFiles(t, dir)
			if len(names) < 3 {
				t.Fatalf("want at least 3 segments, have %v", names)
			}
			seg := filepath.Join(dir, names[0])
			data := readFile(t, seg)
			writeFile(t, seg, tt.mangle(data, entryBounds(t, data)))

			l, err := Open(dir, opts)
			if err == nil {
				defer closeLog(t, l)
				if tt.atOpen {
					t.Fatal("Open accepted a segment holding the wrong number of entries")
				}
				err = l.Replay(l.FirstIndex(), func(uint64, []byte) error { return nil })
			}
			var c *CorruptionError
			if !errors.As(err, &c) || c.Segment != names[0] || c.Index != tt.index {
				t.Fatalf("Open or Replay = %v; want a *CorruptionError for index %d in %s", err, tt.index, names[0])
			}
		})
	}
}

func TestBadChecksumOnTheFinalEntryIsCut(t *testing.T) {
	dir, want := cleanLog(t, sizes(2, 50), sizes(2, 50))
	seg := lastSegment(t, dir)
	data := readFile(t, seg)
	writeFile(t, seg, damage(data, len(data)-1, len(data), 0x80))

	l := openLog(t, dir, Options{NoSync: true})
	if !IsTornTail(l.TailRepair()) {
		t.Fatalf("repair = %v, want a torn tail", l.TailRepair())
	}
	checkEntries(t, l, want[:3])
	checkAppendSurvives(t, dir, l, want[:3])
}

func TestPendingTruncationIsFinishedAtOpen(t *testing.T) {
	// A crash inside tidwall's TruncateFront can leave a START file beside the segments it
	// replaces, and a TEMP file from the step before.
	dir := t.TempDir()
	l := openLog(t, dir, Options{NoSync: true})
	all := writeBatch(t, l, sizes(6, 40)...)
	closeLog(t, l)
	seg := lastSegment(t, dir)
	data := readFile(t, seg)
	ends := entryBounds(t, data)
	writeFile(t, filepath.Join(dir, segmentName(4)+".START"), data[ends[2]:])
	writeFile(t, filepath.Join(dir, segmentName(5)+".START.TEMP"), data[ends[3]:])

	l = openLog(t, dir, Options{})
	defer closeLog(t, l)
	checkEntries(t, l, all[3:])
	if names := segmentFiles(t, dir); len(names) != 1 || names[0] != segmentName(4) {
		t.Fatalf("segments after open: %v, want [%s]", names, segmentName(4))
	}
	if leftovers := strays(t, dir, "*.*"); len(leftovers) != 0 {
		t.Fatalf("leftover files after open: %v", leftovers)
	}
}

func TestFailedRepairLeavesTheSegmentUntouched(t *testing.T) {
	dir, _ := cleanLog(t, sizes(2, 50))
	seg := lastSegment(t, dir)
	torn := append(readFile(t, seg), 0, 0, 0)
	writeFile(t, seg, torn)

	// The repair's first change is the side file's creation.
	_, err := Open(dir, Options{FS: vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		if op.Kind == vfs.OpCreate {
			return errInjected
		}
		return nil
	})})
	if !errors.Is(err, errInjected) {
		t.Fatalf("Open = %v, want the injected error", err)
	}
	if got := readFile(t, seg); !bytes.Equal(got, torn) {
		t.Fatal("a failed repair changed the segment")
	}
	if _, err := os.Stat(seg); err != nil {
		t.Fatal(err)
	}
}

// Zeros from the end of the last entry to the end of the file are padding, as a prepared
// segment file holds before it is filled: Open keeps them, reports no repair, and writes the
// next entries over them.
func TestZerosAfterTheLastEntryArePadding(t *testing.T) {
	for _, n := range []int{1, 7, 512, 4096} {
		t.Run(fmt.Sprintf("%d zeros", n), func(t *testing.T) {
			dir, want := cleanLog(t, sizes(3, 40), sizes(2, 60))
			seg := lastSegment(t, dir)
			clean := readFile(t, seg)
			padded := append(bytes.Clone(clean), make([]byte, n)...)
			writeFile(t, seg, padded)

			l := openLog(t, dir, Options{})
			if err := l.TailRepair(); err != nil {
				t.Fatalf("repair = %v, want none", err)
			}
			if sides := sideFiles(t, dir); len(sides) != 0 {
				t.Fatalf("side files %v, want none", sides)
			}
			checkEntries(t, l, want)
			if got := readFile(t, seg); !bytes.Equal(got, padded) {
				t.Fatalf("segment holds %d bytes after open, want the padded %d unchanged", len(got), len(padded))
			}
			more := writeBatch(t, l, 5)
			closeLog(t, l)
			if got := readFile(t, seg); len(got) != max(len(padded), len(clean)+1+frameHeaderSize+5) {
				t.Fatalf("segment holds %d bytes after a write: want the entry written over the padding", len(got))
			}
			checkAppendSurvives(t, dir, openLog(t, dir, Options{}), append(want, more...))
		})
	}
}
