package execstore_test

import (
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/google/go-cmp/cmp"
)

// "A claim covers every wake pending at that moment": after the delivery it
// starts suspends, none of those wakes makes the execution due again.
func TestAClaimCoversEveryWakePendingAtIt(t *testing.T) {
	cases := []struct {
		name string
		// before requests wakes and returns the lease whose suspension is
		// checked, claimed at the store's current time.
		before func(f *fixture) execstore.Lease
	}{
		{"the admission's wake and earlier and equal ones", func(f *fixture) execstore.Lease {
			f.wake("e", t0.Add(-time.Minute))
			f.wake("e", t0)
			return f.claimOne("e")
		}},
		{"those an expired lease covered and one requested since", func(f *fixture) execstore.Lease {
			f.claimOne("e") // a one-minute lease covering the admission's wake
			f.wake("e", t0.Add(30*time.Second))
			f.clock.Advance(time.Minute)
			return f.claimOne("e")
		}},
		{"a future one requested during an expired lease", func(f *fixture) execstore.Lease {
			f.claimOne("e")
			f.wake("e", t0.Add(10*time.Minute))
			f.clock.Advance(time.Minute)
			return f.claimOne("e")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
			l := c.before(f)
			if rec := f.ack(l, execstore.Suspended()); !rec.DueAt.IsZero() {
				t.Fatalf("after the delivery suspended, due at %v; want no pending wake", rec.DueAt)
			}
			f.clock.Advance(time.Hour)
			if leases := f.claim(10, time.Minute); len(leases) != 0 {
				t.Fatalf("a covered wake made the execution due again: %+v", leases)
			}
		})
	}
}

// Executions waiting for a wake and executions whose lease expired are kept
// in two indexes; a claim takes from both in (time, ID) order, as one index
// would give it, and a limit cuts that order wherever it falls.
func TestAClaimTakesExpiredLeasesAndDueWakesInTimeThenIDOrder(t *testing.T) {
	f := newFixture(t)
	lease := func(d time.Duration, ids ...string) {
		for _, id := range ids {
			f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
		}
		if got := f.claim(10, d); len(got) != len(ids) {
			t.Fatalf("claimed %+v, want %v", got, ids)
		}
	}
	lease(2*time.Minute, "x")       // lease expires at +2m
	lease(10*time.Minute, "b", "d") // leases expire at +10m
	waits := map[string]time.Duration{"a": 10 * time.Minute, "c": 10 * time.Minute, "e": 10 * time.Minute,
		"w1": 5 * time.Minute, "w2": 15 * time.Minute}
	for id := range waits {
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
	}
	for _, l := range f.claim(10, time.Minute) {
		f.ack(l, execstore.Suspended())
	}
	for id, at := range waits {
		f.wake(id, t0.Add(at))
	}

	f.clock.Set(t0.Add(20 * time.Minute))
	// x +2m (lease), w1 +5m, a +10m, b +10m (lease), c +10m, d +10m (lease),
	// e +10m, w2 +15m.
	got := ids(f.claim(3, time.Minute))
	got = append(got, ids(f.claim(10, time.Minute))...)
	if diff := cmp.Diff([]string{"x", "w1", "a", "b", "c", "d", "e", "w2"}, got); diff != "" {
		t.Fatalf("claim order (-want +got):\n%s", diff)
	}
	if err := f.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
