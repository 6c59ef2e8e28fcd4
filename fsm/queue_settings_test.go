package fsm

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
)

func leaseIDs(r Result) []string {
	var out []string
	for _, l := range r.Leases {
		out = append(out, l.ExecutionID)
	}
	return out
}

// A queue's concurrency limit bounds its current leases: a claim takes no
// more of its due executions than the room left, still supersedes its
// expired leases (which adds none), and a lease that ends says something
// may be due. A paused queue gives nothing, not even an expired lease. An
// identical put changes nothing; deleting the settings lifts both. NextDue
// leaves out what no claim could take.
func TestAQueuesLimitAndPauseBoundWhatClaimsTake(t *testing.T) {
	s := New()
	now := int64(1000)
	apply := func(c Command) Result {
		t.Helper()
		c.Now = now
		r := s.Apply(&c)
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	claim := func(limit int) Result { return apply(Command{Kind: KindClaim, Limit: limit, Duration: 1000}) }
	put := func(st QueueSettings) Result {
		return apply(Command{Kind: KindPutQueue, QueueSettings: &st, Limit: MaxQueueSettings})
	}
	for i := range 5 {
		apply(Command{Kind: KindAdmit, ExecutionID: fmt.Sprintf("e%d", i), WorkflowID: "w"})
	}
	apply(Command{Kind: KindAdmit, ExecutionID: "other", WorkflowID: "v"})
	if r := put(QueueSettings{Name: "w", Concurrency: 2}); r.QueueSettings == nil || !r.Became.Due {
		t.Fatalf("put-queue = %+v", r)
	}
	if _, mutates := s.Precheck(&Command{Kind: KindPutQueue, Now: now, QueueSettings: &QueueSettings{Name: "w", Concurrency: 2}, Limit: MaxQueueSettings}); mutates {
		t.Fatal("an identical put-queue would be logged")
	}
	r := claim(10)
	if got := fmt.Sprint(leaseIDs(r)); got != "[e0 e1 other]" {
		t.Fatalf("claim at a limit of 2 leased %s", got)
	}
	if _, mutates := s.Precheck(&Command{Kind: KindClaim, Now: now, Limit: 10, Duration: 1000}); mutates {
		t.Fatal("a claim of a queue at its limit, nothing else due, would be logged")
	}
	if at, ok := s.NextDue(); !ok || at != now+1000 {
		t.Fatalf("NextDue = %d, %v; want the leases' expiry %d, not the due executions of the full queue", at, ok, now+1000)
	}
	ack := apply(Command{Kind: KindAcknowledge, ExecutionID: "e0", Token: r.Leases[0].Token, Outcome: Outcome{Status: StatusCompleted}})
	if !ack.Became.Due {
		t.Fatal("an acknowledgement that frees a place in a limited queue does not say something may be due")
	}
	if got := fmt.Sprint(leaseIDs(claim(10))); got != "[e2]" {
		t.Fatalf("claim after one ended leased %s", got)
	}
	now += 1000 // e1's and e2's leases expire: a claim supersedes them at the limit
	if got := fmt.Sprint(leaseIDs(claim(10))); got != "[e1 e2 other]" {
		t.Fatalf("claim of expired leases at the limit leased %s", got)
	}
	put(QueueSettings{Name: "w", Concurrency: 2, Paused: true})
	now += 1000
	if got := leaseIDs(claim(10)); len(got) != 1 || got[0] != "other" {
		t.Fatalf("claim of a paused queue leased %v", got)
	}
	if k, ok := s.NextDueIn([]string{"w"}); ok {
		t.Fatalf("NextDueIn a paused queue = %d", k)
	}
	if r := apply(Command{Kind: KindDeleteQueue, Queue: "w"}); !r.Became.Due {
		t.Fatal("deleting a pause does not say something may be due")
	}
	if _, mutates := s.Precheck(&Command{Kind: KindDeleteQueue, Now: now, Queue: "w"}); mutates {
		t.Fatal("deleting settings a queue does not have would be logged")
	}
	if got := fmt.Sprint(leaseIDs(claim(10))); got != "[e3 e4 e1 e2]" {
		t.Fatalf("claim after the settings were deleted leased %s", got)
	}
}

// The settings are bounded in number, refused when invalid, and survive an
// encoding (state version 9).
func TestQueueSettingsAreBoundedCheckedAndEncoded(t *testing.T) {
	s := New()
	for i, name := range []string{"a", "b", "c"} {
		r := s.Apply(&Command{Kind: KindPutQueue, Now: 1, QueueSettings: &QueueSettings{Name: name, Concurrency: i + 1}, Limit: 2})
		if want := map[bool]Code{true: CodeLimitExceeded, false: CodeOK}[i == 2]; r.Code != want {
			t.Fatalf("put %d of 2 = %v, want %v", i+1, r.Code, want)
		}
	}
	for _, st := range []QueueSettings{{Name: "x"}, {Name: "", Paused: true}, {Name: "x", Concurrency: -1}, {Name: "x", Concurrency: MaxQueueConcurrency + 1}} {
		c := Command{Kind: KindPutQueue, Now: 1, QueueSettings: &st, Limit: 10}
		if msg := c.Check(); msg == nil {
			t.Errorf("put-queue of %+v passes its check", st)
		}
	}
	d, err := DecodeState(bufio.NewReader(bytes.NewReader(encodeState(t, s))))
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := d.QueueSettingsOf("b"); !ok || st.Concurrency != 2 || d.QueueSettingsCount() != 2 {
		t.Fatalf("decoded settings of b = %+v, %v; %d in all", st, ok, d.QueueSettingsCount())
	}
}
