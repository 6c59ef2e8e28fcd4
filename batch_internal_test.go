package execstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// A batch shares an fsync, never a fate: one caller's conflict never fails
// another's (the gap Loom ADR 0103 documents). Sixteen callers race for one
// ID inside one batch, so the conflicts are found within it, not against an
// earlier batch.
func TestBatchedConflictFailsOnlyItsOwnCaller(t *testing.T) {
	gate := newWriterGate()
	s, err := Open(t.TempDir(), Options{FS: gate.fs()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	before, _ := s.Stats(ctx)

	const n = 64
	type answer struct {
		id  string
		err error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	admit := func(i int, req AdmitRequest) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := s.Admit(ctx, req)
			answers[i] = answer{id, err}
		}()
	}
	gate.arm()
	admit(0, AdmitRequest{ExecutionID: "first", WorkflowID: "w"})
	gate.waitHeld(t)
	fresh, dups := 0, 0
	for i := 1; i < n; i++ {
		req := AdmitRequest{ExecutionID: fmt.Sprintf("fresh-%d", i), WorkflowID: "w"}
		switch i % 4 {
		case 1:
			req.ExecutionID = "dup" // sixteen callers race for one ID
			dups++
		case 2:
			req.Params = []byte(`[not json`) // refused before it is queued
		default:
			fresh++
		}
		admit(i, req)
	}
	queued := fresh + dups
	waitQueued(t, s, queued)
	gate.open()
	wg.Wait()

	dupWins := 0
	for i, a := range answers {
		switch {
		case i%4 == 1:
			if a.err == nil {
				dupWins++
			} else if !errors.Is(a.err, ErrExecutionIDConflict) {
				t.Errorf("caller %d (dup): %v", i, a.err)
			}
		case i%4 == 2:
			if !errors.Is(a.err, ErrInvalidExecutionEvent) {
				t.Errorf("caller %d (invalid): %v", i, a.err)
			}
		default:
			if a.err != nil {
				t.Errorf("caller %d (fresh) failed because of its batch: %v", i, a.err)
			}
		}
	}
	if dupWins != 1 {
		t.Errorf("%d callers admitted the duplicate ID, want exactly 1", dupWins)
	}
	after, _ := s.Stats(ctx)
	if got := after.WALBatches - before.WALBatches; got != 2 {
		t.Errorf("%d WAL batches, want 2: the held one, then the %d queued admissions together", got, queued)
	}
	if want := 1 + fresh + 1; after.Executions != want {
		t.Errorf("%d executions, want %d: first, the fresh ones and one dup", after.Executions, want)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
