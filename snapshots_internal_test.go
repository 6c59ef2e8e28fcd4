package execstore

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
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
