package execstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Sixty-four simultaneous admissions of one new ID write one entry: the
// first is admitted, the other 63 get ErrExecutionIDConflict without a write.
func TestDuplicateAdmissionsQueuedTogetherWriteNothing(t *testing.T) {
	g := openGated(t, t.TempDir(), Options{NoSync: true})
	s := g.s
	ctx := context.Background()
	g.hold("blocker")
	before, _ := s.Stats(ctx)
	const n = 64
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Admit(ctx, AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
		}()
	}
	g.waitQueued(n)
	g.let()
	wg.Wait()
	admitted, conflicts := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			admitted++
		case errors.Is(err, ErrExecutionIDConflict):
			conflicts++
		default:
			t.Fatalf("Admit: %v", err)
		}
	}
	if admitted != 1 || conflicts != n-1 {
		t.Fatalf("%d admitted, %d conflicts; want 1 and %d", admitted, conflicts, n-1)
	}
	after, _ := s.Stats(ctx)
	if got := after.WALLastIndex - before.WALLastIndex; got != 2 {
		t.Fatalf("%d entries for the blocker and %d admissions of one ID, want 2", got, n)
	}
}

// A command that only an earlier command of its own batch makes a no-op is
// answered from the state after the batch, without being logged.
func TestACommandMadeANoOpByAnEarlierOneInItsBatchIsNotLogged(t *testing.T) {
	type env struct {
		g     *gatedStore
		ctx   context.Context
		lease Lease // a current lease on "e"
		clock *testClock
	}
	for _, tc := range []struct {
		name    string
		entries uint64 // logged after the blocker's
		run     func(e *env) error
	}{
		{"acknowledged twice", 1, func(e *env) error {
			first := e.g.call(func() error { _, err := e.g.s.Acknowledge(e.ctx, e.lease, Completed(nil)); return err })
			second := e.g.call(func() error {
				rec, err := e.g.s.Acknowledge(e.ctx, e.lease, Failed(errors.New("late")))
				if err == nil && rec.Status != StatusCompleted {
					return fmt.Errorf("the repeat got status %s, want the recorded completed", rec.Status)
				}
				return err
			})
			e.g.let()
			return errors.Join(<-first, <-second)
		}},
		{"renewed after its acknowledgement", 1, func(e *env) error {
			ack := e.g.call(func() error { _, err := e.g.s.Acknowledge(e.ctx, e.lease, Suspended()); return err })
			renew := e.g.call(func() error { _, err := e.g.s.Renew(e.ctx, e.lease, time.Minute); return err })
			e.g.let()
			if err := <-renew; !errors.Is(err, ErrLeaseLost) {
				return fmt.Errorf("Renew after Acknowledge: %v, want ErrLeaseLost", err)
			}
			return <-ack
		}},
		{"step saved after a release", 1, func(e *env) error {
			rel := e.g.call(func() error { return e.g.s.Release(e.ctx, e.lease, 0) })
			save := e.g.call(func() error { return e.g.s.SaveStep(e.ctx, e.lease, "k", []byte(`1`)) })
			e.g.let()
			if err := <-save; !errors.Is(err, ErrLeaseLost) {
				return fmt.Errorf("SaveStep after Release: %v, want ErrLeaseLost", err)
			}
			return <-rel
		}},
		{"acknowledged after a claim superseded it", 1, func(e *env) error {
			e.clock.advance(2 * time.Minute) // the lease has expired
			var leases []Lease
			claim := e.g.call(func() error { var err error; leases, err = e.g.s.ClaimDue(e.ctx, 10, time.Minute); return err })
			ack := e.g.call(func() error { _, err := e.g.s.Acknowledge(e.ctx, e.lease, Completed(nil)); return err })
			e.g.let()
			if err := <-ack; !errors.Is(err, ErrLeaseLost) {
				return fmt.Errorf("Acknowledge of a superseded lease: %v, want ErrLeaseLost", err)
			}
			if err := <-claim; err != nil {
				return err
			}
			for _, l := range leases {
				if l.ExecutionID == "e" && l.Token == e.lease.Token+1 {
					return nil
				}
			}
			return fmt.Errorf("ClaimDue = %+v; want the next token of e", leases)
		}},
		{"the same child started twice", 1, func(e *env) error {
			ids := make([]string, 2)
			starts := make([]<-chan error, 2)
			for i := range starts {
				starts[i] = e.g.call(func() error {
					var err error
					ids[i], err = e.g.s.Start(e.ctx, e.lease, "child", "w", []byte(`{"a":1}`))
					return err
				})
			}
			e.g.let()
			if err := errors.Join(<-starts[0], <-starts[1]); err != nil {
				return err
			}
			if ids[0] != ids[1] {
				return fmt.Errorf("two children %q and %q for one step", ids[0], ids[1])
			}
			return nil
		}},
		{"a later wake merges into an earlier one", 1, func(e *env) error {
			at := e.clock.now().Add(time.Hour)
			w1 := e.g.call(func() error { _, err := e.g.s.RequestWake(e.ctx, "e", at); return err })
			w2 := e.g.call(func() error { _, err := e.g.s.RequestWake(e.ctx, "e", at.Add(time.Minute)); return err })
			e.g.let()
			return errors.Join(<-w1, <-w2)
		}},
		{"cancelled twice", 1, func(e *env) error {
			c1 := e.g.call(func() error { _, err := e.g.s.Cancel(e.ctx, "e", "first"); return err })
			c2 := e.g.call(func() error {
				rec, err := e.g.s.Cancel(e.ctx, "e", "second")
				if err == nil && (rec.Status != StatusCancelled || rec.Outcome.Error.Message != "first") {
					return fmt.Errorf("the repeat got %s %+v, want the first cancellation", rec.Status, rec.Outcome)
				}
				return err
			})
			e.g.let()
			return errors.Join(<-c1, <-c2)
		}},
		{"renewed and woken after a cancel", 1, func(e *env) error {
			c := e.g.call(func() error { _, err := e.g.s.Cancel(e.ctx, "e", ""); return err })
			renew := e.g.call(func() error { _, err := e.g.s.Renew(e.ctx, e.lease, time.Minute); return err })
			wake := e.g.call(func() error {
				res, err := e.g.s.RequestWake(e.ctx, "e", e.clock.now())
				if err == nil && res != WakeIgnored {
					return fmt.Errorf("a wake after the cancel was %s, want ignored", res)
				}
				return err
			})
			e.g.let()
			if err := <-renew; !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrCancelled) {
				return fmt.Errorf("Renew after Cancel: %v, want ErrLeaseLost and ErrCancelled", err)
			}
			return errors.Join(<-c, <-wake)
		}},
		{"the same watch twice", 1, func(e *env) error {
			w1 := e.g.call(func() error { _, err := e.g.s.Watch(e.ctx, "e", "a", "b"); return err })
			w2 := e.g.call(func() error { _, err := e.g.s.Watch(e.ctx, "e", "b", "a"); return err })
			e.g.let()
			return errors.Join(<-w1, <-w2)
		}},
		{"the same schedule put twice", 1, func(e *env) error {
			sc := Schedule{ID: "hourly", WorkflowID: "w", Interval: time.Hour, Start: e.clock.now()}
			p1 := e.g.call(func() error { _, err := e.g.s.PutSchedule(e.ctx, sc); return err })
			p2 := e.g.call(func() error { _, err := e.g.s.PutSchedule(e.ctx, sc); return err })
			e.g.let()
			return errors.Join(<-p1, <-p2)
		}},
		{"a schedule deleted twice", 1, func(e *env) error {
			d1 := e.g.call(func() error { return e.g.s.DeleteSchedule(e.ctx, "daily") })
			d2 := e.g.call(func() error {
				if err := e.g.s.DeleteSchedule(e.ctx, "daily"); !errors.Is(err, ErrScheduleNotFound) {
					return fmt.Errorf("the second delete returned %v, want ErrScheduleNotFound", err)
				}
				return nil
			})
			e.g.let()
			return errors.Join(<-d1, <-d2)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &testClock{t: time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)}
			g := openGated(t, t.TempDir(), Options{NoSync: true, Now: clock.now})
			ctx := context.Background()
			if _, err := g.s.Admit(ctx, AdmitRequest{ExecutionID: "e", WorkflowID: "w"}); err != nil {
				t.Fatal(err)
			}
			leases, err := g.s.ClaimDue(ctx, 1, time.Minute)
			if err != nil || len(leases) != 1 {
				t.Fatalf("ClaimDue: %v, %v", leases, err)
			}
			if _, err := g.s.PutSchedule(ctx, Schedule{ID: "daily", WorkflowID: "w", Cron: "@daily", Start: clock.now()}); err != nil {
				t.Fatal(err)
			}
			g.hold("blocker")
			before, _ := g.s.Stats(ctx)
			if err := tc.run(&env{g: g, ctx: ctx, lease: leases[0], clock: clock}); err != nil {
				t.Fatal(err)
			}
			after, _ := g.s.Stats(ctx)
			if got := after.WALLastIndex - before.WALLastIndex - 1; got != tc.entries {
				t.Errorf("%d entries logged besides the blocker's, want %d", got, tc.entries)
			}
			if err := g.s.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A deferred command that turns out to change the state after all is logged
// in the next batch: here the claim that was expected to supersede a lease
// took another execution, due earlier, so the lease's acknowledgement holds.
func TestADeferredCommandThatStillChangesTheStateIsLoggedNext(t *testing.T) {
	clock := &testClock{t: time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)}
	g := openGated(t, t.TempDir(), Options{NoSync: true, Now: clock.now})
	s := g.s
	ctx := context.Background()
	if _, err := s.Admit(ctx, AdmitRequest{ExecutionID: "leased", WorkflowID: "w"}); err != nil {
		t.Fatal(err)
	}
	leases, err := s.ClaimDue(ctx, 1, time.Minute)
	if err != nil || len(leases) != 1 {
		t.Fatalf("ClaimDue: %v, %v", leases, err)
	}
	// "waiting" becomes due before the lease expires; both are claimable
	// once the clock passes the expiry, "waiting" first.
	if _, err := s.Admit(ctx, AdmitRequest{ExecutionID: "waiting", WorkflowID: "w"}); err != nil {
		t.Fatal(err)
	}
	clock.advance(2 * time.Minute)
	g.hold("blocker")
	before, _ := s.Stats(ctx)
	var taken []Lease
	claim := g.call(func() error { var err error; taken, err = s.ClaimDue(ctx, 1, time.Minute); return err })
	var rec Record
	ack := g.call(func() error { var err error; rec, err = s.Acknowledge(ctx, leases[0], Completed(nil)); return err })
	g.let()
	if err := <-claim; err != nil || len(taken) != 1 || taken[0].ExecutionID != "waiting" {
		t.Fatalf("ClaimDue = %+v, %v; want the lease of waiting", taken, err)
	}
	if err := <-ack; err != nil || rec.Status != StatusCompleted {
		t.Fatalf("Acknowledge = %+v, %v; want completed", rec, err)
	}
	after, _ := s.Stats(ctx)
	if got := after.WALLastIndex - before.WALLastIndex; got != 3 {
		t.Fatalf("%d entries, want 3: the blocker, the claim, the acknowledgement", got)
	}
	if got := after.WALBatches - before.WALBatches; got != 3 {
		t.Fatalf("%d batches, want 3: the acknowledgement was logged in a batch of its own", got)
	}
}

// testClock is an injected clock for internal tests.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
