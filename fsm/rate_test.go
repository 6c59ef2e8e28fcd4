package fsm

import (
	"fmt"
	"testing"
)

// A queue's rate limit bounds the leases claims grant in every window of
// its period: a claim takes the rate less the grants within the period
// before it, counting a redelivery; with none left the queue gives nothing
// until its release time, which NextDue reports, and a grant leaves the
// count exactly a period after it was made. Putting another rate starts the
// count afresh; putting only a concurrency keeps it; the log survives a
// snapshot.
func TestARateLimitBoundsTheGrantsOfEveryWindow(t *testing.T) {
	const ms = MinRatePeriod
	s := New()
	now := int64(1000 * ms)
	apply := checkedApply(t, s, &now)
	claim := func(limit int) []string {
		return leaseIDs(apply(Command{Kind: KindClaim, Limit: limit, Duration: 50 * ms}))
	}
	put := func(st QueueSettings) {
		st.Name = "w"
		apply(Command{Kind: KindPutQueue, QueueSettings: &st, Limit: MaxQueueSettings})
	}
	for i := range 8 {
		apply(Command{Kind: KindAdmit, ExecutionID: fmt.Sprintf("e%d", i), WorkflowID: "w"})
	}
	put(QueueSettings{Rate: 3, Period: 10 * ms})
	start := now

	steps := []struct {
		at    int64 // since start
		limit int
		want  string
		next  int64 // NextDue after the claim, since start
	}{
		{0, 2, "[e0 e1]", 0},             // two of three
		{4 * ms, 5, "[e2]", 10 * ms},     // the third; the first two leave at 10 ms
		{10*ms - 1, 5, "[]", 10 * ms},    // a nanosecond early: the window is full
		{10 * ms, 5, "[e3 e4]", 14 * ms}, // the first two have left
		{14 * ms, 5, "[e5]", 20 * ms},
	}
	for _, st := range steps {
		now = start + st.at
		if got := fmt.Sprint(claim(st.limit)); got != st.want {
			t.Fatalf("claim at +%d ns leased %s, want %s", st.at, got, st.want)
		}
		if at, ok := s.NextDue(); !ok || at != start+st.next {
			t.Fatalf("after the claim at +%d ns NextDue = +%d, %v; want +%d", st.at, at-start, ok, st.next)
		}
	}
	if _, mutates := s.Precheck(&Command{Kind: KindClaim, Now: now, Limit: 5, Duration: 50 * ms}); mutates {
		t.Fatal("a claim of a queue without rate room would be logged")
	}

	// A redelivery counts: at +60 ms every lease has expired and the window
	// is empty; a claim takes three, in time order: the two never leased,
	// then the earliest expired lease.
	now = start + 60*ms
	if got := fmt.Sprint(claim(8)); got != "[e6 e7 e0]" {
		t.Fatalf("claim after the leases expired leased %s, want [e6 e7 e0]", got)
	}

	// Only the concurrency changes: the count stays. Another rate: afresh.
	put(QueueSettings{Rate: 3, Period: 10 * ms, Concurrency: 100})
	if got := claim(8); len(got) != 0 {
		t.Fatalf("a put of the same rate with a concurrency started the count afresh: leased %v", got)
	}
	put(QueueSettings{Rate: 4, Period: 10 * ms})
	if got := claim(8); len(got) != 4 {
		t.Fatalf("a put of another rate leased %v, want a fresh count of 4", got)
	}

	// The log survives a snapshot: the copy decoded gives nothing more in
	// the window, and at its release the same as the original.
	d := throughSnapshot(t, s)
	a, _ := s.NextDue()
	b, _ := d.NextDue()
	if a != b || a != now+10*ms {
		t.Fatalf("NextDue %d before a snapshot, %d after, want %d", a, b, now+10*ms)
	}
	now += 10 * ms
	c := Command{Kind: KindClaim, Now: now, Limit: 8, Duration: 50 * ms}
	if x, y := fmt.Sprint(leaseIDs(s.Apply(&c))), fmt.Sprint(leaseIDs(d.Apply(&c))); x != y {
		t.Fatalf("a claim at the release leased %s, after a snapshot %s", x, y)
	}

	// Removing the rate drops the log.
	put(QueueSettings{Concurrency: 100})
	if len(s.rates) != 0 {
		t.Fatalf("%d grant logs after the rate was removed", len(s.rates))
	}
}

// A rate limit's settings outside their bounds are refused when a command
// is checked; a log that breaks its own rules is refused when a state is
// decoded.
func TestRateSettingsAndLogsOutsideTheirBoundsAreRefused(t *testing.T) {
	for _, st := range []QueueSettings{
		{Name: "q", Rate: -1, Period: MinRatePeriod},
		{Name: "q", Rate: MaxQueueRate + 1, Period: MinRatePeriod},
		{Name: "q", Rate: 1, Period: MinRatePeriod - 1},
		{Name: "q", Rate: 1, Period: MaxRatePeriod + 1},
		{Name: "q", Rate: 1, Period: MinRatePeriod + 1},
		{Name: "q", Rate: 1},
		{Name: "q", Concurrency: 1, Period: MinRatePeriod},
	} {
		c := Command{Kind: KindPutQueue, Now: 1, QueueSettings: &st, Limit: 10}
		if err := c.Check(); err == nil {
			t.Errorf("put-queue %+v passes its check", st)
		}
	}
	for _, l := range []rateLog{
		{rate: 2, period: 10, runs: []grantRun{{at: 5, n: 1}, {at: 5, n: 1}}, total: 2},                  // out of order
		{rate: 2, period: 10, runs: []grantRun{{at: 5, n: 3}}, total: 3},                                 // over the rate
		{rate: 2, period: 10, runs: []grantRun{{at: 1, n: 1}, {at: 9, n: 2}}, total: 3},                  // over within a window
		{rate: 2, period: 10, runs: []grantRun{{at: 1, n: 1}, {at: 20, n: 1}, {at: 40, n: 1}}, total: 3}, // a run it no longer needs
		{rate: 2, period: 10, runs: []grantRun{{at: 1, n: 1}}, total: 2},                                 // counts wrong
	} {
		if msg := l.check(); msg == "" {
			t.Errorf("log %+v passes its check", l)
		}
	}
	ok := rateLog{rate: 2, period: 10, runs: []grantRun{{at: 1, n: 1}, {at: 11, n: 1}}, total: 2}
	if msg := ok.check(); msg != "" {
		t.Errorf("a valid log fails its check: %s", msg)
	}
}
