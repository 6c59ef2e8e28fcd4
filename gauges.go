package execstore

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/vfs"
)

// Gauges is what an operator watches besides Stats: the backlog, the
// leases, the log's size and the newest snapshot. Reading it costs more than
// Stats (it lists the log's files and the next due executions), so it is
// meant for a monitoring scrape, not for a hot loop.
// GaugesQueues bounds Gauges.Queues, and so the per-queue series a metrics
// scrape exports.
const GaugesQueues = 100

type Gauges struct {
	Stats

	// Leases is the number of current leases (deliveries in flight);
	// LeasesExpired is how many of them have expired and wait for a claim
	// to supersede them (a worker died or stalled).
	Leases, LeasesExpired int
	// DueNow is the due backlog: the executions a claim at the store's time
	// would take (a wake due, no current lease), LeasesExpired not included.
	DueNow int
	// Upcoming are the next claimable executions in claim order, at most
	// GaugesUpcoming of them.
	Upcoming []DueExecution
	// OldestDueAge is how long the earliest claimable execution has been
	// claimable by the store's time (Stats.NextDue before Stats.Now), zero
	// when nothing is claimable yet: the age of the oldest due backlog.
	OldestDueAge time.Duration
	// Waiting is the number of executions waiting for a wake, due now or
	// later, without a current lease (Pending less Leases).
	Waiting int
	// Schedules is the number of schedules.
	Schedules int
	// Queues are the queues with settings or live executions, in name
	// order, at most GaugesQueues of them; QueuesOmitted counts the rest.
	Queues        []QueueInfo
	QueuesOmitted int

	// WALBytes is the size of the write-ahead log's directory (its segments,
	// the zeros the tail segment is written over, the next segment's
	// prepared file, any side file): what it takes on disk. WALSegments is
	// the number of its segments.
	WALBytes    int64
	WALSegments int

	// The newest snapshot loaded at Open or written since: its size, when it
	// was written (its file's time when loaded) and how long writing it took
	// (zero when loaded). SnapshotAt is zero if there is none.
	SnapshotBytes int64
	SnapshotAt    time.Time
	SnapshotTook  time.Duration
	// SnapshotRunning is how long the snapshot being written in the
	// background has been at it (encoding, writing, reading it back);
	// zero when none is. It runs beside the writer, on the same cores.
	SnapshotRunning time.Duration
}

// GaugesUpcoming is how many of the next claimable executions Gauges lists.
const GaugesUpcoming = 10

// DueExecution is a claimable execution: when a claim may take it, and
// whether a current lease holds it (then At is the lease's expiry).
type DueExecution struct {
	ExecutionID string
	At          time.Time
	Leased      bool
}

// Gauges returns the store's gauges.
func (s *Store) Gauges(ctx context.Context) (Gauges, error) {
	st, err := s.Stats(ctx)
	if err != nil {
		return Gauges{}, err
	}
	g := Gauges{Stats: st}
	now, _ := nanosFromTime(st.Now)
	err = s.readLocal(ctx, func(state *fsm.State) {
		g.DueNow, g.Leases, g.LeasesExpired = state.Backlog(now) // O(log² n): the trees count their nodes
		state.Upcoming(GaugesUpcoming, func(at int64, id string, leased bool) bool {
			g.Upcoming = append(g.Upcoming, DueExecution{ExecutionID: id, At: timeFromNanos(at), Leased: leased})
			return true
		})
		g.Schedules = state.ScheduleCount()
		g.Queues = queuesPage(state, "", GaugesQueues, max(now, state.Meta().Now))
		g.QueuesOmitted = queuesCount(state) - len(g.Queues)
	})
	if err != nil {
		return Gauges{}, err
	}
	g.Waiting = max(0, st.Pending-g.Leases)
	if !st.NextDue.IsZero() && st.NextDue.Before(st.Now) {
		g.OldestDueAge = st.Now.Sub(st.NextDue)
	}
	g.WALBytes, g.WALSegments = dirSize(s.opts.FS, filepath.Join(s.dir, "wal"))
	g.SnapshotBytes, g.SnapshotAt, g.SnapshotTook = s.published.read()
	g.SnapshotRunning = s.published.running(time.Now())
	return g, nil
}

// dirSize returns the total size of the regular files in dir and the number
// of them that are segments (0, 0 if it cannot be read).
func dirSize(fs vfs.FS, dir string) (int64, int) {
	names, err := fs.List(dir)
	if err != nil {
		return 0, 0
	}
	var size int64
	n := 0
	for _, name := range names {
		if fi, err := fs.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
			if isDigits(name) { // a segment, named by its first index
				n++
			}
		}
	}
	return size, n
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// publishedSnapshot holds the newest snapshot's facts for Gauges, and when
// the one in flight started.
type publishedSnapshot struct {
	bytes       atomic.Int64
	atNano      atomic.Int64 // 0: none
	took        atomic.Int64
	startedNano atomic.Int64 // 0: none in flight
}

// started notes that a background snapshot started at t, or with the zero
// time that none is in flight any more.
func (p *publishedSnapshot) started(t time.Time) {
	var n int64
	if !t.IsZero() {
		n = t.UnixNano()
	}
	p.startedNano.Store(n)
}

// running is how long the snapshot in flight has run at now; zero if none
// is (and at least a nanosecond if one is, whatever the clock did).
func (p *publishedSnapshot) running(now time.Time) time.Duration {
	n := p.startedNano.Load()
	if n == 0 {
		return 0
	}
	return max(now.Sub(time.Unix(0, n)), time.Nanosecond)
}

func (p *publishedSnapshot) snapshot(bytes int64, at time.Time, took time.Duration) {
	p.bytes.Store(bytes)
	p.took.Store(int64(took))
	p.atNano.Store(at.UnixNano())
}

func (p *publishedSnapshot) read() (int64, time.Time, time.Duration) {
	at := p.atNano.Load()
	if at == 0 {
		return 0, time.Time{}, 0
	}
	return p.bytes.Load(), time.Unix(0, at), time.Duration(p.took.Load())
}
