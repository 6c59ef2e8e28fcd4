package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/lockstep"
	"github.com/execstore/execstore/metrics"
)

var ctx = context.Background()

// openWatched opens a store with m as its Metrics, watched by m.
func openWatched(t *testing.T, m *metrics.Metrics, now func() time.Time) *execstore.Store {
	t.Helper()
	s, err := execstore.Open(t.TempDir(), execstore.Options{NoSync: true, Metrics: m, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m.Watch(s)
	return s
}

// The metrics the operator's issue lists are exported under execstore_
// names, with values from the store.
func TestMetricsExportTheStoresCountersHistogramsAndGauges(t *testing.T) {
	clock := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	m := metrics.New()
	s := openWatched(t, m, func() time.Time { return clock })
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := s.ClaimDue(ctx, 2, time.Minute)
	if err != nil || len(leases) != 2 {
		t.Fatalf("claim: %v %v", leases, err)
	}
	if _, err := s.Acknowledge(ctx, leases[0], execstore.Failed(execstore.ErrInvalidArgument)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acknowledge(ctx, leases[0], execstore.Suspended()); err != nil {
		t.Fatal(err) // a terminal record: its outcome, no error
	}
	if err := s.Release(ctx, leases[0], 0); err == nil {
		t.Fatal("release of an ended lease succeeded")
	}
	if err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	want := `
# HELP execstore_executions Executions by status, retired ones included.
# TYPE execstore_executions gauge
execstore_executions{status="admitted"} 2
execstore_executions{status="cancelled"} 0
execstore_executions{status="completed"} 0
execstore_executions{status="failed"} 1
execstore_executions{status="suspended"} 0
# HELP execstore_leases Current leases: deliveries in flight.
# TYPE execstore_leases gauge
execstore_leases 1
# HELP execstore_leases_lost_total Fenced writes (renew, release, acknowledge, step, start) refused because their lease was no longer current.
# TYPE execstore_leases_lost_total counter
execstore_leases_lost_total 1
# HELP execstore_failed 1 once the store has failed on a storage error and refuses writes until reopened, else 0.
# TYPE execstore_failed gauge
execstore_failed 0
# HELP execstore_snapshots_total Snapshots finished, by result (ok, error).
# TYPE execstore_snapshots_total counter
execstore_snapshots_total{result="ok"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "execstore_executions", "execstore_leases",
		"execstore_leases_lost_total", "execstore_failed", "execstore_snapshots_total"); err != nil {
		t.Error(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range families {
		got[f.GetName()] = true
	}
	for _, name := range []string{
		"execstore_commands_total", "execstore_wal_batch_entries", "execstore_wal_batch_bytes",
		"execstore_wal_fsync_duration_seconds", "execstore_wal_write_duration_seconds",
		"execstore_admit_to_claim_seconds", "execstore_claim_to_acknowledge_seconds",
		"execstore_executions_waiting", "execstore_oldest_due_age_seconds", "execstore_leases_expired",
		"execstore_snapshot_age_seconds", "execstore_snapshot_size_bytes", "execstore_snapshot_duration_seconds",
		"execstore_wal_size_bytes", "execstore_executions_retired", "execstore_fallback_damaged",
		"execstore_snapshot_running_seconds", "execstore_executions_archived", "execstore_archive_size_bytes",
		"execstore_archive_lookups_total", "execstore_archive_forgotten_before_seconds",
	} {
		if !got[name] {
			t.Errorf("no %s", name)
		}
	}
	if n := testutil.CollectAndCount(m, "execstore_admit_to_claim_seconds"); n != 1 {
		t.Errorf("%d admit-to-claim series", n)
	}
}

// Every name, type, unit and help text passes Prometheus's own linter.
func TestMetricsFollowPrometheusNamingConventions(t *testing.T) {
	m := metrics.New()
	openWatched(t, m, nil)
	problems, err := testutil.CollectAndLint(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// Without a watched store, or once it is closed, a scrape has the counters
// and histograms and no gauges, instead of failing.
func TestAScrapeOfAClosedStoreHasNoGauges(t *testing.T) {
	m := metrics.New()
	if n := testutil.CollectAndCount(m, "execstore_leases"); n != 0 {
		t.Errorf("unwatched: %d lease series", n)
	}
	s := openWatched(t, m, nil)
	if n := testutil.CollectAndCount(m, "execstore_leases"); n != 1 {
		t.Errorf("watched: %d lease series", n)
	}
	s.Close()
	if n := testutil.CollectAndCount(m, "execstore_leases"); n != 0 {
		t.Errorf("closed: %d lease series", n)
	}
	if n := testutil.CollectAndCount(m, "execstore_leases_lost_total"); n != 1 {
		t.Errorf("closed: %d lost-lease series", n)
	}
}

// The writer's waits for its callers are counters by how they ended, with
// the store's own counts: callers admitting one after another in lockstep
// make it wait.
func TestMetricsCountTheWritersWaitsForItsCallers(t *testing.T) {
	m := metrics.New()
	s, err := execstore.Open(t.TempDir(), execstore.Options{Metrics: m, GroupWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m.Watch(s)
	if err := lockstep.Admit(ctx, s, "c", 8, 20); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.GroupWaits == 0 {
		t.Fatalf("callers in lockstep made the writer wait for none of them (%d waits at the bound)", st.GroupWaitsMissed)
	}
	want := fmt.Sprintf(`
# HELP execstore_group_waits_total The writer's waits, before a durable batch, for the callers it had just answered, by how they ended: callers (back) or bound (reached Options.GroupWait).
# TYPE execstore_group_waits_total counter
execstore_group_waits_total{ended="bound"} %d
execstore_group_waits_total{ended="callers"} %d
`, st.GroupWaitsMissed, st.GroupWaits)
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "execstore_group_waits_total"); err != nil {
		t.Error(err)
	}
}

// Each queue's executions, limit and pause are exported per queue, at most
// execstore.GaugesQueues queues in name order, the rest counted.
func TestMetricsExportEachQueuesCountsLimitAndPauseBounded(t *testing.T) {
	clock := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	m := metrics.New()
	s := openWatched(t, m, func() time.Time { return clock })
	for i := range 3 {
		if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("c-%d", i), WorkflowID: "charge"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.PutQueue(ctx, execstore.QueueSettings{Name: "charge", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutQueue(ctx, execstore.QueueSettings{Name: "mail", Paused: true, Rate: 5, RatePeriod: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if leases, err := s.ClaimDue(ctx, 10, time.Minute); err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v %v", leases, err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	want := `
# HELP execstore_queue_concurrency_limit Each queue's concurrency limit (0: none), for the queues execstore_queue_executions exports.
# TYPE execstore_queue_concurrency_limit gauge
execstore_queue_concurrency_limit{queue="charge"} 1
execstore_queue_concurrency_limit{queue="mail"} 0
# HELP execstore_queue_paused 1 when the queue is paused (claims take nothing from it), else 0, for the queues execstore_queue_executions exports.
# TYPE execstore_queue_paused gauge
execstore_queue_paused{queue="charge"} 0
execstore_queue_paused{queue="mail"} 1
# HELP execstore_queue_rate_limit Each queue's rate limit per second (its Rate over its RatePeriod; 0: none), for the queues execstore_queue_executions exports.
# TYPE execstore_queue_rate_limit gauge
execstore_queue_rate_limit{queue="charge"} 0
execstore_queue_rate_limit{queue="mail"} 50
# HELP execstore_queues_omitted Queues with settings or live executions left out of the per-queue series (past execstore.GaugesQueues in name order).
# TYPE execstore_queues_omitted gauge
execstore_queues_omitted 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "execstore_queue_concurrency_limit", "execstore_queue_paused", "execstore_queue_rate_limit", "execstore_queues_omitted"); err != nil {
		t.Error(err)
	}
	for state, n := range map[string]float64{"live": 3, "due": 2, "leased": 1, "expired": 0} {
		g, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range g {
			for _, mm := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range mm.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if f.GetName() == "execstore_queue_executions" && labels["queue"] == "charge" && labels["state"] == state {
					found = true
					if mm.GetGauge().GetValue() != n {
						t.Errorf("charge %s = %v, want %v", state, mm.GetGauge().GetValue(), n)
					}
				}
			}
		}
		if !found {
			t.Errorf("no execstore_queue_executions{queue=charge,state=%s}", state)
		}
	}
	for i := range execstore.GaugesQueues + 5 {
		if _, err := s.PutQueue(ctx, execstore.QueueSettings{Name: fmt.Sprintf("q-%03d", i), Paused: true}); err != nil {
			t.Fatal(err)
		}
	}
	if n := testutil.CollectAndCount(m, "execstore_queue_paused"); n != execstore.GaugesQueues {
		t.Errorf("%d execstore_queue_paused series, want the bound %d", n, execstore.GaugesQueues)
	}
	g, err := s.Gauges(ctx)
	if err != nil || g.QueuesOmitted != 7 {
		t.Fatalf("QueuesOmitted = %d, %v; want 7 (107 queues, 100 shown)", g.QueuesOmitted, err)
	}
}
