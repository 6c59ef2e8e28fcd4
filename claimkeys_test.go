package execstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/execstore/execstore"
)

// A claim repeated with its request key (a retry whose first answer was
// lost) answers the leases the first granted that are still current, with
// their expiries as they are now, and writes nothing; across a snapshot and
// a reopen too. Only leases ended since are left out.
func TestARepeatedKeyedClaimAnswersTheSameLeasesAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	for i := range 4 {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("e-%d", i), WorkflowID: "w"})
	}
	req := execstore.ClaimRequest{Limit: 3, LeaseDuration: time.Minute, RequestKey: "worker-1/round-1"}
	first, err := f.s.Claim(ctx, req)
	if err != nil || len(first) != 3 {
		t.Fatalf("Claim: %+v, %v", first, err)
	}
	repeat := func(name string, want []execstore.Lease) {
		t.Helper()
		before := f.stats().WALLastIndex
		got, err := f.s.Claim(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s answered other leases (-want +got):\n%s", name, diff)
		}
		if after := f.stats().WALLastIndex; after != before {
			t.Fatalf("%s wrote to the log (%d -> %d)", name, before, after)
		}
	}
	repeat("the repeat", first)

	f.clock.Advance(10 * time.Second)
	renewed, err := f.s.Renew(ctx, first[0], time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f.ack(first[1], execstore.Completed(nil))
	repeat("the repeat after a renewal and an acknowledgement", []execstore.Lease{renewed, first[2]})

	if err := f.s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	repeat("the repeat after a snapshot and a reopen", []execstore.Lease{renewed, first[2]})

	// Another key claims afresh: what is left.
	if got, err := f.s.Claim(ctx, execstore.ClaimRequest{Limit: 3, LeaseDuration: time.Minute, RequestKey: "worker-1/round-2"}); err != nil || len(got) != 1 || got[0].ExecutionID != "e-3" {
		t.Fatalf("a claim with another key: %+v, %v; want e-3's lease", got, err)
	}
}

// Once the claim's lease duration has passed, its key is forgotten: a claim
// with it leases afresh. A keyed claim that leased nothing is not
// remembered.
func TestARequestKeyIsForgottenWithItsLeases(t *testing.T) {
	f := newFixture(t)
	req := execstore.ClaimRequest{Limit: 1, LeaseDuration: time.Minute, RequestKey: "k"}
	if got, err := f.s.Claim(ctx, req); err != nil || len(got) != 0 {
		t.Fatalf("an idle keyed claim: %+v, %v", got, err)
	}
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	first, err := f.s.Claim(ctx, req)
	if err != nil || len(first) != 1 {
		t.Fatalf("the keyed claim after an admission: %+v, %v; want e's lease", first, err)
	}
	f.clock.Advance(time.Minute)
	got, err := f.s.Claim(ctx, req)
	if err != nil || len(got) != 1 || got[0].Token != first[0].Token+1 {
		t.Fatalf("the claim after the key's time: %+v, %v; want a new lease of e", got, err)
	}
}

// A request key used again with other arguments, or longer than
// MaxRequestKeyLen, is ErrInvalidArgument and writes nothing; with
// AcknowledgeAndClaimWith, the acknowledgements are not written either.
func TestARequestKeyWithOtherArgumentsIsRefused(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w"})
	f.admit(execstore.AdmitRequest{ExecutionID: "b", WorkflowID: "w"})
	if _, err := f.s.Claim(ctx, execstore.ClaimRequest{Limit: 1, LeaseDuration: time.Minute, RequestKey: "k"}); err != nil {
		t.Fatal(err)
	}
	before := f.stats().WALLastIndex
	for name, req := range map[string]execstore.ClaimRequest{
		"another limit":          {Limit: 2, LeaseDuration: time.Minute, RequestKey: "k"},
		"another lease duration": {Limit: 1, LeaseDuration: time.Hour, RequestKey: "k"},
		"a key too long":         {Limit: 1, LeaseDuration: time.Minute, RequestKey: strings.Repeat("k", execstore.MaxRequestKeyLen+1)},
	} {
		if _, err := f.s.Claim(ctx, req); !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if after := f.stats().WALLastIndex; after != before {
		t.Fatalf("the refused claims wrote to the log (%d -> %d)", before, after)
	}
	if rec := f.get("b"); rec.Lease != nil {
		t.Fatalf("b was leased by a refused claim: %+v", rec.Lease)
	}
}

// AcknowledgeAndClaimWith repeated whole after a lost answer answers as the
// first did: each acknowledgement replayed, the claim's leases as granted.
func TestARepeatedAcknowledgeAndClaimAnswersAsTheFirst(t *testing.T) {
	f := newFixture(t)
	for i := range 3 {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("e-%d", i), WorkflowID: "w"})
	}
	l := f.claim(1, time.Minute)[0]
	acks := []execstore.Ack{{Lease: l, Outcome: execstore.Completed(raw(`{"ok":true}`))}}
	req := execstore.ClaimRequest{Limit: 2, LeaseDuration: time.Minute, RequestKey: "round-7"}
	results, leases, err := f.s.AcknowledgeAndClaimWith(ctx, acks, req)
	if err != nil || !results[0].Applied || results[0].Replayed || len(leases) != 2 {
		t.Fatalf("first call: %+v %+v %v", results, leases, err)
	}
	before := f.stats().WALLastIndex
	again, leasesAgain, err := f.s.AcknowledgeAndClaimWith(ctx, acks, req)
	if err != nil || !again[0].Applied || !again[0].Replayed {
		t.Fatalf("the repeat's acknowledgement: %+v, %v; want applied and replayed", again, err)
	}
	if diff := cmp.Diff(leases, leasesAgain); diff != "" {
		t.Fatalf("the repeat's leases differ (-first +repeat):\n%s", diff)
	}
	if after := f.stats().WALLastIndex; after != before {
		t.Fatalf("the repeat wrote to the log (%d -> %d)", before, after)
	}
}
