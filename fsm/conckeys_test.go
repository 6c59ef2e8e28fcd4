package fsm

import (
	stdcmp "cmp"
	"slices"
	"strings"
	"testing"
)

// parkedByRecords returns the executions that wait parked for a slot of
// their concurrency key, worked out from the records and the queues'
// settings alone: of each key's waiting executions (a pending wake, no
// slot held), in (due time, ID) order, all but the first limit − holders.
func parkedByRecords(s *State) map[string]bool {
	type group struct {
		holders int
		waiting []*Execution
	}
	groups := map[[2]string]*group{}
	var limit = map[string]int{}
	s.execs.Scan(func(it execItem) bool {
		e := s.rec(it).Value()
		key := s.ConcurrencyKeyOf(e.ID)
		st, _ := s.QueueSettingsOf(e.QueueName())
		if key == "" || st.KeyLimit == 0 || e.Terminal() {
			return true
		}
		limit[e.QueueName()] = st.KeyLimit
		g := groups[[2]string{e.QueueName(), key}]
		if g == nil {
			g = &group{}
			groups[[2]string{e.QueueName(), key}] = g
		}
		switch {
		case e.Leased() || (st.KeyLive && e.LastToken != 0):
			g.holders++
		case e.DueAt != 0:
			g.waiting = append(g.waiting, &e)
		}
		return true
	})
	parked := map[string]bool{}
	for qk, g := range groups {
		slices.SortFunc(g.waiting, func(a, b *Execution) int {
			if c := stdcmp.Compare(a.DueAt, b.DueAt); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		for _, e := range g.waiting[min(len(g.waiting), max(0, limit[qk[0]]-g.holders)):] {
			parked[e.ID] = true
		}
	}
	return parked
}

// A queue's key limit gives each key at most that many slots: with the
// leased meaning, a slot is held while leased, so an acknowledgement or a
// suspension gives it to the key's next waiting execution, in (due time,
// ID) order whatever its priority; executions without a key, and keys of
// other queues, are not limited.
func TestAKeyLimitLeasesAtMostItsLimitOfAKeyAtOnce(t *testing.T) {
	s := New()
	now := int64(1000)
	apply := checkedApply(t, s, &now)
	apply(Command{Kind: KindPutQueue, QueueSettings: &QueueSettings{Name: "q", KeyLimit: 1}, Limit: MaxQueueSettings})
	admit := func(id, key string, prio int) {
		now++
		apply(Command{Kind: KindAdmit, ExecutionID: id, WorkflowID: "w", Queue: "q", ConcurrencyKey: key, Priority: prio})
	}
	admit("a1", "A", 0)
	admit("a2", "A", PriorityFirst) // first in priority, second in its key's order
	admit("b1", "B", 0)
	admit("n1", "", 0)
	apply(Command{Kind: KindAdmit, ExecutionID: "o1", WorkflowID: "w", ConcurrencyKey: "A"}) // another queue
	if st := s.QueueStatsOf("q", now); st.Parked != 1 || st.Due != 3 {
		t.Fatalf("queue counts %+v, want a2 parked and three due", st)
	}
	r := apply(Command{Kind: KindClaim, Limit: 10, Duration: 100})
	if got := strings.Join(leaseIDs(r), " "); got != "a1 b1 n1 o1" {
		t.Fatalf("claim leased %q, want one of each key and everything without a limit", got)
	}
	if r := apply(Command{Kind: KindClaim, Limit: 10, Duration: 100}); len(r.Leases) != 0 {
		t.Fatalf("a claim with every key at its limit leased %v", leaseIDs(r))
	}
	// a1 suspends: its slot goes to a2, and its own wake waits behind it.
	now += 10
	apply(Command{Kind: KindAcknowledge, ExecutionID: "a1", Token: r.Leases[0].Token, Outcome: Outcome{Status: StatusSuspended}})
	apply(Command{Kind: KindWake, ExecutionID: "a1", At: now})
	r2 := apply(Command{Kind: KindClaim, Limit: 10, Duration: 100})
	if got := strings.Join(leaseIDs(r2), " "); got != "a2" {
		t.Fatalf("claim after a1 suspended leased %q, want a2", got)
	}
	var keys []QueueKeyStats
	s.QueueKeys("q", 10, func(k QueueKeyStats) bool { keys = append(keys, k); return true })
	if want := []QueueKeyStats{{Key: "A", Holding: 1, Parked: 1}, {Key: "B", Holding: 1}}; !slices.Equal(keys, want) {
		t.Fatalf("QueueKeys %+v, want %+v", keys, want)
	}

	// Through a snapshot, the same claims.
	d := throughSnapshot(t, s)
	if err := d.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if d.ConcurrencyKeyOf("a2") != "A" || d.QueueStatsOf("q", now).Parked != 1 {
		t.Fatal("the keys or the parked execution did not survive a snapshot")
	}
}

// With the live meaning, an execution holds its key's slot from its first
// lease until it ends, through a suspension: the next waits until then.
// Its own wakes are claimed meanwhile.
func TestALiveKeyLimitRunsAKeysExecutionsOneAfterAnother(t *testing.T) {
	s := New()
	now := int64(1000)
	apply := checkedApply(t, s, &now)
	apply(Command{Kind: KindPutQueue, QueueSettings: &QueueSettings{Name: "q", KeyLimit: 1, KeyLive: true}, Limit: MaxQueueSettings})
	for _, id := range []string{"c1", "c2"} {
		now++
		apply(Command{Kind: KindAdmit, ExecutionID: id, WorkflowID: "w", Queue: "q", ConcurrencyKey: "customer"})
	}
	r := apply(Command{Kind: KindClaim, Limit: 10, Duration: 100})
	if got := strings.Join(leaseIDs(r), " "); got != "c1" {
		t.Fatalf("claim leased %q, want c1 alone", got)
	}
	apply(Command{Kind: KindAcknowledge, ExecutionID: "c1", Token: r.Leases[0].Token, Outcome: Outcome{Status: StatusSuspended}})
	apply(Command{Kind: KindWake, ExecutionID: "c1", At: now + 5})
	if r := apply(Command{Kind: KindClaim, Limit: 10, Duration: 100}); len(r.Leases) != 0 {
		t.Fatalf("a claim while c1 sleeps leased %v", leaseIDs(r))
	}
	now += 5
	r = apply(Command{Kind: KindClaim, Limit: 10, Duration: 100})
	if got := strings.Join(leaseIDs(r), " "); got != "c1" {
		t.Fatalf("claim at c1's wake leased %q, want c1 (it holds the slot)", got)
	}
	res := apply(Command{Kind: KindAcknowledge, ExecutionID: "c1", Token: r.Leases[0].Token, Outcome: Outcome{Status: StatusCompleted}})
	if !res.Became.Due {
		t.Fatal("the end of the slot's holder does not report that something may be claimable")
	}
	r = apply(Command{Kind: KindClaim, Limit: 10, Duration: 100})
	if got := strings.Join(leaseIDs(r), " "); got != "c2" {
		t.Fatalf("claim after c1 ended leased %q, want c2", got)
	}
}

// Putting a key limit on a queue that holds executions parks those beyond
// each key's slots; changing its meaning counts again; deleting it returns
// every parked execution to the claims.
func TestChangingAKeyLimitRecountsTheQueuesKeys(t *testing.T) {
	s := New()
	now := int64(1000)
	apply := checkedApply(t, s, &now)
	for i := range 6 {
		now++
		apply(Command{Kind: KindAdmit, ExecutionID: "h" + itoa(uint64(i)), WorkflowID: "w", Queue: "q", ConcurrencyKey: "hot"})
	}
	r := apply(Command{Kind: KindClaim, Limit: 2, Duration: 1000})
	apply(Command{Kind: KindAcknowledge, ExecutionID: "h0", Token: r.Leases[0].Token, Outcome: Outcome{Status: StatusSuspended}})
	put := func(st QueueSettings) {
		st.Name = "q"
		apply(Command{Kind: KindPutQueue, QueueSettings: &st, Limit: MaxQueueSettings})
	}
	put(QueueSettings{KeyLimit: 2})
	if p := s.QueueStatsOf("q", now).Parked; p != 3 { // h1 holds a slot; h2 is ready; h3–h5 wait
		t.Fatalf("%d parked under a leased limit of 2, want 3", p)
	}
	put(QueueSettings{KeyLimit: 2, KeyLive: true})
	if p := s.QueueStatsOf("q", now).Parked; p != 4 { // h0 and h1 hold both slots now
		t.Fatalf("%d parked under a live limit of 2, want 4", p)
	}
	apply(Command{Kind: KindDeleteQueue, Queue: "q"})
	if p := s.QueueStatsOf("q", now).Parked; p != 0 {
		t.Fatalf("%d parked once the limit is deleted", p)
	}
	if r := apply(Command{Kind: KindClaim, Limit: 10, Duration: 100}); len(r.Leases) != 4 {
		t.Fatalf("claim after the limit was deleted leased %v, want h2 to h5", leaseIDs(r))
	}
}

// A key with a million executions waiting costs a claim nothing: they are
// parked, in no claimable index, and the other keys' executions are claimed
// as if it were not there.
func TestAHotKeysBacklogIsNotExaminedByClaims(t *testing.T) {
	s := New()
	now := int64(1000)
	apply := func(c Command) Result { c.Now = now; return s.Apply(&c) }
	apply(Command{Kind: KindPutQueue, QueueSettings: &QueueSettings{Name: "q", KeyLimit: 1}, Limit: MaxQueueSettings})
	for i := range 20_000 {
		apply(Command{Kind: KindAdmit, ExecutionID: "hot-" + itoa(uint64(i)), WorkflowID: "w", Queue: "q", ConcurrencyKey: "hot"})
	}
	now++
	for i := range 100 {
		apply(Command{Kind: KindAdmit, ExecutionID: "cold-" + itoa(uint64(i)), WorkflowID: "w", Queue: "q", ConcurrencyKey: "k" + itoa(uint64(i))})
	}
	if n := countAtOrBefore(s.queues["q"].lanes[0].due, now); n != 101 {
		t.Fatalf("%d executions in the due index, want the hot key's first and the 100 others", n)
	}
	r := apply(Command{Kind: KindClaim, Limit: 200, Duration: 100})
	if len(r.Leases) != 101 || r.Leases[0].ExecutionID != "hot-0" {
		t.Fatalf("claim leased %d (first %q), want the hot key's first and every other key's", len(r.Leases), r.Leases[0].ExecutionID)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Bad keys and key limits are refused by the commands' checks.
func TestBadConcurrencyKeysAndKeyLimitsAreRefused(t *testing.T) {
	for _, c := range []Command{
		{Kind: KindAdmit, Now: 1, ExecutionID: "x", WorkflowID: "w", ConcurrencyKey: strings.Repeat("k", MaxConcurrencyKeyBytes+1)},
		{Kind: KindAdmit, Now: 1, ExecutionID: "x", WorkflowID: "w", ConcurrencyKey: "\xff"},
		{Kind: KindPutQueue, Now: 1, QueueSettings: &QueueSettings{Name: "q", KeyLimit: -1}, Limit: 1},
		{Kind: KindPutQueue, Now: 1, QueueSettings: &QueueSettings{Name: "q", KeyLimit: MaxQueueConcurrency + 1}, Limit: 1},
		{Kind: KindPutQueue, Now: 1, QueueSettings: &QueueSettings{Name: "q", Paused: true, KeyLive: true}, Limit: 1},
	} {
		if err := c.Check(); err == nil {
			t.Errorf("%+v passes its check", c)
		}
	}
	ok := Command{Kind: KindAdmit, Now: 1, ExecutionID: "x", WorkflowID: "w", ConcurrencyKey: strings.Repeat("k", MaxConcurrencyKeyBytes)}
	if err := ok.Check(); err != nil {
		t.Errorf("a key of %d bytes is refused: %v", MaxConcurrencyKeyBytes, err)
	}
}

// CheckInvariants finds key bookkeeping that disagrees with the records.
func TestCheckInvariantsFindsBrokenKeyBookkeeping(t *testing.T) {
	build := func() *State {
		s := New()
		now := int64(1000)
		apply := checkedApply(t, s, &now)
		apply(Command{Kind: KindPutQueue, QueueSettings: &QueueSettings{Name: "q", KeyLimit: 1}, Limit: MaxQueueSettings})
		for _, id := range []string{"a1", "a2", "a3"} {
			now++
			apply(Command{Kind: KindAdmit, ExecutionID: id, WorkflowID: "w", Queue: "q", ConcurrencyKey: "A"})
		}
		return s
	}
	ks := func(s *State) *keyState { return s.queues["q"].keyed.mut("A") }
	breaks := map[string]func(s *State){
		"a holder counted twice": func(s *State) { ks(s).holders++ },
		"a parked execution made ready outside its lane": func(s *State) {
			x, _ := ks(s).parked.PopMin()
			s.queues["q"].keyed.parked--
			ks(s).ready.Set(x)
		},
		"a ready execution out of its lane": func(s *State) {
			x, _ := ks(s).ready.Min()
			s.queues["q"].lanes[0].due.Delete(claimKey{At: x.at, e: x.e})
		},
		"the parked count off":          func(s *State) { s.queues["q"].keyed.parked++ },
		"a key without executions kept": func(s *State) { s.queues["q"].keyed.mut("B") },
	}
	for name, brk := range breaks {
		s := build()
		brk(s)
		if err := s.CheckInvariants(); err == nil {
			t.Errorf("%s: CheckInvariants found nothing", name)
		}
	}
}
