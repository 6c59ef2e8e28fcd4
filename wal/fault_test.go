package wal

import (
	"bytes"
	"errors"
	"testing"

	"github.com/execstore/execstore/vfs"
)

// faultPlan fails, with errInjected, the nth operation on the log's filesystem that fail
// matches once the plan is armed (fail is given the log's directory; n counts from 1, and 0
// is 1).
type faultPlan struct {
	dir     string
	fail    func(dir string, op vfs.Op) bool
	n       int
	armed   bool
	matched int
}

// fs is the operating system's filesystem with the plan's fault.
func (p *faultPlan) fs() vfs.FS {
	return vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		if !p.armed || p.fail == nil || !p.fail(p.dir, op) {
			return nil
		}
		p.matched++
		if p.matched == max(p.n, 1) {
			return errInjected
		}
		return nil
	})
}

// Operations a faultPlan fails.
var (
	// firstWrite is the first write to a file: a Write's entries.
	firstWrite = func(_ string, op vfs.Op) bool { return op.Kind == vfs.OpWrite }
	// firstChange is the first change to a file or to the directory.
	firstChange = func(_ string, op vfs.Op) bool {
		return op.Kind != vfs.OpSync && op.Kind != vfs.OpSyncData && op.Kind != vfs.OpSynced
	}
	// tailSync is the fdatasync of the tail segment, a Write's or Sync's.
	tailSync = func(_ string, op vfs.Op) bool { return op.Kind == vfs.OpSyncData }
	// dirSync is the fsync of the log directory.
	dirSync = func(dir string, op vfs.Op) bool { return op.Kind == vfs.OpSync && op.Path == dir }
	// fileSync is the fsync of a file in it.
	fileSync = func(dir string, op vfs.Op) bool { return op.Kind == vfs.OpSync && op.Path != dir }
)

func TestStorageErrorFailStopsUntilReopen(t *testing.T) {
	failed := batchOf(3, 30) // the batch a failing Write tries to append
	tests := []struct {
		name          string
		fail          func(dir string, op vfs.Op) bool
		op            func(l *Log) error
		nothingLanded bool // the failure happened before anything reached the file
	}{
		{"write fails", firstWrite, writeOp(failed), true},
		{"segment fsync fails", tailSync, writeOp(failed), false},
		{"directory fsync after a new segment fails", dirSync, writeOp(batchOf(12, 30)), false},
		{"truncation fails", firstChange, func(l *Log) error { return l.TruncateFront(3) }, true},
		{"directory fsync after truncation fails", dirSync, func(l *Log) error { return l.TruncateFront(3) }, false},
		{"explicit sync fails", tailSync, func(l *Log) error { return l.Sync() }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			plan := &faultPlan{dir: dir, fail: tt.fail}
			opts := Options{SegmentSize: 400, FS: plan.fs()}
			l := openLog(t, dir, opts)
			var acked []entry
			for range 3 {
				acked = append(acked, writeBatch(t, l, 30, 30)...)
			}
			plan.armed = true

			err := tt.op(l)
			if !errors.Is(err, ErrFailed) || !errors.Is(err, errInjected) {
				t.Fatalf("failing operation = %v, want ErrFailed wrapping the injected error", err)
			}
			if l.LastIndex() != 6 {
				t.Fatalf("LastIndex = %d after a failure, want the acknowledged 6", l.LastIndex())
			}
			checkRefusesWrites(t, l)
			closeLog(t, l)

			l = openLog(t, dir, Options{SegmentSize: 400})
			defer closeLog(t, l)
			checkOnlyDurable(t, l, acked, tt.nothingLanded)
			writeBatch(t, l, 5) // a reopened log writes again
		})
	}
}

func batchOf(n, size int) *Batch {
	var b Batch
	for i := range n {
		b.Add(payloadOf(uint64(7+i), size))
	}
	return &b
}

func writeOp(b *Batch) func(l *Log) error {
	return func(l *Log) error {
		_, err := l.Write(b)
		return err
	}
}

func checkRefusesWrites(t *testing.T, l *Log) {
	t.Helper()
	var b Batch
	b.Add([]byte("after"))
	if _, err := l.Write(&b); !errors.Is(err, ErrFailed) || !errors.Is(err, errInjected) {
		t.Errorf("Write after a failure = %v, want ErrFailed", err)
	}
	if err := l.TruncateFront(2); !errors.Is(err, ErrFailed) {
		t.Errorf("TruncateFront after a failure = %v, want ErrFailed", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrFailed) {
		t.Errorf("Sync after a failure = %v, want ErrFailed", err)
	}
	if _, err := l.Read(6); err != nil {
		t.Errorf("Read of an acknowledged entry after a failure = %v", err)
	}
}

// checkOnlyDurable checks a reopened log: every acknowledged entry still in range is intact,
// and anything after them is a prefix of the failed batch (written to the page cache before
// its fsync failed), or nothing at all when the failure preceded the write.
func checkOnlyDurable(t *testing.T, l *Log, acked []entry, nothingLanded bool) {
	t.Helper()
	last := acked[len(acked)-1].Index
	got := replayAll(t, l)
	for _, e := range got {
		switch {
		case e.Index <= last && !bytes.Equal(e.Payload, acked[e.Index-1].Payload):
			t.Fatalf("acknowledged entry %d changed", e.Index)
		case e.Index > last && !bytes.Equal(e.Payload, payloadOf(7+e.Index-last-1, 30)):
			t.Fatalf("entry %d is not from the failed batch", e.Index)
		}
	}
	if l.LastIndex() < last || (nothingLanded && l.LastIndex() != last) {
		t.Fatalf("reopened log ends at %d; acknowledged %d (nothing landed: %v)", l.LastIndex(), last, nothingLanded)
	}
}
