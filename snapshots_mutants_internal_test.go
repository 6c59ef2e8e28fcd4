//go:build mutants

package execstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/execstore/execstore/internal/mutant"
	"github.com/execstore/execstore/snapshot"
	"github.com/execstore/execstore/vfs"
)

// Snapshot tests that break the state encoder with a switch of
// internal/mutant, which is a variable only in builds with the mutants tag:
// they run with `go test -tags mutants`.

// A snapshot the state encoder got wrong passes its own checksum; the
// read-back decodes it whole and refuses it BEFORE the older snapshots and
// the log behind them are removed, so nothing is lost.
func TestASnapshotThatDoesNotDecodeDeletesNothingOlder(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 2048}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admit := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := s.Admit(ctx, AdmitRequest{ExecutionID: fmt.Sprintf("e%03d", i), WorkflowID: "w", Params: []byte(`{"n":1}`)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	admit(0, 40)
	if err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	admit(40, 80)
	if err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	admit(80, 120)
	good, _ := snapshot.List(vfs.Default, filepath.Join(dir, "snapshots"))
	walFirst := s.commit.(*logCommitter).wal.FirstIndex()

	reset := mutant.Set(&mutant.EncodeSkipsLastRecord)
	err = s.Snapshot(ctx)
	reset()
	if !errors.Is(err, snapshot.ErrCorrupt) {
		t.Fatalf("Snapshot with a broken encoder: %v, want snapshot.ErrCorrupt", err)
	}
	if kept, _ := snapshot.List(vfs.Default, filepath.Join(dir, "snapshots")); !reflect.DeepEqual(kept, good) {
		t.Fatalf("snapshots after the refused one: %v, want %v", kept, good)
	}
	if got := s.commit.(*logCommitter).wal.FirstIndex(); got != walFirst {
		t.Fatalf("the log was compacted from %d to %d", walFirst, got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, opts); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if st, _ := s.Stats(ctx); st.Executions != 120 {
		t.Fatalf("%d executions after reopening, want 120", st.Executions)
	}
}

// A snapshot releases the copy of the state it was encoded from once it is
// written or has failed, so that the writer changes the records it shared in
// place again; and a snapshot taken after such changes still restores to the
// state it was taken from.
func TestASnapshotReleasesItsCopyOfTheState(t *testing.T) {
	dir := t.TempDir()
	opts := Options{NoSync: true}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 50 {
		if _, err := s.Admit(ctx, AdmitRequest{ExecutionID: fmt.Sprintf("e%02d", i), WorkflowID: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	copies := func() int {
		s.rw.RLock()
		defer s.rw.RUnlock()
		return s.state.Copies()
	}
	if err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if n := copies(); n != 0 {
		t.Fatalf("%d copies of the state outstanding after a snapshot, want 0", n)
	}
	reset := mutant.Set(&mutant.EncodeSkipsLastRecord)
	err = s.Snapshot(ctx)
	reset()
	if !errors.Is(err, snapshot.ErrCorrupt) {
		t.Fatalf("Snapshot with a broken encoder: %v, want snapshot.ErrCorrupt", err)
	}
	if n := copies(); n != 0 {
		t.Fatalf("%d copies of the state outstanding after a failed snapshot, want 0", n)
	}
	// Claim and settle records the released copies shared, then snapshot
	// and restore.
	leases, err := s.ClaimDue(ctx, 30, time.Minute)
	if err != nil || len(leases) != 30 {
		t.Fatalf("ClaimDue: %d leases, %v", len(leases), err)
	}
	acks := make([]Ack, 0, len(leases))
	for _, l := range leases[:20] {
		acks = append(acks, Ack{Lease: l, Outcome: Completed(nil)})
	}
	if _, err := s.AcknowledgeBatch(ctx, acks); err != nil {
		t.Fatal(err)
	}
	if err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	want := stateBytes(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := stateBytes(t, s); !bytes.Equal(got, want) {
		t.Fatal("the store reopened from its snapshot differs from the store it was taken from")
	}
}
