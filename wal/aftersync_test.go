package wal

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/execstore/execstore/internal/prealloc"
	"github.com/execstore/execstore/vfs"
)

// syncRecorder records the path of every file and directory synced on its filesystem, once
// the sync returned, and fails the nth (counting from 1) after its sync when failN is set.
type syncRecorder struct {
	paths []string
	failN int
}

// fs is the operating system's filesystem, recorded.
func (r *syncRecorder) fs() vfs.FS {
	return vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		if op.Kind != vfs.OpSynced {
			return nil
		}
		r.paths = append(r.paths, op.Path)
		if len(r.paths) == r.failN {
			return errInjected
		}
		return nil
	})
}

func (r *syncRecorder) take() []string {
	out := r.paths
	r.paths = nil
	return out
}

func TestAfterSyncNamesEveryFsyncedFileAndDirectory(t *testing.T) {
	dir := t.TempDir()
	rec := &syncRecorder{}
	l := openLog(t, dir, Options{SegmentSize: 400, FS: rec.fs()})
	defer closeLog(t, l)
	if got, want := rec.take(), []string{filepath.Dir(dir), dir}; !slices.Equal(got, want) {
		t.Fatalf("synced at the creation of a log = %q, want %q (the parent, then the log directory)", got, want)
	}

	writeBatch(t, l, 30)
	first := lastSegment(t, dir)
	if got, want := rec.take(), []string{first}; !slices.Equal(got, want) {
		t.Fatalf("synced after a Write within the tail segment = %q, want %q", got, want)
	}

	writeBatch(t, l, sizes(12, 30)...) // crosses SegmentSize: tidwall creates a segment
	if segs := segmentFiles(t, dir); len(segs) < 2 {
		t.Fatalf("the Write created no segment: %q", segs)
	}
	want := []string{first, lastSegment(t, dir), dir, filepath.Join(dir, prealloc.Name)}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("synced after a Write that created a segment = %q, want %q (the segment it closed, "+
			"by tidwall; the new tail; the directory; the next segment's file, prepared after the Write)", got, want)
	}

	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.take(), []string{lastSegment(t, dir), dir}; !slices.Equal(got, want) {
		t.Fatalf("synced after Sync = %q, want %q", got, want)
	}
}

func TestAfterSyncReportsTheRepairOfATornTail(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	writeBatch(t, l, 30, 30)
	closeLog(t, l)
	seg := lastSegment(t, dir)
	data := readFile(t, seg)
	writeFile(t, seg, data[:len(data)-5]) // the second entry is cut short

	rec := &syncRecorder{}
	l = openLog(t, dir, Options{FS: rec.fs()})
	defer closeLog(t, l)
	side := sideFiles(t, dir)
	if len(side) != 1 {
		t.Fatalf("side files = %q, want one", side)
	}
	// The marker the clean Close left names the segment's size before it was cut, so the
	// open is unclean: the repaired segment is rewritten too.
	want := []string{filepath.Dir(dir), filepath.Join(dir, side[0]), dir, seg, dir, seg + rewriteSuffix, dir, dir}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("synced during a torn-tail repair = %q, want %q (parent, side file, directory, segment, directory, rewritten segment, directory, directory at load)", got, want)
	}
}

// A write that created a segment and then failed its fsync leaves a segment
// file whose name may not be durable; the store reopens and appends to it.
// So every open fsyncs the log directory, not only the one that creates it.
func TestEveryOpenFsyncsTheLogDirectory(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	writeBatch(t, l, 30)
	closeLog(t, l)
	rec := &syncRecorder{}
	l = openLog(t, dir, Options{FS: rec.fs()})
	defer closeLog(t, l)
	if got, want := rec.take(), []string{filepath.Dir(dir), dir}; !slices.Equal(got, want) {
		t.Fatalf("synced at the reopen of a log = %q, want %q", got, want)
	}
}

func TestAfterSyncErrorFailStopsWithTheBatchDurable(t *testing.T) {
	dir := t.TempDir()
	rec := &syncRecorder{}
	l := openLog(t, dir, Options{FS: rec.fs()})
	acked := writeBatch(t, l, 30, 30)
	rec.failN = len(rec.paths) + 1 // the tail fsync of the next Write

	var b Batch
	b.Add(payloadOf(3, 30))
	if _, err := l.Write(&b); !errors.Is(err, ErrFailed) || !errors.Is(err, errInjected) {
		t.Fatalf("Write whose fsync's answer failed = %v, want ErrFailed wrapping the injected error", err)
	}
	if l.LastIndex() != 2 {
		t.Fatalf("LastIndex = %d after a failed Write, want 2", l.LastIndex())
	}
	var after Batch
	after.Add([]byte("after"))
	if _, err := l.Write(&after); !errors.Is(err, ErrFailed) {
		t.Fatalf("Write after a failed fsync's answer = %v, want ErrFailed", err)
	}
	closeLog(t, l)

	l = openLog(t, dir, Options{})
	defer closeLog(t, l)
	checkEntries(t, l, append(acked, entry{Index: 3, Payload: payloadOf(3, 30)}))
}
