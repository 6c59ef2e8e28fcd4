package wal

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/execstore/execstore/vfs"
)

// truncateCase picks an index from the segment starts s[0] < s[1] < ... and the last index.
type truncateCase struct {
	name  string
	index func(s []uint64, last uint64) uint64
}

var truncateBackCases = []truncateCase{
	{"the last entry is a no-op", func(_ []uint64, last uint64) uint64 { return last }},
	{"inside the tail segment", func(s []uint64, last uint64) uint64 { return last - 1 }},
	{"the entry before the tail segment", func(s []uint64, _ uint64) uint64 { return s[len(s)-1] - 1 }},
	{"inside a middle segment", func(s []uint64, _ uint64) uint64 { return s[2] + 1 }},
	{"the first entry of a middle segment", func(s []uint64, _ uint64) uint64 { return s[2] }},
	{"the entry before a middle segment", func(s []uint64, _ uint64) uint64 { return s[2] - 1 }},
	{"the first entry", func(s []uint64, _ uint64) uint64 { return s[0] }},
	{"everything", func(s []uint64, _ uint64) uint64 { return s[0] - 1 }},
}

func TestTruncateBackSurvivesReopen(t *testing.T) {
	for _, compacted := range []bool{false, true} {
		for _, tt := range truncateBackCases {
			t.Run(fmt.Sprintf("%s, compacted %v", tt.name, compacted), func(t *testing.T) {
				dir := t.TempDir()
				opts := Options{SegmentSize: compactSegmentSize}
				l := openLog(t, dir, opts)
				all := segmentedLog(t, l, dir, 6)
				if compacted {
					if _, err := l.CompactTo(segmentStarts(t, dir)[1]); err != nil {
						t.Fatal(err)
					}
				}
				first := l.FirstIndex()
				index := tt.index(segmentStarts(t, dir), l.LastIndex())

				if err := l.TruncateBack(index); err != nil {
					t.Fatalf("TruncateBack(%d): %v", index, err)
				}
				want := all[first-1 : index]
				check := func(l *Log, want []entry) {
					t.Helper()
					if l.FirstIndex() != first || l.LastIndex() != first+uint64(len(want))-1 {
						t.Fatalf("log holds [%d, %d], want [%d, %d]", l.FirstIndex(), l.LastIndex(), first, first+uint64(len(want))-1)
					}
					checkEntries(t, l, want)
				}
				check(l, want)
				checkMirror(t, l, dir, "after TruncateBack")
				if _, err := l.Read(index + 1); !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("Read(%d) after the cut = %v, want ErrOutOfRange", index+1, err)
				}
				if leftovers := strays(t, dir, "*.*"); len(leftovers) != 0 {
					t.Fatalf("files left after TruncateBack: %v", leftovers)
				}
				// The entries written after the cut differ from the ones it removed (another
				// size), so that a stale entry read back would show.
				want = append(want, writeBatch(t, l, 7, 8, 9)...)
				checkMirror(t, l, dir, "after a Write that followed TruncateBack")
				closeLog(t, l)

				l = openLog(t, dir, opts)
				defer closeLog(t, l)
				check(l, want)
				if l.TailRepair() != nil {
					t.Fatalf("reopen repaired a tail: %v", l.TailRepair())
				}
			})
		}
	}
}

func TestTruncateBackOutsideTheLogIsRefused(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{NoSync: true})
	defer closeLog(t, l)
	writeBatch(t, l, 1, 1, 1, 1)
	if err := l.TruncateFront(3); err != nil {
		t.Fatal(err)
	}
	for _, index := range []uint64{0, 1, 5, 100} {
		if err := l.TruncateBack(index); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("TruncateBack(%d) on a log holding [3, 4] = %v, want ErrOutOfRange", index, err)
		}
	}
	if l.FirstIndex() != 3 || l.LastIndex() != 4 {
		t.Fatalf("a refused truncation changed the log to [%d, %d]", l.FirstIndex(), l.LastIndex())
	}
	writeBatch(t, l, 1) // not a storage error: writes go on
}

func TestTruncateBackRefusesADamagedSegmentAndChangesNothing(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: compactSegmentSize}
	l := openLog(t, dir, opts)
	segmentedLog(t, l, dir, 6)
	s := segmentStarts(t, dir)
	closeLog(t, l)
	// The length of the second entry of an older segment now runs past the file's end.
	path := filepath.Join(dir, segmentName(s[2]))
	data := readFile(t, path)
	first := entryBounds(t, data)[0]
	damaged := append(data[:first:first], 0xff, 0xff, 0x7f)
	writeFile(t, path, damaged)
	files := segmentFiles(t, dir)

	l = openLog(t, dir, opts)
	defer closeLog(t, l)
	last := l.LastIndex()
	err := l.TruncateBack(s[2] + 2)
	if !IsCorruption(err) {
		t.Fatalf("TruncateBack inside a damaged segment = %v, want a *CorruptionError", err)
	}
	if l.LastIndex() != last || !slices.Equal(segmentFiles(t, dir), files) || !bytes.Equal(readFile(t, path), damaged) {
		t.Fatal("a refused TruncateBack changed the log")
	}
	writeBatch(t, l, 5) // not a storage error
}

// crashStates records, at every operation on the log's filesystem during one call, the
// directory as a crash at that instant could leave it: as it is, and, before each fsync, as it
// was at the last one (the change the fsync is about to make durable may be lost).
type crashStates struct {
	t       testing.TB
	dir     string
	on      bool
	durable string // the directory as of the latest fsync
	copies  []crashCopy
}

func (c *crashStates) start() {
	c.on = true
	c.durable = copyDir(c.t, c.dir)
}

func (c *crashStates) capture(op vfs.Op) error {
	if !c.on {
		return nil
	}
	n := len(c.copies)
	c.copies = append(c.copies, crashCopy{fmt.Sprintf("%d %s", n, op), copyDir(c.t, c.dir)})
	switch op.Kind {
	case vfs.OpSync, vfs.OpSyncData:
		c.copies = append(c.copies, crashCopy{fmt.Sprintf("%d %s, the change lost", n, op), copyDir(c.t, c.durable)})
	case vfs.OpSynced:
		c.durable = copyDir(c.t, c.dir)
	}
	return nil
}

// fs is the operating system's filesystem, captured.
func (c *crashStates) fs() vfs.FS { return vfs.WithFaults(vfs.Default, c.capture) }

func TestEveryStateOfAnInterruptedTruncateBackOpens(t *testing.T) {
	dir := t.TempDir()
	states := &crashStates{t: t, dir: dir}
	opts := Options{SegmentSize: compactSegmentSize}
	l := openLog(t, dir, Options{SegmentSize: compactSegmentSize, FS: states.fs()})
	all := segmentedLog(t, l, dir, 6)
	s := segmentStarts(t, dir)
	index, last := s[2]+1, l.LastIndex()
	states.start()
	if err := l.TruncateBack(index); err != nil {
		t.Fatal(err)
	}
	states.on = false
	closeLog(t, l)
	// tidwall fsyncs the tail as it closes (three states: before the fsync, with and without
	// what it makes durable, after it). Three segments leave (a rename and a directory fsync
	// each), then one is truncated and fsynced: four states each (before the change, before
	// its fsync with and without it, after the fsync). tidwall makes the directory as it
	// opens again (one), and the three files taken out are deleted (one each).
	if len(states.copies) != 3+4*4+1+3 {
		t.Fatalf("captured %d states, want 23", len(states.copies))
	}

	for _, c := range states.copies {
		t.Run(c.name, func(t *testing.T) {
			l := openLog(t, c.dir, opts)
			k := l.LastIndex()
			if l.FirstIndex() != 1 || k < index || k > last {
				t.Fatalf("log holds [%d, %d] after the crash, want [1, k] for k in [%d, %d]", l.FirstIndex(), k, index, last)
			}
			checkEntries(t, l, all[:k])
			// The truncation is done again, and the log goes on.
			if err := l.TruncateBack(index); err != nil {
				t.Fatalf("TruncateBack after the crash: %v", err)
			}
			want := append(all[:index:index], writeBatch(t, l, 7)...)
			closeLog(t, l)
			l = openLog(t, c.dir, opts)
			defer closeLog(t, l)
			checkEntries(t, l, want)
		})
	}
}

func TestFailedTruncateBackFailStopsAndLosesNothing(t *testing.T) {
	// The truncation to s[2]+1 takes s[5], s[4] and s[3] out (three renames and three
	// directory fsyncs), then cuts s[2] (the fourth change) and fsyncs it (the second file
	// fsync: tidwall fsyncs the tail as it closes, first).
	tests := []struct {
		name string
		fail func(dir string, op vfs.Op) bool
		n    int
	}{
		{"the first removal fails", firstChange, 1},
		{"the directory fsync after the first removal fails", dirSync, 1},
		{"the third removal fails", firstChange, 3},
		{"the cut fails", firstChange, 4},
		{"the fsync of the cut fails", fileSync, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			plan := &faultPlan{dir: dir, fail: tt.fail, n: tt.n}
			l := openLog(t, dir, Options{SegmentSize: compactSegmentSize, FS: plan.fs()})
			all := segmentedLog(t, l, dir, 6)
			s := segmentStarts(t, dir)
			index, last := s[2]+1, l.LastIndex()
			plan.armed = true
			if err := l.TruncateBack(index); !errors.Is(err, ErrFailed) || !errors.Is(err, errInjected) {
				t.Fatalf("TruncateBack = %v, want ErrFailed wrapping the injected error", err)
			}
			var b Batch
			b.Add([]byte("after"))
			if _, err := l.Write(&b); !errors.Is(err, ErrFailed) {
				t.Errorf("Write after a failed TruncateBack = %v, want ErrFailed", err)
			}
			if err := l.TruncateBack(index - 1); !errors.Is(err, ErrFailed) {
				t.Errorf("TruncateBack after a failed one = %v, want ErrFailed", err)
			}
			if err := l.Reset(1); !errors.Is(err, ErrFailed) {
				t.Errorf("Reset after a failed TruncateBack = %v, want ErrFailed", err)
			}
			if got, err := l.Read(index); err != nil || !bytes.Equal(got, all[index-1].Payload) {
				t.Errorf("Read(%d), an entry kept, after a failed TruncateBack = %v", index, err)
			}
			closeLog(t, l)

			l = openLog(t, dir, Options{SegmentSize: compactSegmentSize})
			defer closeLog(t, l)
			k := l.LastIndex()
			if k < index || k > last {
				t.Fatalf("reopened log ends at %d, want in [%d, %d]", k, index, last)
			}
			checkEntries(t, l, all[:k])
			if err := l.TruncateBack(index); err != nil {
				t.Fatal(err)
			}
			writeBatch(t, l, 7)
		})
	}
}

func TestTornWriteAfterTruncateBackIsRepaired(t *testing.T) {
	// The entries a truncation removed are gone from the file before new ones are written,
	// so a torn write after it is told from damage as any other: the bytes it cuts never
	// include an acknowledged entry.
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	all := writeBatch(t, l, sizes(8, 40)...)
	if err := l.TruncateBack(3); err != nil {
		t.Fatal(err)
	}
	kept := append(all[:3:3], writeBatch(t, l, 9, 9)...)
	writeBatch(t, l, 11, 11, 11)
	closeLog(t, l)
	seg := lastSegment(t, dir)
	data := readFile(t, seg)
	writeFile(t, seg, data[:len(data)-20]) // the last batch's last entry is cut short

	l = openLog(t, dir, Options{})
	defer closeLog(t, l)
	if !IsTornTail(l.TailRepair()) {
		t.Fatalf("repair = %v, want a torn tail", l.TailRepair())
	}
	checkEntries(t, l, append(kept, entry{6, payloadOf(6, 11)}, entry{7, payloadOf(7, 11)}))
}

func TestResetRestartsTheNumbering(t *testing.T) {
	tests := []struct {
		name string
		next func(s []uint64, last uint64) uint64
	}{
		{"before the first index", func(s []uint64, _ uint64) uint64 { return 1 }},
		{"inside the log", func(s []uint64, last uint64) uint64 { return s[0] + (last+1-s[0])/2 }},
		{"the start of the tail segment", func(s []uint64, _ uint64) uint64 { return s[len(s)-1] }},
		{"right after the last entry", func(_ []uint64, last uint64) uint64 { return last + 1 }},
		{"far after the last entry", func(_ []uint64, last uint64) uint64 { return last + 1_000_000 }},
		{"the largest index allowed", func(_ []uint64, _ uint64) uint64 { return MaxResetIndex }},
	}
	for _, empty := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s, empty %v", tt.name, empty), func(t *testing.T) {
				dir := t.TempDir()
				opts := Options{SegmentSize: compactSegmentSize}
				l := openLog(t, dir, opts)
				if !empty {
					segmentedLog(t, l, dir, 6)
					if _, err := l.CompactTo(segmentStarts(t, dir)[1]); err != nil {
						t.Fatal(err)
					}
				}
				next := tt.next(segmentStarts(t, dir), l.LastIndex())

				if err := l.Reset(next); err != nil {
					t.Fatalf("Reset(%d): %v", next, err)
				}
				check := func(l *Log, n int) {
					t.Helper()
					if l.FirstIndex() != next || l.LastIndex() != next+uint64(n)-1 {
						t.Fatalf("log holds [%d, %d], want [%d, %d]", l.FirstIndex(), l.LastIndex(), next, next+uint64(n)-1)
					}
				}
				check(l, 0)
				checkMirror(t, l, dir, "after Reset")
				if got := segmentFiles(t, dir); !slices.Equal(got, []string{segmentName(next)}) {
					t.Fatalf("segments after Reset: %v, want one named %s", got, segmentName(next))
				}
				closeLog(t, l)
				l = openLog(t, dir, opts)
				check(l, 0)

				want := writeBatch(t, l, 7, 8, 9)
				check(l, 3)
				checkEntries(t, l, want)
				closeLog(t, l)
				l = openLog(t, dir, opts)
				defer closeLog(t, l)
				check(l, 3)
				checkEntries(t, l, want)
			})
		}
	}
}

func TestResetOutsideTheIndexesIsRefused(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{NoSync: true})
	defer closeLog(t, l)
	writeBatch(t, l, 1, 1)
	for _, next := range []uint64{0, MaxResetIndex + 1} {
		if err := l.Reset(next); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Reset(%d) = %v, want ErrOutOfRange", next, err)
		}
	}
	if l.FirstIndex() != 1 || l.LastIndex() != 2 {
		t.Fatalf("a refused Reset changed the log to [%d, %d]", l.FirstIndex(), l.LastIndex())
	}
	writeBatch(t, l, 1)
}

func TestEveryStateOfAnInterruptedResetOpens(t *testing.T) {
	for _, next := range []uint64{3, 1000} {
		t.Run(fmt.Sprintf("reset to %d", next), func(t *testing.T) {
			dir := t.TempDir()
			states := &crashStates{t: t, dir: dir}
			opts := Options{SegmentSize: compactSegmentSize}
			l := openLog(t, dir, Options{SegmentSize: compactSegmentSize, FS: states.fs()})
			all := append(segmentedLog(t, l, dir, 4), writeBatch(t, l, sizes(3, 40)...)...) // a tail to truncate
			s := segmentStarts(t, dir)
			last := l.LastIndex()
			states.start()
			if err := l.Reset(next); err != nil {
				t.Fatal(err)
			}
			states.on = false
			closeLog(t, l)
			// tidwall fsyncs the tail as it closes (three states). Every segment but the tail
			// leaves, the tail is truncated, then renamed: four states each. tidwall makes the
			// directory as it opens again (one), and each segment taken out is deleted (one).
			if want := 3 + (len(s)-1+2)*4 + 1 + len(s) - 1; len(states.copies) != want {
				t.Fatalf("captured %d states, want %d", len(states.copies), want)
			}

			for _, c := range states.copies {
				t.Run(c.name, func(t *testing.T) {
					l := openLog(t, c.dir, opts)
					first, k := l.FirstIndex(), l.LastIndex()
					switch {
					case k == last && slices.Contains(s, first):
						checkEntries(t, l, all[first-1:])
					case first == k+1 && (first == s[len(s)-1] || first == next):
					default:
						t.Fatalf("log holds [%d, %d] after the crash: neither a suffix of [1, %d] from a segment start, nor empty at %d or %d",
							first, k, last, s[len(s)-1], next)
					}
					if err := l.Reset(next); err != nil {
						t.Fatalf("Reset after the crash: %v", err)
					}
					want := writeBatch(t, l, 7)
					closeLog(t, l)
					l = openLog(t, c.dir, opts)
					defer closeLog(t, l)
					if l.FirstIndex() != next {
						t.Fatalf("FirstIndex = %d, want %d", l.FirstIndex(), next)
					}
					checkEntries(t, l, want)
				})
			}
		})
	}
}

func TestFailedResetFailStops(t *testing.T) {
	// Three segments leave (three renames, three directory fsyncs), then the tail is cut (the
	// fourth change) and fsynced (the second file fsync: tidwall fsyncs it as it closes,
	// first), then renamed (the fifth change) and the directory fsynced (the fourth).
	tests := []struct {
		name string
		fail func(dir string, op vfs.Op) bool
		n    int
	}{
		{"the first removal fails", firstChange, 1},
		{"the truncation of the tail fails", firstChange, 4},
		{"the fsync of the truncated tail fails", fileSync, 2},
		{"the rename of the tail fails", firstChange, 5},
		{"the directory fsync after the rename fails", dirSync, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			plan := &faultPlan{dir: dir, fail: tt.fail, n: tt.n}
			l := openLog(t, dir, Options{SegmentSize: compactSegmentSize, FS: plan.fs()})
			segmentedLog(t, l, dir, 4)
			writeBatch(t, l, sizes(3, 40)...) // a tail to truncate
			plan.armed = true
			if err := l.Reset(500); !errors.Is(err, ErrFailed) || !errors.Is(err, errInjected) {
				t.Fatalf("Reset = %v, want ErrFailed wrapping the injected error", err)
			}
			checkRefusesChanges(t, l, 500)
			closeLog(t, l)
			l = openLog(t, dir, Options{SegmentSize: compactSegmentSize})
			defer closeLog(t, l)
			if err := l.Reset(500); err != nil {
				t.Fatal(err)
			}
			if first, err := l.Write(batchOf(1, 5)); err != nil || first != 500 {
				t.Fatalf("Write after the Reset = %d, %v; want 500", first, err)
			}
		})
	}
}

// checkRefusesChanges fails unless every change to a fail-stopped log is refused.
func checkRefusesChanges(t *testing.T, l *Log, next uint64) {
	t.Helper()
	if _, err := l.Write(batchOf(1, 5)); !errors.Is(err, ErrFailed) {
		t.Errorf("Write after a failed Reset = %v, want ErrFailed", err)
	}
	if err := l.Reset(next); !errors.Is(err, ErrFailed) {
		t.Errorf("Reset after a failed one = %v, want ErrFailed", err)
	}
	if err := l.TruncateBack(l.FirstIndex() - 1); !errors.Is(err, ErrFailed) {
		t.Errorf("TruncateBack after a failed Reset = %v, want ErrFailed", err)
	}
}

// TestReadsDuringTruncateBackAndReset runs truncations and resets against readers, for the
// race detector: a reader gets an entry as written, or ErrOutOfRange, never anything else.
func TestReadsDuringTruncateBackAndReset(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{NoSync: true, SegmentSize: compactSegmentSize})
	defer closeLog(t, l)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				index := l.LastIndex()
				got, err := l.Read(index)
				switch {
				case errors.Is(err, ErrOutOfRange):
				case err != nil:
					errs <- fmt.Errorf("Read(%d): %v", index, err)
					return
				case len(got) == 0 || !bytes.Equal(got, payloadOf(index, len(got))):
					errs <- fmt.Errorf("Read(%d) returned a payload never written there", index)
					return
				}
			}
		}()
	}
	for i := range 60 {
		writeBatch(t, l, sizes(4, 40)...)
		switch i % 3 {
		case 1:
			if err := l.TruncateBack(l.LastIndex() - 2); err != nil {
				t.Fatal(err)
			}
		case 2:
			if i%9 == 8 {
				if err := l.Reset(l.LastIndex() + 3); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkMirror(t, l, dir, "after truncations and resets")
	if files, _ := filepath.Glob(filepath.Join(dir, "*"+droppedSuffix)); len(files) != 0 {
		t.Fatalf("dropped files left: %v", files)
	}
}
