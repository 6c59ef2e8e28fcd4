package fsm

import (
	"fmt"
	"testing"
)

// A claim takes a queue's claimable executions by priority, then time: an
// execution of the first priority admitted last is claimed before every
// earlier one of the default priority, and one of the last priority after
// them all. Expired leases are claimed in the same order. A child runs at
// its parent's priority; the priorities survive a snapshot, and a retired
// record's is dropped.
func TestAClaimTakesAQueueByPriorityThenTime(t *testing.T) {
	s := New()
	s.TrackRetirement()
	now := int64(1000)
	apply := checkedApply(t, s, &now)
	for i, p := range []int{PriorityLast, 0, PriorityDefault, 2, PriorityFirst} {
		now++
		apply(Command{Kind: KindAdmit, ExecutionID: fmt.Sprintf("e%d-p%d", i, p), WorkflowID: "w", Priority: p})
	}
	r := apply(Command{Kind: KindClaim, Limit: 3, Duration: 100})
	if got := fmt.Sprint(leaseIDs(r)); got != "[e4-p1 e3-p2 e1-p0]" {
		t.Fatalf("claim leased %s, want the first priority, the second, then the default in time order", got)
	}
	if s.PriorityOf("e4-p1") != PriorityFirst || s.PriorityOf("e1-p0") != 0 || s.PriorityOf("nobody") != 0 {
		t.Fatal("PriorityOf does not answer the priorities admitted")
	}

	// A child of e4-p1 inherits its priority.
	apply(Command{Kind: KindStart, ExecutionID: "e4-p1", Token: r.Leases[0].Token, Key: "c", ChildID: "child", WorkflowID: "w"})
	if p := s.PriorityOf("child"); p != PriorityFirst {
		t.Fatalf("a child of an execution of priority 1 has priority %d", p)
	}

	// The leases expire: the claim after takes everything claimable by
	// priority, then time, expired leases among them (each at its expiry).
	now += 200
	r = apply(Command{Kind: KindClaim, Limit: 10, Duration: 100})
	if got := fmt.Sprint(leaseIDs(r)); got != "[child e4-p1 e3-p2 e2-p3 e1-p0 e0-p5]" {
		t.Fatalf("claim after the leases expired leased %s", got)
	}

	d := throughSnapshot(t, s)
	if d.PriorityOf("child") != PriorityFirst || d.PriorityOf("e0-p5") != PriorityLast {
		t.Fatal("the priorities did not survive a snapshot")
	}
	if err := d.CheckInvariants(); err != nil {
		t.Fatal(err)
	}

	// Ended and retired, e0-p5 keeps no priority.
	for _, l := range r.Leases {
		if l.ExecutionID == "e0-p5" {
			apply(Command{Kind: KindAcknowledge, ExecutionID: l.ExecutionID, Token: l.Token, Outcome: Outcome{Status: StatusCompleted}})
		}
	}
	now += 10
	apply(Command{Kind: KindRetire, At: now, Limit: 10})
	if s.prio.Len() != 3 { // e4-p1, e3-p2 and child
		t.Fatalf("%d priorities kept after one of four was retired", s.prio.Len())
	}

	c := Command{Kind: KindAdmit, Now: now, ExecutionID: "x", WorkflowID: "w", Priority: PriorityLast + 1}
	if err := c.Check(); err == nil {
		t.Fatal("an admission of priority 6 passes its check")
	}
}
