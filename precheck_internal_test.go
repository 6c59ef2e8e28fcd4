package execstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore/vfs"
)

// batchGate holds the writer inside its WAL write each time it is armed, so
// that a test can look at what is answered while a batch is being written.
type batchGate struct {
	mu      sync.Mutex
	armed   bool
	held    chan struct{}
	release chan struct{}
}

func (g *batchGate) fs() vfs.FS {
	return atLogWrites(func() {
		g.mu.Lock()
		if !g.armed {
			g.mu.Unlock()
			return
		}
		g.armed = false
		held, release := g.held, g.release
		g.mu.Unlock()
		close(held)
		<-release
	})
}

// arm makes the next WAL write wait until release is closed; held is closed
// once it waits.
func (g *batchGate) arm() (held, release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed = true
	g.held, g.release = make(chan struct{}), make(chan struct{})
	return g.held, g.release
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("timed out waiting until %s", what)
	}
}

// A command that would change nothing is answered from the applied state as
// soon as the writer prechecks it, never logged: while the write of the
// batch it was queued with is still held, a duplicate admission, an idle
// claim, a wake that merges into an earlier one and a renewal of a lease
// that is not current have their answers, and the admission logged in that
// batch has not. The idle claim does not see that admission: it is
// linearized before the batch.
func TestANoOpIsAnsweredBeforeTheBatchItCameWithIsWritten(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)}
	gate := &batchGate{}
	s, err := Open(t.TempDir(), Options{NoSync: true, Now: clock.now, FS: gate.fs()})
	if err != nil {
		t.Fatal(err)
	}
	var releases []chan struct{}
	t.Cleanup(func() {
		for _, r := range releases {
			select {
			case <-r:
			default:
				close(r)
			}
		}
		s.Close()
	})
	ctx := context.Background()
	for _, id := range []string{"old", "sleeper"} {
		if _, err := s.Admit(ctx, AdmitRequest{ExecutionID: id, WorkflowID: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := s.ClaimDue(ctx, 10, time.Minute)
	if err != nil || len(leases) != 2 {
		t.Fatalf("ClaimDue = %+v, %v", leases, err)
	}
	stale := leases[0] // "old": a token never issued is not current
	stale.Token++
	if _, err := s.Acknowledge(ctx, leases[1], Suspended()); err != nil {
		t.Fatal(err)
	}
	wakeAt := clock.now().Add(time.Hour)
	if _, err := s.RequestWake(ctx, "sleeper", wakeAt); err != nil {
		t.Fatal(err)
	}
	// Nothing is due now: old is leased, sleeper waits an hour.

	held1, release1 := gate.arm()
	releases = append(releases, release1)
	blocker := make(chan error, 1)
	// The blocker is a commit: it makes nothing due.
	go func() { blocker <- s.Commit(ctx, Write{Key: "blocker", Value: []byte(`1`)}) }()
	waitClosed(t, held1, "the blocker's write is held")
	before, _ := s.Stats(ctx)

	answer := func(fn func() error) <-chan error {
		_, n, _ := s.in.state()
		ch := make(chan error, 1)
		go func() { ch <- fn() }()
		waitQueued(t, s, n+1) // queued in the order they are made
		return ch
	}
	admitted := answer(func() error { _, err := s.Admit(ctx, AdmitRequest{ExecutionID: "new", WorkflowID: "w"}); return err })
	noOps := map[string]<-chan error{
		"duplicate admission": answer(func() error {
			_, err := s.Admit(ctx, AdmitRequest{ExecutionID: "old", WorkflowID: "w"})
			if !errors.Is(err, ErrExecutionIDConflict) {
				return fmt.Errorf("err = %v, want ErrExecutionIDConflict", err)
			}
			return nil
		}),
		"idle claim": answer(func() error {
			got, err := s.ClaimDue(ctx, 10, time.Minute)
			if err != nil || len(got) != 0 {
				return fmt.Errorf("= %+v, %v; want nothing: new is not admitted before this batch", got, err)
			}
			return nil
		}),
		"merging wake": answer(func() error {
			res, err := s.RequestWake(ctx, "sleeper", wakeAt.Add(time.Hour))
			if err != nil || res != WakeRequested {
				return fmt.Errorf("= %q, %v; want requested", res, err)
			}
			return nil
		}),
		"renewal of a lease that is not current": answer(func() error {
			if _, err := s.Renew(ctx, stale, time.Minute); !errors.Is(err, ErrLeaseLost) {
				return fmt.Errorf("err = %v, want ErrLeaseLost", err)
			}
			return nil
		}),
	}

	held2, release2 := gate.arm()
	releases = append(releases, release2)
	close(release1)
	waitClosed(t, held2, "the next batch's write is held")
	for what, ch := range noOps {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(patience):
			t.Fatalf("%s was not answered while its batch was being written", what)
		}
	}
	select {
	case err := <-admitted:
		t.Fatalf("the admission was answered before its batch was written: %v", err)
	default:
	}
	close(release2)
	for _, ch := range []<-chan error{blocker, admitted} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(patience):
			t.Fatal("a logged command was never answered")
		}
	}
	after, _ := s.Stats(ctx)
	if got := after.WALLastIndex - before.WALLastIndex; got != 2 {
		t.Errorf("%d entries logged, want 2: the blocker and the admission; no no-op", got)
	}
	if got, err := s.ClaimDue(ctx, 10, time.Minute); err != nil || len(got) != 1 || got[0].ExecutionID != "new" {
		t.Errorf("a claim after the batch = %+v, %v; want new", got, err)
	}
}

// The writer cuts batches by count as well as by bytes: ten admissions queued
// behind a held writer with MaxBatch 4 are written as three batches.
func TestQueuedRequestsAreCutIntoBatchesByCount(t *testing.T) {
	g := openGated(t, t.TempDir(), Options{NoSync: true, MaxBatch: 4})
	ctx := context.Background()
	g.hold("blocker")
	before, _ := g.s.Stats(ctx)
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = g.s.Admit(ctx, AdmitRequest{ExecutionID: fmt.Sprint("e", i), WorkflowID: "w"})
		}()
	}
	g.waitQueued(n)
	g.let()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	after, _ := g.s.Stats(ctx)
	if got := after.WALBatches - before.WALBatches; got != 1+3 {
		t.Fatalf("%d batches, want the blocker's and 3 of at most 4 commands", got)
	}
	if got := after.WALLastIndex - before.WALLastIndex; got != 1+n {
		t.Fatalf("%d entries, want %d", got, 1+n)
	}
}

// Open fills in the defaults the manual and Options document.
func TestOpenTakesTheDocumentedDefaults(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"MaxBatch", s.opts.MaxBatch, 4096},
		{"MaxBatchBytes", s.opts.MaxBatchBytes, 64 << 20},
		{"SnapshotEntries", s.opts.SnapshotEntries, 100_000},
		{"SnapshotWALBytes", s.opts.SnapshotWALBytes, 64 << 20},
	} {
		if c.got != c.want {
			t.Errorf("Options.%s defaults to %d, documented as %d", c.name, c.got, c.want)
		}
	}
	if s.limits != DefaultLimits {
		t.Errorf("the limits of Options{} are %+v, want DefaultLimits %+v", s.limits, DefaultLimits)
	}
}
