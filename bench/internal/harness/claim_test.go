package harness

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeQueue is a System without a database: counters of due, leased and
// completed executions, for the claim workload's counting.
type fakeQueue struct {
	mu                     sync.Mutex
	due, leased, completed int
	finished               int // completed by a chain's Finish
	nexts, primes          int // chain calls; primes held nothing
	leasedAtFill           int // leases outstanding when Fill ran (must stay 0)
	minDue                 int // the fewest due after a claim; -1 before the first
	delay                  time.Duration
}

func (f *fakeQueue) Name() string                       { return "fake" }
func (f *fakeQueue) Open(context.Context, string) error { return nil }
func (f *fakeQueue) Close() error                       { return nil }
func (f *fakeQueue) Admit(context.Context, string) (bool, error) {
	return false, errors.New("not used")
}

func (f *fakeQueue) Work(context.Context, int, func(string), func(string)) (func(), error) {
	return nil, errors.New("not used")
}

func (f *fakeQueue) Fill(_ context.Context, _ string, _, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leasedAtFill += f.leased
	f.due += n
	return nil
}

// take claims up to limit; f.mu is held.
func (f *fakeQueue) take(limit int) int {
	n := min(limit, f.due)
	f.due -= n
	f.leased += n
	if f.minDue < 0 || f.due < f.minDue {
		f.minDue = f.due
	}
	return n
}

// finish completes n leased; f.mu is held.
func (f *fakeQueue) finish(n int) {
	f.leased -= n
	f.completed += n
}

func (f *fakeQueue) ClaimComplete(_ context.Context, limit int) (int, error) {
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.take(limit)
	f.finish(n)
	return n, nil
}

func (f *fakeQueue) Chain() ClaimChain { return &fakeChain{f: f} }

type fakeChain struct {
	f    *fakeQueue
	held int
}

func (c *fakeChain) Next(_ context.Context, limit int) (int, int, error) {
	time.Sleep(c.f.delay)
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.nexts++
	if c.held == 0 {
		c.f.primes++
	}
	done := c.held
	c.f.finish(done)
	c.held = c.f.take(limit)
	return done, c.held, nil
}

func (c *fakeChain) Finish(context.Context) (int, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	done := c.held
	c.f.finish(done)
	c.f.finished += done
	c.held = 0
	return done, nil
}

// TestChainRoundCounts runs one chained claimer, whose counts are exact: the
// first Next only claims, untimed; the timed Nexts count what they complete;
// Finish completes what is left, outside the count.
func TestChainRoundCounts(t *testing.T) {
	ctx := context.Background()
	c := ClaimConfig{Claimers: 1, Limit: 10, Chained: true}
	f := &fakeQueue{due: 100}
	// Quota 35: Nexts complete 10, 20, 30 (under 35, so one more), 40.
	r, err := claimRound(ctx, f, c, 35, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.done != 40 || r.finished != 10 {
		t.Errorf("done %d, finished %d; want 40 in the window and 10 by Finish", r.done, r.finished)
	}
	if f.completed != 50 || f.due != 50 || f.leased != 0 || f.nexts != 5 || f.primes != 1 {
		t.Errorf("completed %d, due %d, leased %d, %d Nexts of which %d held nothing; want 50, 50, 0, 5, 1",
			f.completed, f.due, f.leased, f.nexts, f.primes)
	}

	// A quota it cannot reach: the chain stops once a claim comes back
	// empty, having completed everything in the window.
	f = &fakeQueue{due: 95}
	r, err = claimRound(ctx, f, c, 1_000, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.done != 95 || r.finished != 0 || f.completed != 95 || f.due != 0 || f.leased != 0 {
		t.Errorf("done %d, finished %d, completed %d, due %d, leased %d; want 95, 0, 95, 0, 0",
			r.done, r.finished, f.completed, f.due, f.leased)
	}

	// Past the deadline already: every chain still completes its first
	// batch in the window, so a round always counts something.
	f = &fakeQueue{due: 1_000}
	r, err = claimRound(ctx, f, ClaimConfig{Claimers: 3, Limit: 10, Chained: true}, 1_000, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.done != 30 || r.finished != 30 || f.completed != 60 || f.leased != 0 {
		t.Errorf("done %d, finished %d, completed %d, leased %d; want 30, 30, 60, 0", r.done, r.finished, f.completed, f.leased)
	}
}

// TestClaimForCounts runs whole timed runs in both modes with concurrent
// claimers: the pool's pending count must match the store's, the rate's
// numerator must be the completions in the windows (not Finish's), and
// nothing may be leased when the pool is topped up or at the end.
func TestClaimForCounts(t *testing.T) {
	ctx := context.Background()
	r := NewRunner(Config{Duration: 30 * time.Millisecond, Reps: 1, Out: io.Discard})
	for _, c := range []ClaimConfig{
		{Claimers: 4, Limit: 16}, {Claimers: 4, Limit: 16, Chained: true},
		{Claimers: 3, Limit: 64, Chained: true}, // a quota under claimers × limit
	} {
		t.Run(c.String(), func(t *testing.T) {
			f := &fakeQueue{delay: 20 * time.Microsecond, minDue: -1}
			p := &pool{s: f, size: 500}
			if err := p.topUp(ctx); err != nil {
				t.Fatal(err)
			}
			res, err := r.claimFor(ctx, p, c)
			if err != nil {
				t.Fatal(err)
			}
			if res.done == 0 || res.timed < r.Cfg.Duration {
				t.Fatalf("done %d in %v", res.done, res.timed)
			}
			if res.done+res.finished != f.completed || res.finished != f.finished {
				t.Errorf("counted %d in the windows + %d finished; the store completed %d, %d of them by Finish",
					res.done, res.finished, f.completed, f.finished)
			}
			if !c.Chained && (res.finished != 0 || f.nexts != 0) {
				t.Errorf("two calls: %d finished, %d chain calls", res.finished, f.nexts)
			}
			if f.leased != 0 || f.leasedAtFill != 0 {
				t.Errorf("%d leased at the end, %d when the pool was topped up", f.leased, f.leasedAtFill)
			}
			if p.pending != f.due {
				t.Errorf("pool pending %d, the store's due %d", p.pending, f.due)
			}
			// claimFor's quota bounds what a round claims: at most the
			// quota and the overshoot.
			if bound := p.size - max(c.Limit, p.size/2-c.overshoot()) - c.overshoot(); f.minDue <= bound {
				t.Errorf("due fell to %d, at or under %d", f.minDue, bound)
			}
		})
	}
}

func TestClaimPlanModes(t *testing.T) {
	q := QuickPlan().Claim
	for _, c := range []ClaimConfig{{1, 64, false}, {1, 64, true}, {4, 64, false}, {4, 64, true}, {16, 64, false}, {16, 64, true}} {
		if !slices.Contains(q.configsAt(10_000), c) {
			t.Errorf("the quick plan does not run %v at 10^4", c)
		}
	}
	if got := q.configsAt(100_000); len(got) != 2 || got[0].Chained == got[1].Chained {
		t.Errorf("at 10^5 the quick plan runs %v; want the scale configuration in both modes", got)
	}
	if n := len(q.configsAt(10_000)); n != 6 {
		t.Errorf("%d configurations at 10^4, want 6 (the scale one once)", n)
	}
	one, err := q.WithMode(ClaimModeOne)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range append(one.Configs, one.Scale...) {
		if !c.Chained {
			t.Errorf("-claim-mode one kept %v", c)
		}
	}
	if len(q.Configs) != 4 || len(one.Configs) != 2 || len(one.Scale) != 1 {
		t.Errorf("WithMode changed the plan it was called on, or kept the wrong ones: %v, %v", q.Configs, one)
	}
	if _, err := q.WithMode("three"); err == nil {
		t.Error("an unknown mode was accepted")
	}
}

// TestReportModes writes a report from made-up rows in both modes.
func TestReportModes(t *testing.T) {
	res := &Results{
		Claim: []ClaimRow{
			{System: nameExec, Pending: 10_000, Claimers: 1, Limit: 64, Rate: Reps{100_000}, ExecPerBatch: 32, EntriesPerBatch: 1, Floor: Reps{150_000}},
			{System: nameExec, Pending: 10_000, Claimers: 1, Limit: 64, Chained: true, Rate: Reps{200_000}, ExecPerBatch: 64, EntriesPerBatch: 2, Floor: Reps{250_000}},
			{System: "SQLite, one row per execution", Pending: 10_000, Claimers: 1, Limit: 64, Rate: Reps{50_000}},
			{System: "SQLite, one row per execution", Pending: 10_000, Claimers: 1, Limit: 64, Chained: true, Rate: Reps{80_000}},
		},
		Scale: []ScaleRow{
			{System: nameExec, Pending: 10_000, Rate: Reps{100_000}, ChainedRate: Reps{200_000}},
			{System: nameExec, Pending: 100_000, Rate: Reps{90_000}, ChainedRate: Reps{190_000}},
		},
	}
	md := reportOf(t, res)
	for _, want := range []string{
		"| execstore | 10^4 | 1 × 64 | one call | 200,000 | 64 executions, 2.0 entries | 250,000 | 0.80× |",
		"| SQLite, one row per execution | 10^4 | one call | 1 × 64 | 80,000 | 2.50× |",
		"| SQLite, one row per execution | 10^4 | two calls | 1 × 64 | 50,000 | 2.00× |",
		"| execstore | 10^5 | 90,000 | 190,000 |",
		"execstore (one call) scale curve flat",
		"one transaction",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
}

// A store that has taken more than storeExecutionsMax executions is replaced
// by a fresh one, filled again, before the next configuration; every store
// is closed once.
func TestClaimAtOpensAFreshStoreWhenOneHasTakenEnough(t *testing.T) {
	defer func(n int) { storeExecutionsMax = n }(storeExecutionsMax)
	storeExecutionsMax = 150
	var made []*countingQueue
	mk := func() System {
		q := &countingQueue{fakeQueue: fakeQueue{minDue: -1}}
		made = append(made, q)
		return q
	}
	r := NewRunner(Config{Duration: 5 * time.Millisecond, Reps: 1, Out: io.Discard, TempDir: t.TempDir()})
	plan := ClaimPlan{Pending: []int{100}, Grid: []int{100},
		Configs: []ClaimConfig{{Claimers: 1, Limit: 10}, {Claimers: 1, Limit: 10, Chained: true}, {Claimers: 2, Limit: 10}}}
	if err := r.Claim(context.Background(), mk, plan); err != nil {
		t.Fatal(err)
	}
	if len(r.Res.Claim) != 3 {
		t.Fatalf("%d rows, want 3", len(r.Res.Claim))
	}
	if len(made) < 2 {
		t.Fatalf("%d stores for 3 configurations that each take more than %d executions, want a fresh one", len(made), storeExecutionsMax)
	}
	for i, q := range made {
		if q.closes != 1 {
			t.Errorf("store %d closed %d times", i, q.closes)
		}
		if taken := q.completed; i < len(made)-1 && taken <= storeExecutionsMax/2 {
			t.Errorf("store %d replaced after only %d executions", i, taken)
		}
	}
}

// countingQueue is a fakeQueue that counts its closes.
type countingQueue struct {
	fakeQueue
	closes int
}

func (q *countingQueue) Close() error { q.closes++; return nil }

func TestClaimPlanPending(t *testing.T) {
	f := FullPlan("").Claim
	p, err := f.WithPending([]int{1_000_000, 100_000, 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{100_000, 1_000_000}; !slices.Equal(p.Pending, want) {
		t.Errorf("pending %v, want %v (sorted, once each)", p.Pending, want)
	}
	if want := []int{1_000_000}; !slices.Equal(p.Grid, want) {
		t.Errorf("grid %v, want %v (the plan's grid sizes among those given)", p.Grid, want)
	}
	if got := p.configsAt(100_000); !slices.Equal(got, f.Scale) {
		t.Errorf("at 10^5 runs %v, want only the scale configurations %v", got, f.Scale)
	}
	if got := len(p.configsAt(1_000_000)); got != len(f.Configs) {
		t.Errorf("at 10^6 runs %d configurations, want the grid's %d", got, len(f.Configs))
	}
	if len(f.Pending) != 4 || len(f.Grid) != 2 {
		t.Errorf("WithPending changed the plan it was called on: %v, %v", f.Pending, f.Grid)
	}
	if same, err := f.WithPending(nil); err != nil || !slices.Equal(same.Pending, f.Pending) {
		t.Errorf("WithPending(nil) = %v, %v; want the plan unchanged", same.Pending, err)
	}
	for _, bad := range [][]int{{}, {0}, {-5}, {pendingMax + 1}} {
		if _, err := f.WithPending(bad); err == nil {
			t.Errorf("WithPending(%v) was accepted", bad)
		}
	}
}

// TestReportAdmitAndSnapshotGoals writes the goal lines for durable Admit
// against its interleaved floor and for 10^6 against 10^5 pending.
func TestReportAdmitAndSnapshotGoals(t *testing.T) {
	res := &Results{
		Admission: []AdmissionRow{
			{System: nameExec, Producers: 64, Batch: 1, Rate: Reps{70_000, 80_000, 60_000}, PerBatch: 30,
				Floor: Reps{100_000, 90_000, 110_000}, OfFloor: Reps{0.7, 0.8, 0.6}},
		},
		Scale: []ScaleRow{
			{System: nameExec, Pending: 100_000, Rate: Reps{500_000}, ChainedRate: Reps{1_000_000}},
			{System: nameExec, Pending: 1_000_000, Rate: Reps{450_000}, ChainedRate: Reps{700_000}},
			{System: nameExecNoSync, Pending: 1_000_000, Rate: Reps{10}, ChainedRate: Reps{10}},
			{System: nameExecNoSync, Pending: 100_000, Rate: Reps{10}},
		},
	}
	md := reportOf(t, res)
	if strings.Contains(md, "execstore NoSync (one call): claim + complete at 10^6") {
		t.Error("a snapshot goal line for a series measured at 10^6 only")
	}
	for _, want := range []string{
		"≥ 70 % of raw tidwall/wal at the batch size reached (median of interleaved pairs) | execstore 70,000 (60,000–80,000)/s at 30.0 per batch, the floor 100,000 (90,000–110,000)/s; pairs 70 % (60–80 %) | **met** |",
		"| 0.70× (pairs 0.60×–0.80×) |",
		"execstore (two calls): claim + complete at 10^6 pending within 20 % of 10^5 (snapshots do not show) | 450,000/s at 10^6, 500,000/s at 10^5: 0.90× | **met** |",
		"execstore (one call): claim + complete at 10^6 pending within 20 % of 10^5 (snapshots do not show) | 700,000/s at 10^6, 1,000,000/s at 10^5: 0.70× | **missed** |",
		"execstore NoSync (two calls): claim + complete at 10^6 pending within 20 % of 10^5 (snapshots do not show) | 10/s at 10^6, 10/s at 10^5: 1.00× | **met** |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("RESULTS.md lacks %q", want)
		}
	}
}

// reportOf writes the quick plan's report of res and returns its RESULTS.md.
func reportOf(t *testing.T, res *Results) string {
	t.Helper()
	out := t.TempDir()
	if err := WriteReport(out, &Meta{}, QuickPlan(), res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
