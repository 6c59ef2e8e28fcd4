package execstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore/snapshot"
	"github.com/execstore/execstore/vfs"
)

// stateBytes is the encoding of the store's applied state: the encoding is
// deterministic, so equal bytes mean deep-equal states.
func stateBytes(t *testing.T, s *Store) []byte {
	t.Helper()
	var b bytes.Buffer
	s.rw.RLock()
	defer s.rw.RUnlock()
	if err := s.state.Encode(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestStoreRestoredFromASnapshotEqualsTheStoreItWasTakenFrom(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	opts := Options{Now: func() time.Time { return now }, NoSync: true, SegmentSize: 4096}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		s.Admit(ctx, AdmitRequest{ExecutionID: fmt.Sprintf("e-%03d", i), WorkflowID: "w", Params: []byte(`{"i":1}`), Context: map[string]string{"k": "v"}})
	}
	leases, _ := s.ClaimDue(ctx, 200, time.Minute)
	for i, l := range leases {
		s.SaveStep(ctx, l, "step", []byte(`"saved"`))
		s.Watch(ctx, l.ExecutionID, "key")
		switch i % 3 {
		case 0:
			s.Acknowledge(ctx, l, Completed([]byte(`{"r":1}`)))
		case 1:
			s.Start(ctx, l, "child", "c", []byte(`{"p":2}`))
			s.Acknowledge(ctx, l, Suspended())
		}
	}
	s.Commit(ctx, Write{Key: "other", Value: []byte(`1`)})
	if err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	want := stateBytes(t, s)
	s.Close()

	again, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if !bytes.Equal(want, stateBytes(t, again)) {
		t.Fatal("the restored state differs from the state the snapshot was taken from")
	}
	if err := again.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotCadenceGrowsWithTheState(t *testing.T) {
	o := Options{SnapshotEntries: 100_000, SnapshotWALBytes: 64 << 20}
	tests := []struct {
		name           string
		entries, bytes int
		records        int
		lastSize       int64
		want           bool
	}{
		{"small state, below both", 99_999, 1 << 20, 10_000, 0, false},
		{"small state, entries reached", 100_000, 1 << 20, 10_000, 0, true},
		{"small state, bytes reached", 10, 64 << 20, 10_000, 0, true},
		{"8M records need 1M entries", 999_999, 1 << 20, 8_000_000, 0, false},
		{"8M records, 1M entries", 1_000_000, 1 << 20, 8_000_000, 0, true},
		{"1 GiB snapshot needs 512 MiB of log", 10, 511 << 20, 10, 1 << 30, false},
		{"1 GiB snapshot, 512 MiB of log", 10, 512 << 20, 10, 1 << 30, true},
	}
	for _, tt := range tests {
		if got := snapshotDue(&o, tt.entries, tt.bytes, tt.records, tt.lastSize); got != tt.want {
			t.Errorf("%s: snapshotDue = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestStoreSnapshotsOnItsOwnAfterSnapshotEntries(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{NoSync: true, SnapshotEntries: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := 0; i < 49; i++ {
		s.Admit(ctx, AdmitRequest{ExecutionID: fmt.Sprintf("e-%03d", i), WorkflowID: "w"})
	}
	if infos, _ := snapshot.List(vfs.Default, s.snapshotDir()); len(infos) != 0 {
		t.Fatalf("%d snapshots after 49 commands, want none", len(infos))
	}
	s.Admit(ctx, AdmitRequest{ExecutionID: "e-049", WorkflowID: "w"})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		infos, err := snapshot.List(vfs.Default, s.snapshotDir())
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) == 1 && infos[0].Index == 50 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot at index 50 after 50 commands: %+v", infos)
		}
	}
}

// A steady stream of writes never starves Snapshot: the writer takes
// snapshot requests, and finished background snapshots, on every round, not
// only once its queue is empty. A thousand admissions queue behind a held
// writer that takes one per batch (MaxBatch 1, an fsync each); two snapshots
// asked for meanwhile are both taken long before the queue drains.
func TestSnapshotIsServedUnderASteadyLoad(t *testing.T) {
	dir := t.TempDir()
	g := openGated(t, dir, Options{MaxBatch: 1})
	s := g.s
	ctx := context.Background()
	const n = 1000
	g.hold("blocker")
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Admit(ctx, AdmitRequest{ExecutionID: fmt.Sprint("e", i), WorkflowID: "w"}); err != nil {
				t.Error(err)
			}
		}()
	}
	g.waitQueued(n)
	snapped := make(chan error, 1)
	go func() { snapped <- errors.Join(s.Snapshot(ctx), s.Snapshot(ctx)) }()
	g.let()
	if err := <-snapped; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	infos, err := snapshot.List(vfs.Default, filepath.Join(dir, "snapshots"))
	if err != nil || len(infos) != 2 {
		t.Fatalf("snapshots: %v, %v; want two", infos, err)
	}
	st, _ := s.Stats(ctx)
	// The second snapshot came well before the last of the admissions.
	if newest := infos[0].Index; newest+n/2 > st.WALLastIndex {
		t.Fatalf("the snapshots cover up to index %d of %d: they waited for the queue to drain", newest, st.WALLastIndex)
	}
}
