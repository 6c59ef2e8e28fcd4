package fsm

import (
	"fmt"
	"testing"
)

// A record created after the state's latest Copy is changed in place by
// claims and acknowledgements (no copy can see it); a record a copy shares is
// replaced, never changed, and the copy keeps seeing it as it was.
func TestARecordNoCopyCanSeeIsChangedInPlace(t *testing.T) {
	s := New()
	s.Apply(&Command{Kind: KindAdmit, Now: 1, ExecutionID: "shared", WorkflowID: "w"})
	snap := s.Copy()
	s.Apply(&Command{Kind: KindAdmit, Now: 1, ExecutionID: "fresh", WorkflowID: "w"})
	fresh, shared := s.lookup("fresh"), s.lookup("shared")
	sharedBefore := *shared

	leases := s.Apply(&Command{Kind: KindClaim, Now: 2, Limit: 2, Duration: 1e9}).Leases
	if len(leases) != 2 {
		t.Fatalf("claimed %+v", leases)
	}
	if s.lookup("fresh") != fresh {
		t.Error("the claim replaced a record no copy can see")
	}
	replaced := s.lookup("shared")
	if replaced == shared || *shared != sharedBefore {
		t.Error("the claim changed a record the copy shares in place")
	}
	for _, l := range leases {
		s.Apply(&Command{Kind: KindAcknowledge, Now: 3, ExecutionID: l.ExecutionID, Token: l.Token, Outcome: Outcome{Status: StatusSuspended}})
	}
	if s.lookup("fresh") != fresh || s.lookup("shared") != replaced {
		t.Error("an acknowledgement replaced a record no copy can see")
	}
	if e, _ := snap.Get("shared"); e.LeaseToken != 0 || e.Status != StatusAdmitted {
		t.Errorf("the copy sees %+v, want the record as it was", e)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Copy is O(1): it allocates the same whatever the number of records.
func TestCopyCostsTheSameWhateverTheStateSize(t *testing.T) {
	if invariantsBuild {
		t.Skip("the invariants build fingerprints every copy it takes")
	}
	allocs := func(records int) float64 {
		s := New()
		for i := range records {
			s.Apply(&Command{Kind: KindAdmit, Now: 1, ExecutionID: fmt.Sprint("e", i), WorkflowID: "w"})
		}
		return testing.AllocsPerRun(20, func() { _ = s.Copy() })
	}
	if small, large := allocs(10), allocs(50_000); large != small {
		t.Fatalf("Copy allocates %v times for 10 records, %v for 50,000", small, large)
	}
}

// Once its copy is released, a state changes in place the records that copy
// shared: a claim and an acknowledgement keep the record where it is.
func TestAReleasedCopyLetsTheStateChangeItsRecordsInPlace(t *testing.T) {
	s := New()
	s.Apply(&Command{Kind: KindAdmit, Now: 1, ExecutionID: "e", WorkflowID: "w"})
	c := s.Copy()
	if s.Copies() != 1 {
		t.Fatalf("Copies() = %d after a Copy, want 1", s.Copies())
	}
	s.Release(c)
	if s.Copies() != 0 {
		t.Fatalf("Copies() = %d after its release, want 0", s.Copies())
	}
	rec := s.lookup("e")
	leases := s.Apply(&Command{Kind: KindClaim, Now: 2, Limit: 1, Duration: 1e9}).Leases
	if len(leases) != 1 {
		t.Fatalf("claimed %+v", leases)
	}
	s.Apply(&Command{Kind: KindAcknowledge, Now: 3, ExecutionID: "e", Token: leases[0].Token, Outcome: Outcome{Status: StatusCompleted}})
	if s.lookup("e") != rec {
		t.Error("a claim or acknowledgement replaced a record no unreleased copy shares")
	}
	if rec.Status() != StatusCompleted {
		t.Errorf("the record reads %v, want completed", rec.Status())
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Releasing one of two copies leaves the records the other shares as they
// were: the state replaces them until the last copy is released.
func TestAStateReplacesRecordsUntilItsLastCopyIsReleased(t *testing.T) {
	s := New()
	for _, id := range []string{"a", "b"} {
		s.Apply(&Command{Kind: KindAdmit, Now: 1, ExecutionID: id, WorkflowID: "w"})
	}
	older, newer := s.Copy(), s.Copy()
	s.Release(older)
	shared := s.lookup("a")
	if len(s.Apply(&Command{Kind: KindClaim, Now: 2, Limit: 1, Duration: 1e9}).Leases) != 1 {
		t.Fatal("claimed nothing")
	}
	if s.lookup("a") == shared {
		t.Error("the claim changed in place a record an unreleased copy shares")
	}
	if e, _ := newer.Get("a"); e.LeaseToken != 0 || e.Status != StatusAdmitted {
		t.Errorf("the unreleased copy sees %+v, want the record as it was", e)
	}
	s.Release(newer)
	b := s.lookup("b")
	if len(s.Apply(&Command{Kind: KindClaim, Now: 3, Limit: 1, Duration: 1e9}).Leases) != 1 {
		t.Fatal("claimed nothing")
	}
	if s.lookup("b") != b {
		t.Error("with every copy released, the claim replaced the record")
	}
	// A copy taken after the releases shares every record again: the
	// claim that supersedes a's expired lease replaces a, and the copy
	// keeps the first lease's token.
	c := s.Copy()
	first := s.lookup("a")
	token := first.LeaseToken()
	if len(s.Apply(&Command{Kind: KindClaim, Now: 1e10, Limit: 1, Duration: 1e9}).Leases) != 1 {
		t.Fatal("claimed nothing (the first lease has expired)")
	}
	if s.lookup("a") == first || s.lookup("a").LeaseToken() == token {
		t.Error("the claim changed in place a record the new copy shares")
	}
	if e, _ := c.Get("a"); e.LeaseToken != token {
		t.Errorf("the new copy sees token %d, want %d", e.LeaseToken, token)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Release refuses what would let a state change a record another state can
// still see: a state that is not its copy, a copy released twice, and a copy
// whose own copy is outstanding.
func TestReleaseRefusesWhatWouldExposeASharedRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func()
	}{
		{"not a copy", func() { New().Release(New()) }},
		{"nil", func() { New().Release(nil) }},
		{"a copy of another state", func() { New().Release(New().Copy()) }},
		{"twice", func() { s := New(); c := s.Copy(); s.Release(c); s.Release(c) }},
		{"with its own copy outstanding", func() { s := New(); c := s.Copy(); _ = c.Copy(); s.Release(c) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Release did not panic")
				}
			}()
			tc.call()
		})
	}
	// A copy of a copy released first lets the copy go.
	s := New()
	c := s.Copy()
	c.Release(c.Copy())
	s.Release(c)
	if s.Copies() != 0 {
		t.Fatalf("Copies() = %d, want 0", s.Copies())
	}
}
