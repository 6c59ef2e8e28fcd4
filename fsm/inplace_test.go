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
