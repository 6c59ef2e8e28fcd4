package chargeorder

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
	"github.com/execstore/execstore/workflow"
	"github.com/google/go-cmp/cmp"
)

// The nightly settlement settles each night once: the night that comes
// while the shop runs, and, after the shop was down for two nights, both of
// them when it comes back (the schedule catches up every missed night). A
// manual trigger of a settled night is refused.
func TestTheNightlySettlementSettlesEachNightOnceAcrossDowntime(t *testing.T) {
	s := newStory(t)
	if _, err := s.store.PutSchedule(bg, SettlementSchedule(t0)); err != nil {
		t.Fatal(err)
	}
	night := func(day int) string {
		return execstore.ScheduleOccurrenceID("nightly-settlement", time.Date(2026, 1, day, 2, 0, 0, 0, time.UTC))
	}
	if _, err := s.shop.Charge(bg, "order-42/charge", 42, 2500); err != nil {
		t.Fatal(err)
	}
	w := s.worker(dispatcher.Options{}, nil)
	s.clock.Set(time.Date(2026, 1, 3, 2, 0, 0, 0, time.UTC))
	settled(t, s, night(3))

	// The shop is down from 03:00 on the 3rd until 02:30 on the 5th; a
	// charge was made meanwhile, before the night of the 4th.
	w.stop(t)
	if err := s.store.Close(); err != nil {
		t.Fatal(err)
	}
	s.shop.PlaceOrder(43, "ada", Item{Name: "socks", Cents: 700})
	if _, err := s.shop.Charge(bg, "order-43/charge", 43, 700); err != nil {
		t.Fatal(err)
	}
	s.clock.Set(time.Date(2026, 1, 5, 2, 30, 0, 0, time.UTC))
	s.open()
	// One delivery at a time: the missed nights, due together, are claimed
	// in ID order, which is night order, and settled one after the other.
	s.worker(dispatcher.Options{Concurrency: 1}, nil)
	settled(t, s, night(4))
	settled(t, s, night(5))

	want := []Settlement{{Night: night(3), Charges: 1, Cents: 2500}, {Night: night(4), Charges: 1, Cents: 700}, {Night: night(5)}}
	if diff := cmp.Diff(want, s.shop.Settlements()); diff != "" {
		t.Fatalf("settlements (-want +got):\n%s", diff)
	}
	_, err := s.client.Trigger(bg, workflow.TriggerRequest{ExecutionID: night(4), WorkflowID: SettlementWorkflowID})
	if !errors.Is(err, execstore.ErrExecutionIDConflict) {
		t.Fatalf("a manual trigger of a settled night: %v, want ErrExecutionIDConflict", err)
	}
	if st, _ := s.store.Stats(bg); st.Executions != 3 {
		t.Fatalf("%d executions, want one per night", st.Executions)
	}
}

// settled waits until the schedule has admitted the night's settlement and
// the settlement has completed.
func settled(t *testing.T, s *story, id string) {
	t.Helper()
	s.waitFor(id, execstore.StatusAdmitted, execstore.StatusCompleted)
	ctx, cancel := context.WithTimeout(bg, patience)
	defer cancel()
	if rec, err := s.store.Await(ctx, id); err != nil || rec.Status != execstore.StatusCompleted {
		t.Fatalf("Await(%q) = %s, %v", id, rec.Status, err)
	}
}
