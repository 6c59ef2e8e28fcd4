package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/vfs"
	"github.com/execstore/execstore/wal"
	"github.com/google/go-cmp/cmp"
)

// snapshotFixture is a store with small WAL segments, so snapshots compact it.
func snapshotFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.s.Close()
	f.opts.SegmentSize = 2048
	f.opts.NoSync = false
	f.open()
	return f
}

// load admits n executions and moves some through their life.
func (f *fixture) load(prefix string, n int) {
	f.t.Helper()
	for i := 0; i < n; i++ {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("%s-%03d", prefix, i), WorkflowID: "w", Params: raw(`{"n":1}`)})
	}
	for i, l := range f.claim(n/2, time.Minute) {
		if i%2 == 0 {
			f.ack(l, execstore.Completed(raw(`"done"`)))
		} else {
			f.s.SaveStep(ctx, l, "s", raw(`1`))
		}
	}
}

// everything reads every record, step and key the loads made.
func (f *fixture) everything() map[string]any {
	f.t.Helper()
	out := map[string]any{}
	for _, prefix := range []string{"a", "b", "c", "d"} {
		for i := 0; i < 40; i++ {
			id := fmt.Sprintf("%s-%03d", prefix, i)
			if rec, err := f.s.Get(ctx, id); err == nil {
				out[id] = rec
				v, ok, _ := f.s.Step(ctx, id, "s")
				out[id+"/s"] = fmt.Sprint(string(v), ok)
			}
		}
	}
	return out
}

func snapshotFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(dir, "snapshots"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestSnapshotsKeepTheNewestTwoAndCompactTheLog(t *testing.T) {
	f := snapshotFixture(t)
	for i, prefix := range []string{"a", "b", "c"} {
		f.load(prefix, 40)
		if err := f.s.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		if got := len(snapshotFiles(t, f.dir)); got != min(i+1, 2) {
			t.Fatalf("after snapshot %d: %d files %v", i+1, got, snapshotFiles(t, f.dir))
		}
	}
	st := f.stats()
	if st.WALFirstIndex <= 1 {
		t.Fatalf("the log was not compacted: %+v", st)
	}
	names := snapshotFiles(t, f.dir)
	older := strings.TrimSuffix(strings.TrimPrefix(names[0], "snapshot-"), ".snap")
	olderIndex, err := strconv.ParseUint(older, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if st.WALFirstIndex > olderIndex+1 {
		t.Fatalf("the log was truncated past the older snapshot: first %d, older snapshot %d", st.WALFirstIndex, olderIndex)
	}
	f.load("d", 10) // after the last snapshot: only in the log
	want := f.everything()
	f.reopen()
	if diff := cmp.Diff(want, f.everything()); diff != "" {
		t.Fatalf("state after reopen (-want +got):\n%s", diff)
	}
}

func TestCorruptNewestSnapshotFallsBackToTheOlderOne(t *testing.T) {
	f := snapshotFixture(t)
	f.load("a", 40)
	f.s.Snapshot(ctx)
	f.load("b", 40)
	f.s.Snapshot(ctx)
	f.load("c", 20)
	want := f.everything()
	f.s.Close()
	f.s = nil
	names := snapshotFiles(t, f.dir)
	newest := filepath.Join(f.dir, "snapshots", names[len(names)-1])
	b, _ := os.ReadFile(newest)
	b[len(b)/2] ^= 0xff
	os.WriteFile(newest, b, 0o640)

	f.open()
	if diff := cmp.Diff(want, f.everything()); diff != "" {
		t.Fatalf("fallback lost data (-want +got):\n%s", diff)
	}
	if err := f.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// The unreadable snapshot is set aside, so that the next snapshot's
	// pruning keeps the good one it fell back on, not the unreadable one.
	if _, err := os.Stat(newest + ".unreadable"); err != nil {
		t.Fatalf("the unreadable snapshot was not set aside: %v", err)
	}
	good := names[len(names)-2]
	f.load("d", 10)
	if err := f.s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, name := range snapshotFiles(t, f.dir) {
		if strings.HasSuffix(name, ".snap") {
			kept = append(kept, name)
		}
	}
	if len(kept) != 2 || kept[0] != good {
		t.Fatalf("snapshots kept after the next one: %v, want %s and the new one", kept, good)
	}
}

func TestOpenRefusesWhenNoSnapshotCoversTheLog(t *testing.T) {
	f := snapshotFixture(t)
	for _, p := range []string{"a", "b", "c"} {
		f.load(p, 40)
		f.s.Snapshot(ctx)
	}
	if f.stats().WALFirstIndex <= 1 {
		t.Fatal("the log was not compacted")
	}
	f.s.Close()
	f.s = nil
	os.RemoveAll(filepath.Join(f.dir, "snapshots"))
	if _, err := execstore.Open(f.dir, f.opts); err == nil || !strings.Contains(err.Error(), "no valid snapshot") {
		t.Fatalf("Open without snapshots: err = %v, want a refusal", err)
	}
}

// A crash can stop snapshot writing and log compaction at any step. Each
// step's directory image is rebuilt here from the files of a real run, and
// every one must open with all the data.
func TestCrashAtEveryStepOfSnapshottingLosesNothing(t *testing.T) {
	f := snapshotFixture(t)
	f.load("a", 40)
	f.s.Snapshot(ctx)
	f.load("b", 40)
	before := copyDir(t, f.dir) // one snapshot; the next will compact the log
	f.s.Snapshot(ctx)
	f.load("c", 10)
	want := f.everything()
	f.s.Close()
	f.s = nil
	after := f.dir
	newest := snapshotFiles(t, after)
	newName := newest[len(newest)-1]
	newBytes, _ := os.ReadFile(filepath.Join(after, "snapshots", newName))
	walBefore := filepath.Join(before, "wal")

	images := map[string]func(dir string){
		// The new snapshot's temporary file is partly written.
		"temporary file half written": func(dir string) {
			os.WriteFile(filepath.Join(dir, "snapshots", newName+".tmp"), newBytes[:len(newBytes)/2], 0o640)
		},
		// Written and synced but not yet renamed.
		"temporary file complete": func(dir string) {
			os.WriteFile(filepath.Join(dir, "snapshots", newName+".tmp"), newBytes, 0o640)
		},
		// Renamed: both snapshots present, log not compacted.
		"renamed, log not compacted": func(dir string) {
			os.WriteFile(filepath.Join(dir, "snapshots", newName), newBytes, 0o640)
		},
		// tidwall's truncation wrote its START file, removed nothing yet.
		"truncation: START written": func(dir string) {
			os.WriteFile(filepath.Join(dir, "snapshots", newName), newBytes, 0o640)
			cut := truncationCut(t, walBefore, before)
			data, _ := os.ReadFile(filepath.Join(walBefore, cut))
			os.WriteFile(filepath.Join(dir, "wal", cut+".START"), data, 0o640)
		},
		// ...and removed the older segments, but not yet renamed START.
		"truncation: older segments removed": func(dir string) {
			os.WriteFile(filepath.Join(dir, "snapshots", newName), newBytes, 0o640)
			cut := truncationCut(t, walBefore, before)
			data, _ := os.ReadFile(filepath.Join(walBefore, cut))
			os.WriteFile(filepath.Join(dir, "wal", cut+".START"), data, 0o640)
			for _, s := range segments(t, walBefore) {
				if s <= cut {
					os.Remove(filepath.Join(dir, "wal", s))
				}
			}
		},
	}
	for name, build := range images {
		t.Run(name, func(t *testing.T) {
			dir := copyDir(t, before)
			build(dir)
			// The WAL entries written after `before` are durable in the
			// real run; bring them over for the images past the rename.
			copySegmentsFrom(t, after, dir)
			for run := 0; run < 2; run++ { // recovery itself can be rerun
				s, err := execstore.Open(dir, f.opts)
				if err != nil {
					t.Fatalf("run %d: Open: %v", run, err)
				}
				g := &fixture{t: t, s: s}
				if diff := cmp.Diff(want, g.everything()); diff != "" {
					t.Fatalf("run %d: state (-want +got):\n%s", run, diff)
				}
				if err := s.CheckInvariants(); err != nil {
					t.Fatal(err)
				}
				s.Close()
			}
		})
	}
}

// truncationCut is the segment the second snapshot's compaction truncates
// to: the newest one starting at or before the entry after the first
// snapshot (the older one kept).
func truncationCut(t *testing.T, walDir, storeDir string) string {
	t.Helper()
	names := snapshotFiles(t, storeDir)
	older, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(names[0], "snapshot-"), ".snap"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	keepFrom := fmt.Sprintf("%020d", older+1)
	cut := ""
	for _, s := range segments(t, walDir) {
		if s <= keepFrom {
			cut = s
		}
	}
	return cut
}

func segments(t *testing.T, dir string) []string {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if len(e.Name()) == 20 {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// copySegmentsFrom brings the log's tail from the finished run into an image:
// every segment at or after the image's last one is replaced by the finished
// run's copy (the entries are the same, the finished run has more).
func copySegmentsFrom(t *testing.T, from, to string) {
	t.Helper()
	have := segments(t, filepath.Join(to, "wal"))
	lastHave := ""
	if len(have) > 0 {
		lastHave = have[len(have)-1]
	}
	for _, s := range segments(t, filepath.Join(from, "wal")) {
		if s >= lastHave {
			data, _ := os.ReadFile(filepath.Join(from, "wal", s))
			os.WriteFile(filepath.Join(to, "wal", s), data, 0o640)
		}
	}
}

func TestSnapshotAfterCloseIsClosed(t *testing.T) {
	f := newFixture(t)
	s := f.s
	s.Close()
	f.s = nil
	if err := s.Snapshot(ctx); !errors.Is(err, execstore.ErrClosed) {
		t.Fatalf("Snapshot after Close: %v", err)
	}
}

func TestSnapshotOfAFailedStoreAnswersWithTheFailure(t *testing.T) {
	f := newFixture(t)
	f.s.Close()
	var broken atomic.Bool
	injected := errors.New("injected sync failure")
	f.opts.NoSync = false
	f.opts.FS = onLog(vfs.OpSyncData, func() error {
		if broken.Load() {
			return injected
		}
		return nil
	})
	f.open()
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	broken.Store(true)
	f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "x", WorkflowID: "w"})
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.s.Snapshot(c); !errors.Is(err, execstore.ErrStorageFailed) {
		t.Fatalf("Snapshot of a failed store: %v, want ErrStorageFailed", err)
	}
}

// fallbackFixture leaves a closed store with two kept snapshots and the log
// between them in several segments, and returns the two snapshots' indexes.
func fallbackFixture(t *testing.T) (f *fixture, older, newest uint64) {
	t.Helper()
	f = snapshotFixture(t)
	f.load("a", 40)
	if err := f.s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	// Enough between the two snapshots for a whole segment, wherever the
	// segments start.
	f.load("b", 60)
	if err := f.s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	f.load("c", 20)
	f.s.Close()
	f.s = nil
	names := snapshotFiles(t, f.dir)
	if len(names) != 2 {
		t.Fatalf("snapshots %v, want two", names)
	}
	index := func(name string) uint64 {
		n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, "snapshot-"), ".snap"), 10, 64)
		return n
	}
	return f, index(names[0]), index(names[1])
}

// damageSegmentBetween flips a byte in the middle of a WAL segment that lies
// wholly between the two snapshots, so that recovery from the newest never
// reads it, and returns the segment's name.
func damageSegmentBetween(t *testing.T, dir string, older, newest uint64) string {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(dir, "wal"))
	var starts []uint64
	for _, e := range entries {
		if n, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && len(e.Name()) == 20 {
			starts = append(starts, n)
		}
	}
	slices.Sort(starts)
	for i := 0; i+1 < len(starts); i++ {
		if starts[i] > older && starts[i+1] <= newest {
			path := filepath.Join(dir, "wal", fmt.Sprintf("%020d", starts[i]))
			b, _ := os.ReadFile(path)
			b[len(b)/2] ^= 0xff
			os.WriteFile(path, b, 0o640)
			return filepath.Base(path)
		}
	}
	t.Fatalf("no segment lies wholly between indexes %d and %d (segments %v)", older, newest, starts)
	return ""
}

// waitFallbackChecked polls Stats until the background check of the fallback
// path has finished.
func (f *fixture) waitFallbackChecked() execstore.Stats {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := f.stats()
		if st.FallbackChecked {
			return st
		}
		if time.Now().After(deadline) {
			f.t.Fatal("the fallback check did not finish")
		}
		time.Sleep(time.Millisecond)
	}
}

// The path recovery would fall back on is checked after Open: a clean one is
// reported clean.
func TestOpenChecksTheFallbackPath(t *testing.T) {
	f, _, _ := fallbackFixture(t)
	f.open()
	if st := f.waitFallbackChecked(); st.FallbackErr != nil {
		t.Fatalf("FallbackErr = %v on an undamaged store", st.FallbackErr)
	}
}

// A damaged entry in the log between the two kept snapshots is never read by
// a recovery from the newest; the check finds it at once, reports it, and the
// store takes a snapshot after which that part of the log is not needed. Had
// nobody looked, a lost newest snapshot would meet the damage only when
// falling back: Open then refuses, naming the entry.
func TestADamagedFallbackIsFoundAfterOpenNotWhenItIsNeeded(t *testing.T) {
	f, older, newest := fallbackFixture(t)
	want := func() map[string]any {
		f.open()
		defer func() { f.s.Close(); f.s = nil }()
		return f.everything()
	}()
	segment := damageSegmentBetween(t, f.dir, older, newest)

	f.open()
	st := f.waitFallbackChecked()
	var corrupt *wal.CorruptionError
	if !errors.As(st.FallbackErr, &corrupt) || corrupt.Segment != segment || corrupt.Index <= older || corrupt.Index > newest {
		t.Fatalf("FallbackErr = %v, want the damaged entry in segment %s, between %d and %d", st.FallbackErr, segment, older, newest)
	}
	if diff := cmp.Diff(want, f.everything()); diff != "" {
		t.Fatalf("state (-want +got):\n%s", diff)
	}
	// The snapshot taken on finding it makes the damaged part unneeded.
	deadline := time.Now().Add(10 * time.Second)
	for f.stats().WALFirstIndex <= corrupt.Index {
		if time.Now().After(deadline) {
			t.Fatalf("the log still starts at %d, before the damaged entry %d", f.stats().WALFirstIndex, corrupt.Index)
		}
		time.Sleep(time.Millisecond)
	}
	f.reopen()
	if st := f.waitFallbackChecked(); st.FallbackErr != nil {
		t.Fatalf("after the repairing snapshot: FallbackErr = %v", st.FallbackErr)
	}
	if diff := cmp.Diff(want, f.everything()); diff != "" {
		t.Fatalf("state after the repairing snapshot (-want +got):\n%s", diff)
	}
}

// Without the repairing snapshot, losing the newest snapshot as well makes
// recovery meet the damaged entry: Open refuses, naming it, rather than
// opening with commands missing.
func TestFallingBackOntoADamagedLogRefusesToOpen(t *testing.T) {
	f, older, newest := fallbackFixture(t)
	damageSegmentBetween(t, f.dir, older, newest)
	path := filepath.Join(f.dir, "snapshots", fmt.Sprintf("snapshot-%020d.snap", newest))
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0xff
	os.WriteFile(path, b, 0o640)
	s, err := execstore.Open(f.dir, f.opts)
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded on a damaged fallback")
	}
	if !wal.IsCorruption(err) {
		t.Fatalf("Open: %v, want a WAL corruption error", err)
	}
}

// Stats reports the writer's indexes about its log: the entry applied last
// (the log's last, an acknowledge-batch counted once) and the entry the
// newest snapshot covers, across a snapshot and a reopen.
func TestStatsReportTheAppliedAndSnapshotIndexes(t *testing.T) {
	f := snapshotFixture(t)
	f.load("a", 20)
	st := f.stats()
	if st.AppliedIndex != st.WALLastIndex || st.SnapshotIndex != 0 {
		t.Fatalf("before any snapshot: applied %d, log ends at %d, snapshot %d", st.AppliedIndex, st.WALLastIndex, st.SnapshotIndex)
	}
	// One entry holds several acknowledgements.
	leases := f.claim(6, time.Minute)
	acks := make([]execstore.Ack, len(leases))
	for i, l := range leases {
		acks[i] = execstore.Ack{Lease: l, Outcome: execstore.Completed(raw(`1`))}
	}
	if _, err := f.s.AcknowledgeBatch(ctx, acks); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	st = f.stats()
	if st.AppliedIndex != st.WALLastIndex || st.SnapshotIndex != st.AppliedIndex {
		t.Fatalf("after a snapshot: applied %d, log ends at %d, snapshot %d", st.AppliedIndex, st.WALLastIndex, st.SnapshotIndex)
	}
	snap := st.SnapshotIndex
	f.load("b", 5)
	f.reopen()
	st = f.stats()
	if st.AppliedIndex != st.WALLastIndex || st.SnapshotIndex != snap {
		t.Fatalf("after a reopen: applied %d, log ends at %d, snapshot %d, want %d", st.AppliedIndex, st.WALLastIndex, st.SnapshotIndex, snap)
	}
}
