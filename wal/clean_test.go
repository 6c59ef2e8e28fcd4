package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/execstore/execstore/vfs"
)

// rewroteTail reports whether the paths an Open synced show the last segment rewritten: its
// temporary copy fsynced, then the directory (the rename).
func rewroteTail(paths []string, dir, tail string) bool {
	i := slices.Index(paths, filepath.Join(dir, tail)+rewriteSuffix)
	return i >= 0 && i+1 < len(paths) && paths[i+1] == dir
}

func TestReopenAfterAStorageErrorRewritesTheTail(t *testing.T) {
	// The kernel cannot be made to drop pages here, so the test checks the mechanism: the
	// reopened log's last segment is a new file, holding what a read showed before the
	// reopen, that this package wrote and fsynced itself.
	tests := []struct {
		name string
		fail func(dir string, op vfs.Op) bool
		op   func(l *Log) error
	}{
		{"write fails", firstWrite, writeOp(batchOf(3, 30))},
		{"segment fsync fails", tailSync, writeOp(batchOf(3, 30))},
		{"directory fsync after a new segment fails", dirSync, writeOp(batchOf(12, 30))},
		{"explicit sync fails", tailSync, func(l *Log) error { return l.Sync() }},
		{"compaction fails", firstChange, func(l *Log) error { _, err := l.CompactTo(l.LastIndex()); return err }},
		{"the process stops without closing", nil, func(l *Log) error { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			plan := &faultPlan{dir: dir, fail: tt.fail}
			l := openLog(t, dir, Options{SegmentSize: 400, FS: plan.fs()})
			for range 6 {
				writeBatch(t, l, 30, 30)
			}
			plan.armed = true
			err := tt.op(l)
			if tt.fail != nil {
				if !errors.Is(err, ErrFailed) {
					t.Fatalf("failing operation = %v, want ErrFailed", err)
				}
				closeLog(t, l)
			} // else the Log is abandoned, as a process that stops leaves it
			tail := filepath.Base(lastSegment(t, dir))
			before, err := os.Stat(filepath.Join(dir, tail))
			if err != nil {
				t.Fatal(err)
			}
			shown := readFile(t, filepath.Join(dir, tail))

			rec := &syncRecorder{}
			l = openLog(t, dir, Options{SegmentSize: 400, FS: rec.fs()})
			defer closeLog(t, l)
			if paths := rec.take(); !rewroteTail(paths, dir, tail) {
				t.Fatalf("synced at the reopen = %q: the last segment %s was not rewritten", paths, tail)
			}
			after, err := os.Stat(filepath.Join(dir, tail))
			if err != nil {
				t.Fatal(err)
			}
			if os.SameFile(before, after) {
				t.Fatal("the last segment is the same file as before the reopen")
			}
			if got := readFile(t, filepath.Join(dir, tail)); !bytes.Equal(got, shown) {
				t.Fatalf("the rewritten segment holds %d bytes, a read showed %d before", len(got), len(shown))
			}
			if leftovers := strays(t, dir, "*.TEMP"); len(leftovers) != 0 {
				t.Fatalf("temporary files left: %v", leftovers)
			}
			replayAll(t, l)
		})
	}
}

func TestCleanCloseMarkerVouchesOnlyForTheTailItNames(t *testing.T) {
	tests := []struct {
		name    string
		change  func(t *testing.T, dir, tail string) // after a clean Close
		noSync  bool
		rewrite bool
	}{
		{"clean close", func(*testing.T, string, string) {}, false, false},
		{"no marker, as an earlier version leaves the log", func(t *testing.T, dir, _ string) {
			if err := os.Remove(filepath.Join(dir, cleanMarkerName)); err != nil {
				t.Fatal(err)
			}
		}, false, true},
		{"the tail grew after the close", func(t *testing.T, dir, tail string) {
			path := filepath.Join(dir, tail)
			writeFile(t, path, append(readFile(t, path), 0))
		}, false, true},
		{"the marker names another segment", func(t *testing.T, dir, tail string) {
			writeFile(t, filepath.Join(dir, cleanMarkerName), []byte("tail 00000000000000000001 0\n"))
		}, false, true},
		{"the marker does not parse", func(t *testing.T, dir, _ string) {
			writeFile(t, filepath.Join(dir, cleanMarkerName), []byte("tail"))
		}, false, true},
		{"no marker but NoSync, which promises nothing", func(t *testing.T, dir, _ string) {
			if err := os.Remove(filepath.Join(dir, cleanMarkerName)); err != nil {
				t.Fatal(err)
			}
		}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentSize: 400}
			l := openLog(t, dir, opts)
			want := writeBatch(t, l, sizes(9, 30)...)
			closeLog(t, l)
			tail := filepath.Base(lastSegment(t, dir))
			if tail == segmentName(1) {
				t.Fatal("want more than one segment")
			}
			tt.change(t, dir, tail)

			rec := &syncRecorder{}
			l = openLog(t, dir, Options{SegmentSize: 400, NoSync: tt.noSync, FS: rec.fs()})
			if got := rewroteTail(rec.take(), dir, tail); got != tt.rewrite {
				t.Fatalf("rewrote the last segment: %v, want %v", got, tt.rewrite)
			}
			if _, err := os.Stat(filepath.Join(dir, cleanMarkerName)); !os.IsNotExist(err) {
				t.Fatalf("the marker is still there after Open (%v): a crash from now on would be taken for a clean stop", err)
			}
			if l.TailRepair() == nil {
				checkEntries(t, l, want)
			}
			closeLog(t, l)
			if got := string(readFile(t, filepath.Join(dir, cleanMarkerName))); got != "tail "+tail+" "+
				strconv.Itoa(len(readFile(t, filepath.Join(dir, tail))))+"\n" {
				t.Fatalf("marker after a clean Close = %q", got)
			}
		})
	}
}

func TestFailStoppedLogLeavesNoCleanMarker(t *testing.T) {
	dir := t.TempDir()
	plan := &faultPlan{dir: dir, fail: tailSync}
	l := openLog(t, dir, Options{FS: plan.fs()})
	writeBatch(t, l, 30)
	plan.armed = true
	if _, err := l.Write(batchOf(2, 30)); !errors.Is(err, ErrFailed) {
		t.Fatalf("Write = %v, want ErrFailed", err)
	}
	closeLog(t, l)
	if _, err := os.Stat(filepath.Join(dir, cleanMarkerName)); !os.IsNotExist(err) {
		t.Fatalf("a fail-stopped log left a clean-close marker (%v)", err)
	}
}

func TestCrashDuringTheTailRewriteLosesNothing(t *testing.T) {
	// A copy of the directory at every operation of the reopen on its filesystem, and, once
	// the temporary file is renamed, one where the rename is lost (the old file back, the
	// temporary one whole).
	dir := t.TempDir()
	opts := Options{SegmentSize: 400}
	l := openLog(t, dir, opts)
	want := writeBatch(t, l, sizes(9, 30)...)
	want = append(want, writeBatch(t, l, 30, 30)...)
	// The process stops: no Close, no marker; the next segment's file was prepared.
	abandon(l)
	tail := filepath.Base(lastSegment(t, dir))
	old := readFile(t, filepath.Join(dir, tail))

	original, err := os.Stat(filepath.Join(dir, tail))
	if err != nil {
		t.Fatal(err)
	}
	var copies []crashCopy
	renameDurable, opening := false, true
	capture := func(op vfs.Op) error {
		if !opening {
			return nil
		}
		copies = append(copies, crashCopy{op.Kind.String() + " " + filepath.Base(op.Path), copyDir(t, dir)})
		cur, err := os.Stat(filepath.Join(dir, tail))
		if err != nil {
			t.Fatal(err)
		}
		renamed := !os.SameFile(original, cur)
		if renamed && op.Kind == vfs.OpSync && !renameDurable {
			lost := copyDir(t, dir)
			writeFile(t, filepath.Join(lost, tail+rewriteSuffix), readFile(t, filepath.Join(dir, tail)))
			writeFile(t, filepath.Join(lost, tail), old)
			copies = append(copies, crashCopy{op.Kind.String() + " " + filepath.Base(op.Path) + ", the rename lost", lost})
		}
		if renamed && op.Kind == vfs.OpSynced && op.Path == dir {
			renameDurable = true
		}
		return nil
	}
	l = openLog(t, dir, Options{SegmentSize: 400, FS: vfs.WithFaults(vfs.Default, capture)})
	opening = false
	closeLog(t, l)
	// The log directory made (1), the parent's fsync (2), the removal of the prepared file the
	// stopped log left (1) and the directory's fsync (2), the rewrite (the copy created and
	// written 2, its fsync 2, its rename 1, the directory's fsync 2 and the lost rename 1),
	// tidwall's making of the directory (1), the directory's fsync at load (2), and the next
	// segment's file prepared (created and written 2, fsynced 2).
	if len(copies) != 21 {
		t.Fatalf("captured %d states, want 21", len(copies))
	}
	for i, c := range copies {
		t.Run(strconv.Itoa(i)+" "+c.name, func(t *testing.T) {
			rec := &syncRecorder{}
			l := openLog(t, c.dir, Options{SegmentSize: 400, FS: rec.fs()})
			defer closeLog(t, l)
			if !rewroteTail(rec.take(), c.dir, tail) {
				t.Fatal("the open after a crash did not rewrite the last segment")
			}
			checkEntries(t, l, want)
			if leftovers := strays(t, c.dir, "*.TEMP"); len(leftovers) != 0 {
				t.Fatalf("temporary files left: %v", leftovers)
			}
		})
	}
}
