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
	f.opts.WALFaults = &wal.Faults{BeforeSync: func() error {
		if broken.Load() {
			return injected
		}
		return nil
	}}
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
