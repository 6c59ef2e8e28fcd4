package wal

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// syncRecorder records the paths AfterSync reports and fails the nth call (counting from 1)
// when failN is set.
type syncRecorder struct {
	paths []string
	failN int
}

func (r *syncRecorder) faults() *Faults {
	return &Faults{AfterSync: func(path string) error {
		r.paths = append(r.paths, path)
		if len(r.paths) == r.failN {
			return errInjected
		}
		return nil
	}}
}

func (r *syncRecorder) take() []string {
	out := r.paths
	r.paths = nil
	return out
}

func TestAfterSyncNamesEveryFsyncedFileAndDirectory(t *testing.T) {
	dir := t.TempDir()
	rec := &syncRecorder{}
	l := openLog(t, dir, Options{SegmentSize: 400, Faults: rec.faults()})
	defer closeLog(t, l)
	if got, want := rec.take(), []string{filepath.Dir(dir), dir}; !slices.Equal(got, want) {
		t.Fatalf("AfterSync at the creation of a log = %q, want %q (the parent, then the log directory)", got, want)
	}

	writeBatch(t, l, 30)
	if got, want := rec.take(), []string{lastSegment(t, dir)}; !slices.Equal(got, want) {
		t.Fatalf("AfterSync after a Write within the tail segment = %q, want %q", got, want)
	}

	writeBatch(t, l, sizes(12, 30)...) // crosses SegmentSize: tidwall creates a segment
	if got, want := rec.take(), []string{lastSegment(t, dir), dir}; !slices.Equal(got, want) {
		t.Fatalf("AfterSync after a Write that created a segment = %q, want %q (the new tail, then the directory)", got, want)
	}
	if segs := segmentFiles(t, dir); len(segs) < 2 {
		t.Fatalf("the Write created no segment: %q", segs)
	}

	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.take(), []string{lastSegment(t, dir), dir}; !slices.Equal(got, want) {
		t.Fatalf("AfterSync after Sync = %q, want %q", got, want)
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
	l = openLog(t, dir, Options{Faults: rec.faults()})
	defer closeLog(t, l)
	side := sideFiles(t, dir)
	if len(side) != 1 {
		t.Fatalf("side files = %q, want one", side)
	}
	// The marker the clean Close left names the segment's size before it was cut, so the
	// open is unclean: the repaired segment is rewritten too.
	want := []string{filepath.Dir(dir), filepath.Join(dir, side[0]), dir, seg, dir, seg + rewriteSuffix, dir, dir}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("AfterSync during a torn-tail repair = %q, want %q (parent, side file, directory, segment, directory, rewritten segment, directory, directory at load)", got, want)
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
	l = openLog(t, dir, Options{Faults: rec.faults()})
	defer closeLog(t, l)
	if got, want := rec.take(), []string{filepath.Dir(dir), dir}; !slices.Equal(got, want) {
		t.Fatalf("AfterSync at the reopen of a log = %q, want %q", got, want)
	}
}

func TestAfterSyncErrorFailStopsWithTheBatchDurable(t *testing.T) {
	dir := t.TempDir()
	rec := &syncRecorder{}
	l := openLog(t, dir, Options{Faults: rec.faults()})
	acked := writeBatch(t, l, 30, 30)
	rec.failN = len(rec.paths) + 1 // the tail fsync of the next Write

	var b Batch
	b.Add(payloadOf(3, 30))
	if _, err := l.Write(&b); !errors.Is(err, ErrFailed) || !errors.Is(err, errInjected) {
		t.Fatalf("Write whose AfterSync failed = %v, want ErrFailed wrapping the injected error", err)
	}
	if l.LastIndex() != 2 {
		t.Fatalf("LastIndex = %d after a failed Write, want 2", l.LastIndex())
	}
	var after Batch
	after.Add([]byte("after"))
	if _, err := l.Write(&after); !errors.Is(err, ErrFailed) {
		t.Fatalf("Write after a failed AfterSync = %v, want ErrFailed", err)
	}
	closeLog(t, l)

	l = openLog(t, dir, Options{})
	defer closeLog(t, l)
	checkEntries(t, l, append(acked, entry{Index: 3, Payload: payloadOf(3, 30)}))
}
