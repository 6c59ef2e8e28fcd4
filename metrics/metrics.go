// Package metrics exports an execstore.Store's measurements to Prometheus.
//
// The store itself knows nothing of Prometheus: it takes an optional
// execstore.Metrics observer, which its writer calls with what happens
// (commands and their results, log batches and fsync times, claim and
// acknowledgement latencies, lost leases, snapshots), and it answers
// Store.Gauges with what it holds (executions by status, the backlog,
// leases, the log's and the newest snapshot's size and age, whether it has
// failed). Metrics is both: the observer, keeping counters and histograms,
// and a prometheus.Collector that reads the gauges at each scrape.
//
//	m := metrics.New()
//	store, err := execstore.Open(dir, execstore.Options{Metrics: m})
//	...
//	m.Watch(store)
//	prometheus.MustRegister(m)
//
// A program that does not import this package does not link Prometheus.
// Every name has the execstore_ prefix; durations are in seconds and sizes
// in bytes, as Prometheus's conventions ask.
package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/execstore/execstore"
)

// Metrics is an execstore.Metrics that keeps Prometheus counters and
// histograms, and a prometheus.Collector of them and of the watched
// store's gauges.
type Metrics struct {
	commands      *prometheus.CounterVec
	batchEntries  prometheus.Histogram
	batchBytes    prometheus.Histogram
	walWrite      prometheus.Histogram
	fsync         prometheus.Histogram
	admitToClaim  prometheus.Histogram
	claimToAck    prometheus.Histogram
	leasesLost    prometheus.Counter
	snapshots     *prometheus.CounterVec
	snapshotTimes prometheus.Histogram

	store atomic.Pointer[execstore.Store]
	now   func() time.Time // for the snapshot's age; time.Now
}

var _ execstore.Metrics = (*Metrics)(nil)
var _ prometheus.Collector = (*Metrics)(nil)

// New returns Metrics with every counter at zero and no store watched.
func New() *Metrics {
	exp := prometheus.ExponentialBuckets
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	return &Metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "execstore_commands_total",
			Help: "Commands answered, by kind and result (ok, conflict, not_found, lease_lost, lease_cancelled, mismatch, limit_exceeded, error); those answered without a write count too.",
		}, []string{"kind", "result"}),
		batchEntries: hist("execstore_wal_batch_entries", "Entries in one write-ahead log batch (one write, one fsync).", exp(1, 2, 13)),
		batchBytes:   hist("execstore_wal_batch_bytes", "Encoded bytes of one write-ahead log batch.", exp(64, 4, 12)),
		walWrite:     hist("execstore_wal_write_duration_seconds", "Time to write one batch to the log and make it durable.", exp(25e-6, 2, 17)),
		fsync:        hist("execstore_wal_fsync_duration_seconds", "Time spent in fsync for one batch (0 with NoSync).", exp(25e-6, 2, 17)),
		admitToClaim: hist("execstore_admit_to_claim_seconds", "Store time from an execution's admission to its first claim.", exp(100e-6, 4, 12)),
		claimToAck:   hist("execstore_claim_to_acknowledge_seconds", "Store time from a claim to the acknowledgement of its lease.", exp(100e-6, 4, 12)),
		leasesLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "execstore_leases_lost_total",
			Help: "Fenced writes (renew, release, acknowledge, step, start) refused because their lease was no longer current.",
		}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "execstore_snapshots_total",
			Help: "Snapshots finished, by result (ok, error).",
		}, []string{"result"}),
		snapshotTimes: hist("execstore_snapshot_duration_seconds", "Time to write, check, prune and compact behind one snapshot.", exp(0.001, 4, 10)),
		now:           time.Now,
	}
}

// Watch makes each scrape read s's gauges (Store.Gauges). Until it is
// called, or after s is closed, a scrape has only the counters and
// histograms.
func (m *Metrics) Watch(s *execstore.Store) { m.store.Store(s) }

// ---- execstore.Metrics ---------------------------------------------------

func (m *Metrics) Commands(kind, result string, n int) {
	m.commands.WithLabelValues(kind, result).Add(float64(n))
}

func (m *Metrics) Batch(entries, bytes int, write, fsync time.Duration) {
	m.batchEntries.Observe(float64(entries))
	m.batchBytes.Observe(float64(bytes))
	m.walWrite.Observe(write.Seconds())
	m.fsync.Observe(fsync.Seconds())
}

func (m *Metrics) Claimed(sinceAdmission time.Duration) {
	m.admitToClaim.Observe(sinceAdmission.Seconds())
}

func (m *Metrics) Acknowledged(sinceClaim time.Duration) { m.claimToAck.Observe(sinceClaim.Seconds()) }

func (m *Metrics) LeasesLost(n int) { m.leasesLost.Add(float64(n)) }

func (m *Metrics) Snapshot(bytes int64, took time.Duration, err error) {
	if err != nil {
		m.snapshots.WithLabelValues("error").Inc()
		return
	}
	m.snapshots.WithLabelValues("ok").Inc()
	m.snapshotTimes.Observe(took.Seconds())
}

// ---- prometheus.Collector --------------------------------------------------

// gauge describes one gauge (or counter) read from Store.Gauges.
type gauge struct {
	desc  *prometheus.Desc
	value func(m *Metrics, g *execstore.Gauges) float64
	kind  prometheus.ValueType
}

func newGauge(name, help string, value func(m *Metrics, g *execstore.Gauges) float64) gauge {
	return gauge{desc: prometheus.NewDesc(name, help, nil, nil), value: value, kind: prometheus.GaugeValue}
}

// newCounter is a counter the store keeps, read from Store.Gauges.
func newCounter(name, help string, value func(m *Metrics, g *execstore.Gauges) float64) gauge {
	return gauge{desc: prometheus.NewDesc(name, help, nil, nil), value: value, kind: prometheus.CounterValue}
}

var (
	executionsDesc = prometheus.NewDesc("execstore_executions",
		"Executions by status, retired ones included.", []string{"status"}, nil)
	queueExecutionsDesc = prometheus.NewDesc("execstore_queue_executions",
		"Each queue's executions by state: live (not terminal), due (due now, no current lease), leased (current leases, what a concurrency limit counts), expired (leases past their expiry), parked (waiting for a slot of their concurrency key). At most execstore.GaugesQueues queues, those with settings or live executions first in name order; execstore_queues_omitted counts the rest.", []string{"queue", "state"}, nil)
	queueLimitDesc = prometheus.NewDesc("execstore_queue_concurrency_limit",
		"Each queue's concurrency limit (0: none), for the queues execstore_queue_executions exports.", []string{"queue"}, nil)
	queuePausedDesc = prometheus.NewDesc("execstore_queue_paused",
		"1 when the queue is paused (claims take nothing from it), else 0, for the queues execstore_queue_executions exports.", []string{"queue"}, nil)
	queueRateDesc = prometheus.NewDesc("execstore_queue_rate_limit",
		"Each queue's rate limit per second (its Rate over its RatePeriod; 0: none), for the queues execstore_queue_executions exports.", []string{"queue"}, nil)
	queueGrantedDesc = prometheus.NewDesc("execstore_queue_rate_granted",
		"The leases granted of each rate-limited queue within its rate's window ending now (at most its Rate), for the queues execstore_queue_executions exports.", []string{"queue"}, nil)
	queueKeyLimitDesc = prometheus.NewDesc("execstore_queue_key_limit",
		"Each queue's limit of executions per concurrency key holding a slot at once (0: none), for the queues execstore_queue_executions exports.", []string{"queue"}, nil)
	groupWaitsDesc = prometheus.NewDesc("execstore_group_waits_total",
		"The writer's waits, before a durable batch, for the callers it had just answered, by how they ended: callers (back) or bound (reached Options.GroupWait).", []string{"ended"}, nil)

	gauges = []gauge{
		newGauge("execstore_executions_retired", "Terminal executions retired (params, context and steps dropped).",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.Retired) }),
		newGauge("execstore_executions_archived", "Retired executions in the archive on disk (Options.Archive), counted in execstore_executions_retired.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.Archived) }),
		newGauge("execstore_archive_size_bytes", "The archive's files on disk (Options.Archive).",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.ArchiveBytes) }),
		newCounter("execstore_archive_lookups_total", "Reads of the archive since the store opened: IDs not in memory that the state machine checked (admissions, wakes, acknowledgements) and reads that fell through to the archive.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.ArchiveLookups) }),
		newGauge("execstore_archive_forgotten_before_seconds", "The forget cutoff (Options.ForgetAfter), in Unix seconds: archived executions that ended before it are forgotten; 0 if none ever was.",
			func(_ *Metrics, g *execstore.Gauges) float64 {
				if g.ForgottenBefore.IsZero() {
					return 0
				}
				return float64(g.ForgottenBefore.UnixNano()) / 1e9
			}),
		newGauge("execstore_executions_waiting", "Executions waiting for a wake, due now or later, without a current lease.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.Waiting) }),
		newGauge("execstore_due_executions", "The due backlog: executions a claim now would take (a wake due, no current lease).",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.DueNow) }),
		newGauge("execstore_oldest_due_age_seconds", "How long the earliest claimable execution has been claimable (0 when nothing is): the age of the due backlog.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return g.OldestDueAge.Seconds() }),
		newGauge("execstore_leases", "Current leases: deliveries in flight.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.Leases) }),
		newGauge("execstore_leases_expired", "Current leases past their expiry, waiting for a claim to deliver again.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.LeasesExpired) }),
		newGauge("execstore_queues_omitted", "Queues with settings or live executions left out of the per-queue series (past execstore.GaugesQueues in name order).",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.QueuesOmitted) }),
		newGauge("execstore_schedules", "Schedules defined.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.Schedules) }),
		newGauge("execstore_wal_size_bytes", "Size of the write-ahead log's directory.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.WALBytes) }),
		newGauge("execstore_wal_segments", "Segment files of the write-ahead log.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.WALSegments) }),
		newGauge("execstore_wal_last_index", "Index of the last entry written to the log.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.WALLastIndex) }),
		newGauge("execstore_queued_commands", "Commands waiting for the writer.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.Queued) }),
		newGauge("execstore_snapshot_size_bytes", "Size of the newest snapshot (0 if none).",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.SnapshotBytes) }),
		newGauge("execstore_snapshot_age_seconds", "Time since the newest snapshot was written (0 if none).",
			func(m *Metrics, g *execstore.Gauges) float64 {
				if g.SnapshotAt.IsZero() {
					return 0
				}
				return m.now().Sub(g.SnapshotAt).Seconds()
			}),
		newGauge("execstore_snapshot_last_duration_seconds", "Time the newest snapshot written since the store opened took (0 if none).",
			func(_ *Metrics, g *execstore.Gauges) float64 { return g.SnapshotTook.Seconds() }),
		newGauge("execstore_snapshot_running_seconds", "How long the snapshot being written in the background has run (0 if none is).",
			func(_ *Metrics, g *execstore.Gauges) float64 { return g.SnapshotRunning.Seconds() }),
		newGauge("execstore_failed", "1 once the store has failed on a storage error and refuses writes until reopened, else 0.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return bool01(g.Failed != nil) }),
		newGauge("execstore_fallback_damaged", "1 when the background check found the fallback recovery path (older snapshot and log) damaged, else 0.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return bool01(g.FallbackErr != nil) }),
		newGauge("execstore_clock_behind_seconds", "How far the clock reads behind the store's time at the latest stamp (0 once it caught up).",
			func(_ *Metrics, g *execstore.Gauges) float64 { return g.ClockBehind.Seconds() }),
		newGauge("execstore_change_feed_position", "The latest position of the change feed.",
			func(_ *Metrics, g *execstore.Gauges) float64 { return float64(g.LastChange) }),
	}
)

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *Metrics) owned() []prometheus.Collector {
	return []prometheus.Collector{m.commands, m.batchEntries, m.batchBytes, m.walWrite, m.fsync,
		m.admitToClaim, m.claimToAck, m.leasesLost, m.snapshots, m.snapshotTimes}
}

// Describe sends every metric's description.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.owned() {
		c.Describe(ch)
	}
	ch <- executionsDesc
	ch <- queueExecutionsDesc
	ch <- queueLimitDesc
	ch <- queuePausedDesc
	ch <- queueRateDesc
	ch <- queueGrantedDesc
	ch <- queueKeyLimitDesc
	ch <- groupWaitsDesc
	for _, g := range gauges {
		ch <- g.desc
	}
}

// scrapeTimeout bounds the read of the gauges in one scrape.
const scrapeTimeout = 5 * time.Second

// Collect sends the counters and histograms, and the watched store's
// gauges as they are now.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.owned() {
		c.Collect(ch)
	}
	s := m.store.Load()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	g, err := s.Gauges(ctx)
	if err != nil {
		return // closed: no gauges rather than wrong ones
	}
	for _, st := range []execstore.Status{execstore.StatusAdmitted, execstore.StatusSuspended,
		execstore.StatusCompleted, execstore.StatusFailed, execstore.StatusCancelled} {
		ch <- prometheus.MustNewConstMetric(executionsDesc, prometheus.GaugeValue, float64(g.ByStatus[st]), string(st))
	}
	for _, gg := range gauges {
		ch <- prometheus.MustNewConstMetric(gg.desc, gg.kind, gg.value(m, &g))
	}
	for _, q := range g.Queues {
		for state, n := range map[string]int{"live": q.Live, "due": q.Due, "leased": q.Leased, "expired": q.Expired, "parked": q.Parked} {
			ch <- prometheus.MustNewConstMetric(queueExecutionsDesc, prometheus.GaugeValue, float64(n), q.Name, state)
		}
		ch <- prometheus.MustNewConstMetric(queueLimitDesc, prometheus.GaugeValue, float64(q.Concurrency), q.Name)
		ch <- prometheus.MustNewConstMetric(queuePausedDesc, prometheus.GaugeValue, bool01(q.Paused), q.Name)
		perSecond := 0.0
		if q.Rate > 0 {
			perSecond = float64(q.Rate) / q.RatePeriod.Seconds()
		}
		ch <- prometheus.MustNewConstMetric(queueRateDesc, prometheus.GaugeValue, perSecond, q.Name)
		ch <- prometheus.MustNewConstMetric(queueGrantedDesc, prometheus.GaugeValue, float64(q.Granted), q.Name)
		ch <- prometheus.MustNewConstMetric(queueKeyLimitDesc, prometheus.GaugeValue, float64(q.KeyLimit), q.Name)
	}
	ch <- prometheus.MustNewConstMetric(groupWaitsDesc, prometheus.CounterValue, float64(g.GroupWaits), "callers")
	ch <- prometheus.MustNewConstMetric(groupWaitsDesc, prometheus.CounterValue, float64(g.GroupWaitsMissed), "bound")
}
