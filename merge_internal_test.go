package execstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Concurrent Acknowledge calls that land in one batch are logged as one
// acknowledge-batch entry, and each caller still gets exactly its own answer.
func TestConcurrentAcknowledgementsShareOneEntry(t *testing.T) {
	dir := t.TempDir()
	gate := newWriterGate() // holds the writer so that the acknowledgements queue up behind it
	s, err := Open(dir, Options{NoSync: true, FS: gate.fs()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	ctx := context.Background()
	const n = 30
	for i := 0; i < n; i++ {
		if _, err := s.Admit(ctx, AdmitRequest{ExecutionID: fmt.Sprintf("e%02d", i), WorkflowID: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := s.ClaimDue(ctx, n, time.Hour)
	if err != nil || len(leases) != n {
		t.Fatalf("ClaimDue: %d leases, %v", len(leases), err)
	}

	gate.arm()
	blocked := make(chan error, 1)
	go func() { _, err := s.Admit(ctx, AdmitRequest{ExecutionID: "blocker", WorkflowID: "w"}); blocked <- err }()
	gate.waitHeld(t)
	before, _ := s.Stats(ctx)

	// Every third lease is stale (ErrLeaseLost, not logged); the others
	// complete, fail or suspend.
	outcome := func(i int) RunOutcome {
		switch i % 3 {
		case 0:
			return Completed([]byte(fmt.Sprintf(`{"i":%d}`, i)))
		case 1:
			return Failed(&WorkflowError{Name: "E", Message: fmt.Sprint(i)})
		}
		return Suspended()
	}
	type answer struct {
		rec Record
		err error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i, l := range leases {
		if i%3 == 2 {
			l.Token++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].rec, answers[i].err = s.Acknowledge(ctx, l, outcome(i))
		}()
	}
	waitQueued(t, s, n)
	gate.open()
	wg.Wait()
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}

	after, _ := s.Stats(ctx)
	if got := after.WALLastIndex - before.WALLastIndex; got != 2 {
		t.Errorf("%d WAL entries for the blocker and %d acknowledgements, want 2", got, n)
	}
	check := func(when string, get func(id string) (Record, error)) {
		t.Helper()
		for i, l := range leases {
			rec, err := get(l.ExecutionID)
			if err != nil {
				t.Fatal(err)
			}
			want := map[int]Status{0: StatusCompleted, 1: StatusFailed, 2: StatusAdmitted}[i%3]
			if rec.ExecutionID != l.ExecutionID || rec.Status != want {
				t.Errorf("%s: %s is %s, want %s", when, l.ExecutionID, rec.Status, want)
			}
		}
	}
	check("answers", func(id string) (Record, error) {
		var i int
		fmt.Sscanf(id, "e%d", &i)
		if a := answers[i]; i%3 == 2 {
			if !errors.Is(a.err, ErrLeaseLost) {
				return Record{}, fmt.Errorf("stale lease of %s: err = %v, want ErrLeaseLost", id, a.err)
			}
			return s.Get(ctx, id)
		}
		return answers[i].rec, answers[i].err
	})
	if rec, err := s.Await(ctx, "e00"); err != nil || rec.Status != StatusCompleted || string(rec.Outcome.Result) != `{"i":0}` {
		t.Fatalf("Await(e00) = %+v, %v", rec, err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(dir, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	check("after reopen", func(id string) (Record, error) { return s.Get(ctx, id) })
}
