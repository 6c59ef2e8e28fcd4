package fsm

import (
	stdcmp "cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// claimModel is what a claim of the named queues (every queue when none)
// at now must take, computed from the records and the queues' settings: the
// executions of those queues claimable at now (a due wake, or an expired
// lease), in (time, ID) order, none of a paused queue and no more due wakes
// of a queue with a concurrency limit than its room, up to limit leased and
// FailLimit(limit) failed, stopping at whichever bound comes first. It
// returns the IDs leased and failed.
func claimModel(s *State, names []string, limit int, now int64, grants *grantHistory) (leased, failed []string) {
	type cand struct {
		prio      int
		at        int64
		id        string
		exhausted bool
		leased    bool
		queue     string
	}
	var cands []cand
	leasedIn := map[string]int{} // current leases by queue
	parked := parkedByRecords(s) // waiting for a slot of their key: none is taken
	s.execs.Scan(func(it execItem) bool {
		e := s.rec(it).Value()
		if e.Leased() {
			leasedIn[e.QueueName()]++
		}
		if (len(names) > 0 && !slices.Contains(names, e.QueueName())) || parked[e.ID] {
			return true
		}
		if at, ok := e.ClaimableAt(); ok && at <= now {
			cands = append(cands, cand{int(s.priorityOf(e.ID)), at, e.ID, e.Exhausted(), e.Leased(), e.QueueName()})
		}
		return true
	})
	// A paused queue gives nothing; one with a concurrency limit, at most
	// its room of due executions (its expired leases are superseded, not
	// added).
	room := func(q string) int {
		st, _ := s.QueueSettingsOf(q)
		switch {
		case st.Paused:
			return -1
		case st.Concurrency > 0:
			return max(0, st.Concurrency-leasedIn[q])
		}
		return limit
	}
	// A rate limit leaves a claim its rate less the grants within the
	// period before now; once a queue's are taken, or if there are none, the
	// claim takes nothing more of it.
	rateRoom := func(q string) int {
		st, _ := s.QueueSettingsOf(q)
		if st.Rate == 0 {
			return limit
		}
		return max(0, st.Rate-grants.inWindow(q, st.Period, now))
	}
	dueTaken, taken := map[string]int{}, map[string]int{}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.prio != b.prio {
			return stdcmp.Compare(a.prio, b.prio)
		}
		if a.at != b.at {
			return stdcmp.Compare(a.at, b.at)
		}
		return strings.Compare(a.id, b.id)
	})
	for _, c := range cands {
		if len(leased) == limit || len(failed) == FailLimit(limit) {
			break
		}
		r := room(c.queue)
		if r < 0 || taken[c.queue] == rateRoom(c.queue) || (!c.leased && dueTaken[c.queue] == r) {
			continue
		}
		if !c.leased {
			dueTaken[c.queue]++
		}
		if c.exhausted {
			failed = append(failed, c.id)
		} else {
			leased = append(leased, c.id)
			taken[c.queue]++
		}
	}
	return leased, failed
}

// A claim takes, from the queues it names (every queue when it names none),
// exactly what one index of those queues' executions would give: the
// earliest claimable in (time, ID) order, within its bounds; an execution
// of another queue is never leased, whatever is due there. The default
// queue is the workflow's name, so naming it reaches the executions admitted
// without a queue and those admitted to the workflow's name.
func TestAClaimTakesFromTheQueuesItNamesInTimeThenIDOrder(t *testing.T) {
	claims, withQueues, leasedTotal, rateLimited, keyParked := 0, 0, 0, 0, 0
	for seed := uint64(1); seed <= 60; seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 35)), now: 1000}
		s := New()
		grants := newGrantHistory()
		for i := range 400 {
			c := g.next()
			if c.Kind == KindClaim && c.RequestKey == "" {
				if len(parkedByRecords(s)) > 0 {
					keyParked++
				}
				wantLeased, wantFailed := claimModel(s, c.Queues, c.Limit, c.Now, grants)
				r := grants.apply(s, &c)
				var gotLeased []string
				for _, l := range r.Leases {
					gotLeased = append(gotLeased, l.ExecutionID)
				}
				if diff := cmp.Diff(wantLeased, gotLeased); diff != "" {
					t.Fatalf("seed %d op %d: claim of %q limit %d leased (-want +got):\n%s", seed, i, c.Queues, c.Limit, diff)
				}
				for _, id := range wantFailed {
					if e, _ := s.Get(id); e.Status != StatusFailed {
						t.Fatalf("seed %d op %d: claim of %q did not fail %q, whose last attempt expired: %v", seed, i, c.Queues, id, e.Status)
					}
				}
				g.observe(r)
				claims++
				leasedTotal += len(gotLeased)
				if len(c.Queues) > 0 {
					withQueues++
				}
			} else {
				g.observe(grants.apply(s, &c))
			}
			if err := s.CheckInvariants(); err != nil {
				t.Fatalf("seed %d op %d (%s): %v", seed, i, c.Kind, err)
			}
		}
		rateLimited += grants.held
	}
	if keyParked < 15 {
		t.Fatalf("only %d claims met an execution waiting for its key's slot: the test reaches too little", keyParked)
	}
	if rateLimited < 20 {
		t.Fatalf("only %d claims met a rate limit: the test reaches too little", rateLimited)
	}
	if withQueues < 100 || leasedTotal < 500 {
		t.Fatalf("only %d claims naming queues and %d leases in %d claims: the test reaches too little", withQueues, leasedTotal, claims)
	}
}

// With many queues, a claim of every queue and a claim of several named
// ones merge them in (time, ID) order; each queue's indexes are cut by what
// was taken from them, and queues whose executions all ended are dropped.
func TestClaimsOverManyQueuesMergeThemAndDropTheEmptyOnes(t *testing.T) {
	s := New()
	now := int64(1000)
	for i := range 200 {
		now++
		s.Apply(&Command{Kind: KindAdmit, Now: now, ExecutionID: fmt.Sprintf("e%03d", i), WorkflowID: "w", Queue: fmt.Sprintf("q%02d", i%40)})
	}
	if s.QueueCount() != 40 {
		t.Fatalf("%d queues, want 40", s.QueueCount())
	}
	sel := []string{"q03", "q07", "q38", "zz"}
	r := s.Apply(&Command{Kind: KindClaim, Now: now, Limit: 7, Duration: 1000, Queues: sel})
	var got []string
	for _, l := range r.Leases {
		got = append(got, l.ExecutionID)
	}
	want := []string{"e003", "e007", "e038", "e043", "e047", "e078", "e083"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("claim of %q (-want +got):\n%s", sel, diff)
	}
	r = s.Apply(&Command{Kind: KindClaim, Now: now, Limit: 3, Duration: 1000})
	got = got[:0]
	for _, l := range r.Leases {
		got = append(got, l.ExecutionID)
		s.Apply(&Command{Kind: KindAcknowledge, Now: now, ExecutionID: l.ExecutionID, Token: l.Token, Outcome: Outcome{Status: StatusCompleted}})
	}
	if diff := cmp.Diff([]string{"e000", "e001", "e002"}, got); diff != "" {
		t.Fatalf("claim of every queue (-want +got):\n%s", diff)
	}
	// Everything else ends; each queue is dropped with its last execution.
	for s.DueLen() > 0 {
		now += 2000
		for _, l := range s.Apply(&Command{Kind: KindClaim, Now: now, Limit: 64, Duration: 1000}).Leases {
			s.Apply(&Command{Kind: KindAcknowledge, Now: now, ExecutionID: l.ExecutionID, Token: l.Token, Outcome: Outcome{Status: StatusCompleted}})
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if s.QueueCount() != 0 {
		t.Fatalf("%d queues kept after every execution ended", s.QueueCount())
	}
}

// An admission or a child start that names the workflow's own queue is in
// the default queue: the record keeps no name. A child is in its own
// workflow's queue unless its start names one.
func TestTheWorkflowsOwnQueueIsTheDefault(t *testing.T) {
	s := New()
	s.Apply(&Command{Kind: KindAdmit, Now: 10, ExecutionID: "a", WorkflowID: "w", Queue: "w"})
	s.Apply(&Command{Kind: KindAdmit, Now: 10, ExecutionID: "b", WorkflowID: "w"})
	s.Apply(&Command{Kind: KindAdmit, Now: 10, ExecutionID: "c", WorkflowID: "w", Queue: "emails"})
	for id, want := range map[string]string{"a": "", "b": "", "c": "emails"} {
		if e, _ := s.Get(id); e.Queue != want || e.QueueName() != map[bool]string{true: "w", false: want}[want == ""] {
			t.Fatalf("%s: queue %q (%q), want %q", id, e.Queue, e.QueueName(), want)
		}
	}
	r := s.Apply(&Command{Kind: KindClaim, Now: 10, Limit: 5, Duration: 1000, Queues: []string{"w"}})
	if len(r.Leases) != 2 {
		t.Fatalf("claim of queue w leased %+v, want a and b", r.Leases)
	}
	lease := r.Leases[0]
	s.Apply(&Command{Kind: KindStart, Now: 11, ExecutionID: lease.ExecutionID, Token: lease.Token, Key: "k", WorkflowID: "child", ChildID: "a-child"})
	s.Apply(&Command{Kind: KindStart, Now: 11, ExecutionID: lease.ExecutionID, Token: lease.Token, Key: "k2", WorkflowID: "child", ChildID: "a-child2", Queue: "emails"})
	if e, _ := s.Get("a-child"); e.QueueName() != "child" {
		t.Fatalf("a child started without a queue is in %q, want its own workflow's", e.QueueName())
	}
	if e, _ := s.Get("a-child2"); e.QueueName() != "emails" {
		t.Fatalf("a child started in queue emails is in %q", e.QueueName())
	}
	if r := s.Apply(&Command{Kind: KindClaim, Now: 12, Limit: 5, Duration: 1000, Queues: []string{"emails"}}); len(r.Leases) != 2 {
		t.Fatalf("claim of queue emails leased %+v, want c and a-child2", r.Leases)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// grantHistory is every lease granted of each queue with a rate limit since
// its rate was put: the claims' model of a rate window, kept apart from the
// state's own log of runs. held counts the claims that found a window full.
type grantHistory struct {
	times map[string][]int64
	held  int
}

func newGrantHistory() *grantHistory { return &grantHistory{times: map[string][]int64{}} }

// inWindow counts a queue's grants within its period before now.
func (h *grantHistory) inWindow(q string, period, now int64) int {
	n := 0
	for _, at := range h.times[q] {
		if at > now-period {
			n++
		}
	}
	return n
}

// apply applies c to s (whose time c.Now never precedes), and notes the
// leases it granted and the rate limits it put, started afresh or removed.
func (h *grantHistory) apply(s *State, c *Command) Result {
	var old QueueSettings
	replay := false
	switch c.Kind {
	case KindPutQueue:
		old, _ = s.QueueSettingsOf(c.QueueSettings.Name)
	case KindClaim:
		if c.RequestKey != "" {
			_, replay = s.liveGrant(c.RequestKey, c.Now) // it grants nothing new
		}
		for q := range h.times {
			if st, _ := s.QueueSettingsOf(q); h.inWindow(q, st.Period, c.Now) == st.Rate {
				h.held++
				break
			}
		}
	}
	r := s.Apply(c)
	switch c.Kind {
	case KindPutQueue:
		if st, _ := s.QueueSettingsOf(c.QueueSettings.Name); st.Rate == 0 || st.Rate != old.Rate || st.Period != old.Period {
			delete(h.times, st.Name)
			if st.Rate > 0 {
				h.times[st.Name] = []int64{}
			}
		}
	case KindDeleteQueue:
		delete(h.times, c.Queue)
	case KindClaim:
		if replay {
			break
		}
		for _, l := range r.Leases {
			e, _ := s.Get(l.ExecutionID)
			if _, ok := h.times[e.QueueName()]; ok {
				h.times[e.QueueName()] = append(h.times[e.QueueName()], c.Now)
			}
		}
	}
	return r
}
