package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/vfs"
)

// The crash points among a store's filesystem operations are the steps of its durability
// protocol, in order: the log's fsyncs of the store directory and its own directory at Open;
// a write's first change, the fdatasync of its tail and, when it started a segment, the
// directory's fsync, and nothing else (neither tidwall's work inside the write nor the
// preparation of the next segment's file after it); the snapshot package's creation, fsync
// and rename of the temporary file between the fsyncs of the directories; and nothing at
// Close.
func TestCrashPointsAreTheStepsOfTheStoresProtocol(t *testing.T) {
	dir, err := filepath.Abs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ops []vfs.Op
	fs := vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		mu.Lock()
		ops = append(ops, op)
		mu.Unlock()
		return nil
	})
	now := func() time.Time { return simEpoch }
	s, err := execstore.Open(dir, execstore.Options{FS: fs, Now: now, SegmentSize: 4096, SnapshotEntries: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Past a quarter of the segment the next segment's file is prepared; past half, the next
	// write starts a segment on it, first fsyncing (tidwall) the tail it leaves.
	for i := range 5 {
		if err := s.Commit(ctx, execstore.Write{Key: "k", Value: []byte(`"` + strings.Repeat("v", 500+i) + `"`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var p points
	var got []string
	for _, op := range ops {
		rel, err := filepath.Rel(dir, op.Path)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = ""
		}
		if pt := p.classify(op, filepath.ToSlash(rel)); pt.ok {
			ev := pt.ev
			if pt.synced != "" {
				ev.path = pt.synced
			}
			if r, err := filepath.Rel(dir, ev.path); ev.path != "" && err == nil {
				ev.path = filepath.ToSlash(r)
			}
			got = append(got, ev.String())
		}
	}
	write := []string{"before-write", "before-sync", "after-sync wal/" + fmt.Sprintf("%020d", 1)}
	snap := "snapshots/snapshot-" + fmt.Sprintf("%020d", 5) + ".snap"
	want := slices.Concat(
		[]string{"before-sync", "after-sync .", "before-sync", "after-sync wal"}, // Open
		write, write, write, write,
		[]string{"before-write", "before-sync", "after-sync wal/" + fmt.Sprintf("%020d", 5), // a new segment
			"before-sync", "after-sync wal"},
		[]string{
			"snapshot before-sync .", "snapshot after-sync .",
			"snapshot before-write " + snap + ".tmp",
			"snapshot before-sync " + snap + ".tmp", "snapshot after-sync " + snap + ".tmp",
			"snapshot before-write " + snap,
			"snapshot before-sync snapshots", "snapshot after-sync snapshots",
		},
	)
	if !slices.Equal(got, want) {
		t.Fatalf("crash points:\n got %q\nwant %q", got, want)
	}
	taken := slices.ContainsFunc(ops, func(op vfs.Op) bool { return op.Kind == vfs.OpReuseForWrite })
	if !taken {
		t.Fatal("test premise: no segment was started on a prepared file")
	}
}
