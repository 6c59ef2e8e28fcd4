package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/vfs"
)

func TestStorageFailureStopsEveryWriteUntilReopened(t *testing.T) {
	for _, where := range []string{"write", "sync"} {
		t.Run(where, func(t *testing.T) {
			f := newFixture(t)
			f.s.Close()
			var broken atomic.Bool
			injected := errors.New("injected " + where + " failure")
			fault := func() error {
				if broken.Load() {
					return injected
				}
				return nil
			}
			f.opts.NoSync = false
			f.opts.FS = onLog(vfs.OpWrite, fault)
			if where == "sync" {
				f.opts.FS = onLog(vfs.OpSyncData, fault)
			}
			f.open()
			f.admit(execstore.AdmitRequest{ExecutionID: "kept", WorkflowID: "w"})
			l := f.claimOne("kept")

			broken.Store(true)
			_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "lost", WorkflowID: "w"})
			if !errors.Is(err, execstore.ErrStorageFailed) || !errors.Is(err, injected) {
				t.Fatalf("Admit during the fault: err = %v, want ErrStorageFailed wrapping the cause", err)
			}
			broken.Store(false) // the disk "recovers", the store must not pretend it did
			_, err = f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "after", WorkflowID: "w"})
			if !errors.Is(err, execstore.ErrStorageFailed) || !errors.Is(err, injected) {
				t.Fatalf("Admit after the fault: err = %v, want ErrStorageFailed", err)
			}
			if _, err := f.s.ClaimDue(ctx, 10, time.Minute); !errors.Is(err, execstore.ErrStorageFailed) {
				t.Fatalf("ClaimDue after the fault: err = %v", err)
			}
			// Every other write too, no-ops included.
			writes := map[string]error{"Commit": f.s.Commit(ctx, execstore.Write{Key: "k", Value: raw(`1`)}),
				"SaveStep": f.s.SaveStep(ctx, l, "s", raw(`1`)), "Release": f.s.Release(ctx, l, 0), "Snapshot": f.s.Snapshot(ctx)}
			_, writes["RequestWake"] = f.s.RequestWake(ctx, "kept", t0.Add(time.Hour))
			_, writes["Watch"] = f.s.Watch(ctx, "kept", "k")
			_, writes["Renew"] = f.s.Renew(ctx, l, time.Minute)
			_, writes["Acknowledge"] = f.s.Acknowledge(ctx, l, execstore.Suspended())
			_, writes["AcknowledgeBatch"] = f.s.AcknowledgeBatch(ctx, []execstore.Ack{{Lease: l, Outcome: execstore.Suspended()}})
			_, writes["Start"] = f.s.Start(ctx, l, "child", "w", nil)
			_, writes["Admit (a duplicate)"] = f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "kept", WorkflowID: "w"})
			for op, err := range writes {
				if !errors.Is(err, execstore.ErrStorageFailed) || !errors.Is(err, injected) {
					t.Errorf("%s after the fault: err = %v, want ErrStorageFailed wrapping the cause", op, err)
				}
			}
			if st := f.stats(); !errors.Is(st.Failed, injected) {
				t.Fatalf("Stats.Failed = %v", st.Failed)
			}
			if _, err := f.s.Get(ctx, "kept"); err != nil {
				t.Fatalf("reads must keep working: %v", err)
			}
			if _, err := f.s.Get(ctx, "lost"); !errors.Is(err, execstore.ErrExecutionNotFound) {
				t.Fatalf("the failed admission was applied: %v", err)
			}
			f.reopen()
			f.admit(execstore.AdmitRequest{ExecutionID: "after", WorkflowID: "w"})
			f.get("kept")
		})
	}
}

func TestStoreTimeNeverGoesBackwardsAcrossRestarts(t *testing.T) {
	f := newFixture(t)
	f.clock.Set(t0.Add(time.Hour))
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w"})
	f.clock.Set(t0) // the clock jumps back
	f.admit(execstore.AdmitRequest{ExecutionID: "b", WorkflowID: "w"})
	if rec := f.get("b"); rec.AdmittedAt.Before(t0.Add(time.Hour)) {
		t.Fatalf("b admitted at %v, before a", rec.AdmittedAt)
	}
	f.reopen()
	f.admit(execstore.AdmitRequest{ExecutionID: "c", WorkflowID: "w"})
	if rec := f.get("c"); rec.AdmittedAt.Before(t0.Add(time.Hour)) {
		t.Fatalf("after restart c admitted at %v, before a", rec.AdmittedAt)
	}
}

func TestClosedStoreRefusesEverything(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	waiting := f.awaitWaiting("e")
	due := f.s.DueChanged()
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	if a := f.answer(waiting); !errors.Is(a.err, execstore.ErrClosed) {
		t.Fatalf("Await across Close: %v", a.err)
	}
	select { // whoever waits for work hears that the store closed
	case <-due:
	default:
		t.Fatal("Close left DueChanged open")
	}
	s := f.s
	f.s = nil
	checks := map[string]error{"Close": s.Close(), "Commit": s.Commit(ctx)}
	_, checks["Admit"] = s.Admit(ctx, execstore.AdmitRequest{WorkflowID: "w"})
	_, checks["Get"] = s.Get(ctx, "e")
	_, checks["ClaimDue"] = s.ClaimDue(ctx, 1, time.Minute)
	_, checks["RequestWake"] = s.RequestWake(ctx, "e", t0)
	_, _, checks["Read"] = s.Read(ctx, "k")
	_, checks["Await"] = s.Await(ctx, "e")
	_, checks["AcknowledgeBatch"] = s.AcknowledgeBatch(ctx, []execstore.Ack{{Lease: execstore.Lease{ExecutionID: "e", Token: 1}, Outcome: execstore.Suspended()}})
	for op, err := range checks {
		if !errors.Is(err, execstore.ErrClosed) {
			t.Errorf("%s after Close: err = %v, want ErrClosed", op, err)
		}
	}
}

func TestDirectoryIsLockedWhileOpen(t *testing.T) {
	f := newFixture(t)
	if _, err := execstore.Open(f.dir, f.opts); err == nil {
		t.Fatal("a second Open of the same directory succeeded")
	}
	f.reopen() // and released on Close
}

func TestAwaitReturnsTheTerminalRecordAcrossRestarts(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.reopen()
	waiting := f.awaitWaiting("e")
	f.ack(f.claimOne("e"), execstore.Completed(raw(`"ok"`)))
	if a := f.answer(waiting); a.err != nil || a.rec.Status != execstore.StatusCompleted || string(a.rec.Outcome.Result) != `"ok"` {
		t.Fatalf("Await = %+v, %v", a.rec, a.err)
	}
	// Already terminal: at once.
	if rec, err := f.s.Await(ctx, "e"); err != nil || rec.Status != execstore.StatusCompleted {
		t.Fatalf("Await of a terminal record = %+v, %v", rec, err)
	}
	if _, err := f.s.Await(ctx, "ghost"); !errors.Is(err, execstore.ErrExecutionNotFound) {
		t.Fatalf("Await(ghost): %v", err)
	}
	c, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	defer cancel()
	f.admit(execstore.AdmitRequest{ExecutionID: "never", WorkflowID: "w"})
	if _, err := f.s.Await(c, "never"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Await with a deadline: %v", err)
	}
}

// Many goroutines admitting, waking, claiming, renewing, saving steps,
// acknowledging and committing at once; run with -race. Every answer is a
// success or the one error the operation may give here (the clock never
// moves, so no lease expires and none can be lost); afterwards the stats
// count exactly the admissions and completions that succeeded, and the
// invariants hold, again after a restart.
func TestConcurrentWorkersKeepTheInvariants(t *testing.T) {
	f := newFixture(t)
	const workers, rounds = 16, 150
	var wg sync.WaitGroup
	var admitted, completed atomic.Int64
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; i < rounds; i++ {
				id := fmt.Sprintf("e-%d", rng.IntN(200))
				var err error
				switch rng.IntN(6) {
				case 0:
					if _, err = f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w", Params: raw(`{"i":1}`)}); err == nil {
						admitted.Add(1)
					}
					err = unexpected("Admit", err, execstore.ErrExecutionIDConflict)
				case 1:
					_, err = f.s.RequestWake(ctx, id, f.clock.Now())
					err = unexpected("RequestWake", err, execstore.ErrExecutionNotFound)
				case 2:
					_, err = f.s.Watch(ctx, id, "k")
					err = unexpected("Watch", err, execstore.ErrExecutionNotFound)
				case 3:
					err = unexpected("Commit", f.s.Commit(ctx, execstore.Write{Key: "k", Value: raw(`1`)}), nil)
				default:
					err = work(f, rng, &completed)
				}
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if err := f.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	before := f.stats()
	if before.Executions != int(admitted.Load()) || before.Terminal != int(completed.Load()) {
		t.Fatalf("stats = %+v after %d admissions and %d completions", before, admitted.Load(), completed.Load())
	}
	f.reopen()
	if err := f.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	after := f.stats()
	if before.Executions != after.Executions || before.Terminal != after.Terminal || before.Pending != after.Pending {
		t.Fatalf("stats changed across restart: %+v -> %+v", before, after)
	}
	t.Logf("%d executions, %d completed", after.Executions, completed.Load())
}

// unexpected returns op's error unless it is nil or matches allowed.
func unexpected(op string, err, allowed error) error {
	if err == nil || (allowed != nil && errors.Is(err, allowed)) {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}

// work claims what is due and runs each lease to its acknowledgement, as a
// worker of TestConcurrentWorkersKeepTheInvariants: every call on a lease must
// succeed, and the acknowledgement must record the outcome's status.
func work(f *fixture, rng *rand.Rand, completed *atomic.Int64) error {
	leases, err := f.s.ClaimDue(ctx, 4, time.Minute)
	if err != nil {
		return unexpected("ClaimDue", err, nil)
	}
	for _, l := range leases {
		if _, err := f.s.Renew(ctx, l, time.Minute); err != nil {
			return unexpected("Renew", err, nil)
		}
		if err := f.s.SaveStep(ctx, l, "s", raw(`1`)); err != nil {
			return unexpected("SaveStep", err, nil)
		}
		outcome := execstore.Suspended()
		if rng.IntN(2) == 0 {
			outcome = execstore.Completed(raw(`true`))
		}
		rec, err := f.s.Acknowledge(ctx, l, outcome)
		if err != nil {
			return unexpected("Acknowledge", err, nil)
		}
		if rec.Status != outcome.Status {
			return fmt.Errorf("Acknowledge(%s, %s) recorded %s", l.ExecutionID, outcome.Status, rec.Status)
		}
		if rec.Status.Terminal() {
			completed.Add(1)
		}
	}
	return nil
}

// With Options.IDRand the random part of generated IDs comes from the given
// reader, so a seeded store writes the same log on every run.
func TestIDRandMakesGeneratedIDsReproducible(t *testing.T) {
	ids := func(key string) []string {
		var seed [32]byte
		copy(seed[:], key)
		s, err := execstore.Open(t.TempDir(), execstore.Options{NoSync: true, Now: func() time.Time { return t0 },
			IDRand: rand.NewChaCha8(seed)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var out []string
		for range 3 {
			id, err := s.Admit(ctx, execstore.AdmitRequest{WorkflowID: "w"})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		return out
	}
	a, b, c := ids("one"), ids("one"), ids("two")
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed, different IDs: %v and %v", a, b)
	}
	if fmt.Sprint(a) == fmt.Sprint(c) || a[0] == a[1] {
		t.Fatalf("IDs do not follow the reader: %v and %v", a, c)
	}
}

// Claimers racing each other, each claiming and acknowledging its claim with
// AcknowledgeBatch (the writer builds leases and results in buffers that
// stay with pooled requests; run with -race): every execution is leased to
// one claimer only, and every answer belongs to its own acknowledgement.
func TestConcurrentClaimersEachGetTheirOwnLeasesAndResults(t *testing.T) {
	f := newFixture(t)
	const executions, claimers = 3000, 8
	parallelDo(executions, 32, func(i int) {
		if _, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("e-%d", i), WorkflowID: "w"}); err != nil {
			t.Error(err)
		}
	})
	var mu sync.Mutex
	leasedBy := map[string]int{}
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1 + c%5; ; n = n%64 + 1 {
				leases, err := f.s.ClaimDue(ctx, n, time.Minute)
				if err != nil || len(leases) == 0 {
					if err != nil {
						t.Error(err)
					}
					return
				}
				acks := make([]execstore.Ack, len(leases))
				mu.Lock()
				for i, l := range leases {
					if other, ok := leasedBy[l.ExecutionID]; ok {
						t.Errorf("%s leased to claimers %d and %d", l.ExecutionID, other, c)
					}
					leasedBy[l.ExecutionID] = c
					acks[i] = execstore.Ack{Lease: l, Outcome: execstore.Completed(raw(fmt.Sprintf(`%q`, l.ExecutionID)))}
				}
				mu.Unlock()
				results, err := f.s.AcknowledgeBatch(ctx, acks)
				if err != nil {
					t.Error(err)
					return
				}
				for i, r := range results {
					id := acks[i].Lease.ExecutionID
					if r.Err != nil || !r.Applied || r.Record.ExecutionID != id || string(r.Record.Outcome.Result) != fmt.Sprintf(`%q`, id) {
						t.Errorf("acknowledgement of %s answered %+v", id, r)
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(leasedBy) != executions {
		t.Fatalf("%d executions leased, want %d", len(leasedBy), executions)
	}
	if st := f.stats(); st.Terminal != executions {
		t.Fatalf("%d terminal, want %d", st.Terminal, executions)
	}
}

// parallelDo runs n calls of fn spread over `callers` goroutines.
func parallelDo(n, callers int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// A store opened without Options.FS keeps its directory on the operating system's filesystem,
// as it did before there was a choice: its lock, its log and its snapshots are files there, a
// second store cannot open the directory while the first holds it, and what it wrote opens
// again, on vfs.Default named explicitly as through a wrapper of it.
func TestTheDefaultFilesystemIsTheOperatingSystems(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s, err := execstore.Open(dir, execstore.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := execstore.Open(dir, execstore.Options{Now: clk.Now}); err == nil || !strings.Contains(err.Error(), "in use by another store") {
		t.Fatalf("a second Open of a held directory = %v, want it refused as in use", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"LOCK", "wal/00000000000000000001", "snapshots/snapshot-00000000000000000001.snap"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s on the operating system's filesystem: %v", name, err)
		}
	}
	for _, fs := range []vfs.FS{vfs.Default, vfs.WithFaults(vfs.Default, nil)} {
		s, err := execstore.Open(dir, execstore.Options{Now: clk.Now, FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		if rec, err := s.Get(ctx, "a"); err != nil || rec.Status != execstore.StatusAdmitted {
			t.Fatalf("reopened: %+v, %v", rec, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
