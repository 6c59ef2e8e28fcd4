package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execstore/execstore/vfs"
)

// copyDir copies the regular files of src into a new directory, as a crash at this instant
// would leave them if every change so far were durable.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	names, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if e.Type().IsRegular() {
			writeFile(t, filepath.Join(dst, e.Name()), readFile(t, filepath.Join(src, e.Name())))
		}
	}
	return dst
}

// checkLog checks that l holds exactly the entries of all from first on.
func checkLog(t testing.TB, l *Log, all []entry, first uint64) {
	t.Helper()
	if l.FirstIndex() != first || l.LastIndex() != all[len(all)-1].Index {
		t.Fatalf("log holds [%d, %d], want [%d, %d]", l.FirstIndex(), l.LastIndex(), first, all[len(all)-1].Index)
	}
	checkEntries(t, l, all[first-1:])
}

func TestCompactToKeepsEveryEntryFromKeepFrom(t *testing.T) {
	// keepFrom is chosen from the segment starts s[0] < s[1] < ... < s[tail] and the last
	// index; want is the segment start that becomes the first index.
	tests := []struct {
		name     string
		keepFrom func(s []uint64, last uint64) uint64
		want     func(s []uint64) uint64
	}{
		{"the first index", func(s []uint64, _ uint64) uint64 { return s[0] }, func(s []uint64) uint64 { return s[0] }},
		{"inside the first segment", func(s []uint64, _ uint64) uint64 { return s[1] - 1 }, func(s []uint64) uint64 { return s[0] }},
		{"the start of a middle segment", func(s []uint64, _ uint64) uint64 { return s[2] }, func(s []uint64) uint64 { return s[2] }},
		{"inside a middle segment", func(s []uint64, _ uint64) uint64 { return s[2] + 1 }, func(s []uint64) uint64 { return s[2] }},
		{"the start of the tail", func(s []uint64, _ uint64) uint64 { return s[len(s)-1] }, func(s []uint64) uint64 { return s[len(s)-1] }},
		{"past the last entry", func(_ []uint64, last uint64) uint64 { return last + 1 }, func(s []uint64) uint64 { return s[len(s)-1] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentSize: compactSegmentSize}
			l := openLog(t, dir, opts)
			all := segmentedLog(t, l, dir, 5)
			starts := segmentStarts(t, dir)
			want := tt.want(starts)

			got, err := l.CompactTo(tt.keepFrom(starts, l.LastIndex()))
			if err != nil || got != want {
				t.Fatalf("CompactTo = %d, %v; want %d, nil", got, err, want)
			}
			checkLog(t, l, all, want)
			if want > 1 {
				if _, err := l.Read(want - 1); !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("Read(%d) below the first index = %v, want ErrOutOfRange", want-1, err)
				}
			}
			if got := segmentStarts(t, dir); got[0] != want || !slices.Equal(got, starts[slices.Index(starts, want):]) {
				t.Fatalf("segments after CompactTo start at %v, want the suffix of %v from %d", got, starts, want)
			}
			if leftovers := strays(t, dir, "*.*"); len(leftovers) != 0 {
				t.Fatalf("files left after CompactTo: %v", leftovers)
			}
			all = append(all, writeBatch(t, l, 5, 6)...)
			closeLog(t, l)

			l = openLog(t, dir, opts)
			defer closeLog(t, l)
			checkLog(t, l, all, want)
		})
	}
}

// compactEvent is one operation on the log's filesystem seen during a compaction, with the
// segment files present at that moment.
type compactEvent struct {
	op       string
	segments string
}

func TestCompactToRemovesSegmentsOldestFirstEachDurableBeforeTheNext(t *testing.T) {
	dir := t.TempDir()
	var events []compactEvent
	recording := false
	record := func(op vfs.Op) error {
		if recording {
			events = append(events, compactEvent{op.Kind.String() + " " + filepath.Base(op.Path), strings.Join(segmentFiles(t, dir), " ")})
		}
		return nil
	}
	l := openLog(t, dir, Options{SegmentSize: compactSegmentSize, FS: vfs.WithFaults(vfs.Default, record)})
	defer closeLog(t, l)
	segmentedLog(t, l, dir, 6)
	starts := segmentStarts(t, dir)
	cut := starts[4]

	recording = true
	if _, err := l.CompactTo(cut); err != nil {
		t.Fatal(err)
	}
	present := func(from int) string {
		var names []string
		for _, s := range starts[from:] {
			names = append(names, segmentName(s))
		}
		return strings.Join(names, " ")
	}
	var want []compactEvent
	for i := range 4 {
		want = append(want,
			compactEvent{"rename " + segmentName(starts[i]), present(i)}, // about to take starts[i] out
			compactEvent{"sync " + filepath.Base(dir), present(i + 1)},   // taken out, not yet durable
			compactEvent{"synced " + filepath.Base(dir), present(i + 1)}, // durable
		)
	}
	for i := range 4 { // then the files taken out are deleted
		want = append(want, compactEvent{"remove " + segmentName(starts[i]) + droppedSuffix, present(4)})
	}
	if !slices.Equal(events, want) {
		t.Fatalf("operations during CompactTo:\n got %q\nwant %q", events, want)
	}
}

func TestCompactToNeverHoldsTheWriteLockDuringFileIO(t *testing.T) {
	// At every operation of a compaction on the log's filesystem (each rename out of the
	// log, each directory fsync before and after, each deletion) the compaction pauses until
	// a Write and a Read from another goroutine have finished. Had it held the lock Write
	// takes, the Write would wait for the operation to return: it times out.
	dir := t.TempDir()
	var l *Log
	var paused atomic.Bool // set while a compaction's operation waits: the Write's own pass
	var cut uint64
	var failures []string
	var stuck []chan error // Writes still waiting when their pause gave up on them
	pause := func(at string) error {
		if !paused.CompareAndSwap(false, true) {
			return nil
		}
		defer paused.Store(false)
		done := make(chan error, 1)
		go func() {
			var b Batch
			b.Add([]byte("written while compacting"))
			first, err := l.Write(&b)
			if err == nil {
				_, err = l.Read(first)
			}
			if _, rerr := l.Read(cut - 1); err == nil && !errors.Is(rerr, ErrOutOfRange) {
				err = fmt.Errorf("Read(%d) below the cut = %v, want ErrOutOfRange", cut-1, rerr)
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				failures = append(failures, at+": "+err.Error())
			}
		case <-time.After(5 * time.Second):
			failures = append(failures, at+": Write still waiting after 5 s")
			stuck = append(stuck, done) // it can finish only once the pause returns
		}
		return nil
	}
	armed := false
	fs := vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		if armed {
			return pause(op.String())
		}
		return nil
	})
	l = openLog(t, dir, Options{SegmentSize: compactSegmentSize, FS: fs})
	all := segmentedLog(t, l, dir, 5)
	cut = segmentStarts(t, dir)[3]
	armed = true
	if _, err := l.CompactTo(cut); err != nil {
		t.Fatal(err)
	}
	armed = false
	for _, done := range stuck {
		<-done
	}
	for _, f := range failures {
		t.Error(f)
	}
	// Three segments taken out, each a rename and a directory fsync (before and after), then
	// deleted: twelve operations.
	if l.LastIndex() != all[len(all)-1].Index+12 {
		t.Fatalf("LastIndex = %d; want the %d entries written plus one per operation (12)", l.LastIndex(), len(all))
	}
	closeLog(t, l)
}

// crashCopy is a copy of a log directory as a crash at one step would leave it.
type crashCopy struct {
	name string
	dir  string
}

func TestEveryStateOfAnInterruptedCompactionOpens(t *testing.T) {
	dir := t.TempDir()
	var copies []crashCopy
	var before string // the directory before the compaction
	step := 0
	capture := func(op vfs.Op) error {
		if before == "" {
			return nil
		}
		step++
		copies = append(copies, crashCopy{fmt.Sprintf("%d %s", step, op.Kind), copyDir(t, dir)})
		if op.Kind != vfs.OpSync {
			return nil
		}
		// The latest removal is not durable yet: the file may come back.
		lost := copyDir(t, dir)
		var latest string
		for _, name := range segmentFiles(t, before) {
			if _, err := os.Stat(filepath.Join(dir, name)); os.IsNotExist(err) {
				latest = name
			}
		}
		writeFile(t, filepath.Join(lost, latest), readFile(t, filepath.Join(before, latest)))
		if err := os.Remove(filepath.Join(lost, latest+droppedSuffix)); err != nil {
			t.Fatal(err) // the rename out of the log is what did not persist
		}
		copies = append(copies, crashCopy{fmt.Sprintf("%d %s, the removal lost", step, op.Kind), lost})
		return nil
	}
	opts := Options{SegmentSize: compactSegmentSize}
	l := openLog(t, dir, Options{SegmentSize: compactSegmentSize, FS: vfs.WithFaults(vfs.Default, capture)})
	all := segmentedLog(t, l, dir, 6)
	starts := segmentStarts(t, dir)
	cut := starts[4]
	before = copyDir(t, dir)
	if _, err := l.CompactTo(cut); err != nil {
		t.Fatal(err)
	}
	before = ""
	closeLog(t, l)
	if len(copies) != 4*4+4 {
		t.Fatalf("captured %d states, want 20 (per segment removed: its rename, the directory's fsync "+
			"before and after, a lost rename, and the file's deletion)", len(copies))
	}

	for _, c := range copies {
		t.Run(c.name, func(t *testing.T) {
			l := openLog(t, c.dir, opts)
			first := l.FirstIndex()
			if !slices.Contains(starts[:5], first) {
				t.Fatalf("FirstIndex after the crash = %d, want one of the segment starts up to the cut %v", first, starts[:5])
			}
			checkLog(t, l, all, first)
			if leftovers := strays(t, c.dir, "*.*"); len(leftovers) != 0 {
				t.Fatalf("files left after Open: %v", leftovers)
			}
			// The next compaction finishes the job.
			if got, err := l.CompactTo(cut); err != nil || got != cut {
				t.Fatalf("CompactTo after the crash = %d, %v; want %d", got, err, cut)
			}
			closeLog(t, l)
			l = openLog(t, c.dir, opts)
			defer closeLog(t, l)
			checkLog(t, l, all, cut)
		})
	}
}

func TestTruncateFrontInsideASegmentAfterCompaction(t *testing.T) {
	// CompactTo removes files tidwall still lists; tidwall's own truncation, which removes
	// every file it lists before the cut, must not trip over them.
	dir := t.TempDir()
	opts := Options{SegmentSize: compactSegmentSize}
	l := openLog(t, dir, opts)
	all := segmentedLog(t, l, dir, 6)
	s := segmentStarts(t, dir)
	if _, err := l.CompactTo(s[2]); err != nil {
		t.Fatal(err)
	}
	inside := s[3] + 1
	if err := l.TruncateFront(inside); err != nil {
		t.Fatalf("TruncateFront(%d) after CompactTo: %v", inside, err)
	}
	checkLog(t, l, all, inside)
	all = append(all, writeBatch(t, l, 7)...)
	closeLog(t, l)
	l = openLog(t, dir, opts)
	defer closeLog(t, l)
	checkLog(t, l, all, inside)
}

func TestFailedCompactionFailStopsAndLosesNothing(t *testing.T) {
	tests := []struct {
		name    string
		fail    func(dir string, op vfs.Op) bool
		n       int
		removed int // segment files removed durably before the failure
	}{
		{"first removal fails", firstChange, 1, 0},
		{"directory fsync after the first removal fails", dirSync, 1, 1},
		{"second removal fails", firstChange, 2, 1},
		{"directory fsync after the third removal fails", dirSync, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			plan := &faultPlan{dir: dir, fail: tt.fail, n: tt.n}
			opts := Options{SegmentSize: compactSegmentSize, FS: plan.fs()}
			l := openLog(t, dir, opts)
			all := segmentedLog(t, l, dir, 6)
			s := segmentStarts(t, dir)
			plan.armed = true
			if _, err := l.CompactTo(s[4]); !errors.Is(err, ErrFailed) || !errors.Is(err, errInjected) {
				t.Fatalf("CompactTo = %v, want ErrFailed wrapping the injected error", err)
			}
			var b Batch
			b.Add([]byte("after"))
			if _, err := l.Write(&b); !errors.Is(err, ErrFailed) {
				t.Errorf("Write after a failed compaction = %v, want ErrFailed", err)
			}
			if _, err := l.CompactTo(s[5]); !errors.Is(err, ErrFailed) {
				t.Errorf("CompactTo after a failed compaction = %v, want ErrFailed", err)
			}
			if _, err := l.Read(l.LastIndex()); err != nil {
				t.Errorf("Read of the last entry after a failed compaction = %v", err)
			}
			closeLog(t, l)

			l = openLog(t, dir, Options{SegmentSize: compactSegmentSize})
			defer closeLog(t, l)
			checkLog(t, l, all, s[tt.removed])
		})
	}
}

// TestConcurrentCompactionAndWrites runs compactions against a stream of writes and reads,
// for the race detector.
func TestConcurrentCompactionAndWrites(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{NoSync: true, SegmentSize: compactSegmentSize})
	defer closeLog(t, l)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := l.CompactTo(l.LastIndex()); err != nil {
				t.Error(err)
				return
			}
			if first := l.FirstIndex(); first <= l.LastIndex() {
				if _, err := l.Read(l.LastIndex()); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	for range 300 {
		writeBatch(t, l, sizes(3, 40)...)
	}
	close(stop)
	wg.Wait()
	checkMirror(t, l, dir, "after concurrent compaction")
}
