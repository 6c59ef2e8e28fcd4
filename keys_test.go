package execstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/google/go-cmp/cmp"
)

// A queue's key limit holds across claims, acknowledgements and restarts:
// with the live meaning, one customer's executions run one after another,
// each to its end through its sleeps, while other customers' run beside
// them; the next of a key is claimable the moment the one before ends, and
// NextDue and DueChanged say so. Records, Queue and QueueKeys report the
// keys; a child's key is its start's.
func TestAKeyLimitRunsAKeysExecutionsOneAfterAnotherAcrossRestarts(t *testing.T) {
	f := newFixture(t)
	if _, err := f.s.PutQueue(ctx, execstore.QueueSettings{Name: "charge", KeyLimit: 1, KeyMode: execstore.KeyLive}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("a-%d", i), WorkflowID: "charge", ConcurrencyKey: "customer-a"})
	}
	f.admit(execstore.AdmitRequest{ExecutionID: "b-0", WorkflowID: "charge", ConcurrencyKey: "customer-b"})
	f.admit(execstore.AdmitRequest{ExecutionID: "n-0", WorkflowID: "charge"})
	f.reopen()
	first := f.claimIn(10, "charge")
	if diff := cmp.Diff([]string{"a-0", "b-0", "n-0"}, ids(first)); diff != "" {
		t.Fatalf("first claim under a live key limit of 1 (-want +got):\n%s", diff)
	}
	info, err := f.s.Queue(ctx, "charge")
	if err != nil || info.KeyLimit != 1 || info.KeyMode != execstore.KeyLive || info.Parked != 2 || info.Due != 0 {
		t.Fatalf("Queue(charge) = %+v, %v", info, err)
	}
	keys, err := f.s.QueueKeys(ctx, "charge", 10)
	if want := []execstore.KeyInfo{{Key: "customer-a", Holding: 1, Parked: 2}, {Key: "customer-b", Holding: 1}}; err != nil || !cmp.Equal(keys, want) {
		t.Fatalf("QueueKeys = %+v, %v; want %+v", keys, err, want)
	}
	// a-0 sleeps: it keeps the slot, so a-1 still waits; its wake is its own.
	if _, err := f.s.Acknowledge(ctx, first[0], execstore.Suspended()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.RequestWake(ctx, "a-0", f.clock.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	if got := f.claimIn(10, "charge"); len(got) != 0 {
		t.Fatalf("a claim while a-0 sleeps leased %v", ids(got))
	}
	f.clock.Advance(time.Second)
	again := f.claimIn(10, "charge")
	if diff := cmp.Diff([]string{"a-0"}, ids(again)); diff != "" {
		t.Fatalf("claim at a-0's wake (-want +got):\n%s", diff)
	}
	child, err := f.s.StartWith(ctx, again[0], execstore.StartRequest{StepKey: "receipt", WorkflowID: "mail", ConcurrencyKey: "customer-a"})
	if err != nil {
		t.Fatal(err)
	}
	if rec, _ := f.s.Get(ctx, child); rec.ConcurrencyKey != "customer-a" {
		t.Fatalf("the child's key is %q, want its start's", rec.ConcurrencyKey)
	}
	due := f.s.DueChanged()
	f.ack(again[0], execstore.Completed(nil))
	select {
	case <-due:
	default:
		t.Fatal("the end of a key's slot holder did not signal DueChanged")
	}
	if next, _ := f.s.NextDueIn(ctx, []string{"charge"}); next.After(f.clock.Now()) {
		t.Fatalf("NextDueIn(charge) = %v once a-0 ended, want now", next)
	}
	if diff := cmp.Diff([]string{"a-1"}, ids(f.claimIn(10, "charge"))); diff != "" {
		t.Fatalf("claim once a-0 ended (-want +got):\n%s", diff)
	}
	if rec, _ := f.s.Get(ctx, "a-2"); rec.ConcurrencyKey != "customer-a" {
		t.Fatalf("Record.ConcurrencyKey = %q", rec.ConcurrencyKey)
	}
	// Deleting the limit lets every waiting execution be claimed.
	if err := f.s.DeleteQueue(ctx, "charge"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a-2"}, ids(f.claimIn(10, "charge"))); diff != "" {
		t.Fatalf("claim once the limit was deleted (-want +got):\n%s", diff)
	}
}

// Bad keys and key limits are refused with typed errors, and write nothing.
func TestBadConcurrencyKeysAndKeyLimitsAreRefused(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		key  string
		also error
	}{
		{strings.Repeat("k", execstore.MaxConcurrencyKeyBytes+1), execstore.ErrLimitExceeded},
		{"\xff", execstore.ErrInvalidArgument},
	} {
		_, err := f.s.Admit(ctx, execstore.AdmitRequest{WorkflowID: "w", ConcurrencyKey: tc.key})
		if !errors.Is(err, execstore.ErrInvalidExecutionEvent) || !errors.Is(err, execstore.ErrInvalidArgument) || !errors.Is(err, tc.also) {
			t.Errorf("Admit with key %q: %v", tc.key, err)
		}
	}
	for _, st := range []execstore.QueueSettings{
		{Name: "q", KeyLimit: -1},
		{Name: "q", KeyLimit: execstore.MaxQueueConcurrency + 1},
		{Name: "q", KeyLimit: 1, KeyMode: "serial"},
		{Name: "q", Paused: true, KeyMode: execstore.KeyLive},
	} {
		if _, err := f.s.PutQueue(ctx, st); !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("PutQueue(%+v): %v", st, err)
		}
	}
	if _, err := f.s.QueueKeys(ctx, "q", 0); !errors.Is(err, execstore.ErrInvalidArgument) {
		t.Errorf("QueueKeys with limit 0: %v", err)
	}
	if st, _ := f.s.Stats(ctx); st.Executions != 0 {
		t.Fatalf("%d executions after refused admissions", st.Executions)
	}
}
