package fsm

import (
	"bufio"
	"bytes"
	"testing"
)

// An execution not terminal by its deadline fails with DEADLINE_EXCEEDED
// when the writer's expire-deadlines command reaches it, exactly as a
// cancel would end it otherwise: its lease ends, the executions it started
// are cancelled, its own parent is woken. Before the deadline the command
// changes nothing; an execution that ends first loses its deadline; the
// deadlines survive a snapshot.
func TestADeadlineEndsTheExecutionAndWhatItStartedOnce(t *testing.T) {
	s := New()
	now := int64(1000)
	apply := checkedApply(t, s, &now)
	apply(Command{Kind: KindAdmit, ExecutionID: "parent", WorkflowID: "w"})
	apply(Command{Kind: KindAdmit, ExecutionID: "done-early", WorkflowID: "w", Deadline: 3000})
	l := apply(Command{Kind: KindClaim, Limit: 2, Duration: 10_000}).Leases
	// A child with a deadline of its own, under a parent that waits for it.
	apply(Command{Kind: KindStart, ExecutionID: "parent", Token: l[1].Token, Key: "k", ChildID: "slow", WorkflowID: "w", Deadline: 2500})
	apply(Command{Kind: KindAcknowledge, ExecutionID: "parent", Token: l[1].Token, Outcome: Outcome{Status: StatusSuspended}})
	apply(Command{Kind: KindAdmit, ExecutionID: "tree", WorkflowID: "w", Deadline: 5000})
	lt := apply(Command{Kind: KindClaim, Limit: 5, Duration: 10_000}).Leases
	var treeLease Lease
	for _, x := range lt {
		if x.ExecutionID == "tree" {
			treeLease = x
		}
	}
	apply(Command{Kind: KindStart, ExecutionID: "tree", Token: treeLease.Token, Key: "c", ChildID: "tree-child", WorkflowID: "w"})
	apply(Command{Kind: KindAcknowledge, ExecutionID: "done-early", Token: l[0].Token, Outcome: Outcome{Status: StatusCompleted}})
	if s.DeadlineOf("done-early") != 0 || s.DeadlineOf("tree") != 5000 {
		t.Fatalf("deadlines: done-early %d, tree %d", s.DeadlineOf("done-early"), s.DeadlineOf("tree"))
	}
	if at, ok := s.NextDeadline(); !ok || at != 2500 {
		t.Fatalf("NextDeadline = %d, %v; want 2500, slow's", at, ok)
	}
	now = 2500
	if r := apply(Command{Kind: KindExpireDeadlines, Limit: 10}); r.Count != 1 || len(r.Woken) != 1 || r.Woken[0] != "parent" {
		t.Fatalf("slow's deadline: %+v, want slow ended and its parent woken", r)
	}
	if at, ok := s.NextDeadline(); !ok || at != 5000 {
		t.Fatalf("NextDeadline = %d, %v; want 5000 (done-early ended before its own)", at, ok)
	}

	now = 4999
	expire := Command{Kind: KindExpireDeadlines, Now: now, Limit: 10}
	if _, mutates := s.Precheck(&expire); mutates {
		t.Fatal("expire-deadlines before any deadline would be logged")
	}
	d := throughSnapshot(t, s)
	now = 5000
	r := apply(Command{Kind: KindExpireDeadlines, Limit: 10})
	if r.Count != 1 {
		t.Fatalf("expire-deadlines ended %d executions, want 1", r.Count)
	}
	tree, _ := s.Get("tree")
	child, _ := s.Get("tree-child")
	if tree.Status != StatusFailed || tree.Outcome.Error.Code != CodeDeadlineExceeded || tree.LeaseToken != 0 || tree.UpdatedAt != 5000 {
		t.Fatalf("tree after its deadline: %+v", tree)
	}
	if child.Status != StatusCancelled || child.Outcome.Error.Code != CodeCancelled {
		t.Fatalf("tree's child after the deadline: %+v", child)
	}
	if r := apply(Command{Kind: KindAcknowledge, ExecutionID: "tree", Token: treeLease.Token, Outcome: Outcome{Status: StatusCompleted}}); r.Exec.Outcome == nil || r.Exec.Outcome.Error.Code != CodeDeadlineExceeded {
		t.Fatalf("a late acknowledgement changed the outcome: %+v", r)
	}
	if _, ok := s.NextDeadline(); ok {
		t.Fatal("a deadline is left after it fired")
	}
	if _, mutates := s.Precheck(&Command{Kind: KindExpireDeadlines, Now: 9000, Limit: 10}); mutates {
		t.Fatal("a deadline fires twice")
	}
	// The snapshot taken before the deadline decides the same.
	if r := d.Apply(&Command{Kind: KindExpireDeadlines, Now: 5000, Limit: 10}); r.Count != 1 {
		t.Fatalf("after a snapshot, expire-deadlines ended %d", r.Count)
	}
	if x, _ := d.Get("tree"); x.Status != StatusFailed {
		t.Fatalf("after a snapshot, tree is %v", x.Status)
	}
	if c := (Command{Kind: KindAdmit, Now: 1, ExecutionID: "x", WorkflowID: "w", Deadline: -1}); c.Check() == nil {
		t.Fatal("a negative deadline passes its check")
	}
}

// A snapshot that keeps a deadline for an execution that has ended, or has
// no record, is refused by the check that gates deleting older snapshots,
// as decoding refuses it.
func TestAStrayDeadlineIsRefusedByTheCheckAndTheDecoder(t *testing.T) {
	for name, stray := range map[string]string{"no record": "ghost", "ended": "done"} {
		s := New()
		now := int64(1000)
		apply := checkedApply(t, s, &now)
		apply(Command{Kind: KindAdmit, ExecutionID: "open", WorkflowID: "w", Deadline: 9000})
		apply(Command{Kind: KindAdmit, ExecutionID: "done", WorkflowID: "w"})
		l := apply(Command{Kind: KindClaim, Limit: 10, Duration: 1000, Queues: []string{"w"}}).Leases
		for _, x := range l {
			if x.ExecutionID == "done" {
				apply(Command{Kind: KindAcknowledge, ExecutionID: "done", Token: x.Token, Outcome: Outcome{Status: StatusCompleted}})
			}
		}
		good := encodeState(t, s)
		if _, err := CheckState(bufio.NewReader(bytes.NewReader(good))); err != nil {
			t.Fatalf("%s: a good state fails its check: %v", name, err)
		}
		s.deadlines.Set(dueKey{At: 5000, ID: stray})
		s.deadlineOf.Set(deadlineItem{id: stray, at: 5000})
		bad := encodeState(t, s)
		if _, err := CheckState(bufio.NewReader(bytes.NewReader(bad))); err == nil {
			t.Errorf("%s: CheckState passes a deadline for %q", name, stray)
		}
		if _, err := DecodeState(bufio.NewReader(bytes.NewReader(bad))); err == nil {
			t.Errorf("%s: DecodeState passes a deadline for %q", name, stray)
		}
	}
}
