package execstore_test

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/vfs"
)

// A fenced write refused for a lost lease is logged as a warning naming an
// execution and counting them, at most once every ten seconds of the clock.
func TestLostLeasesAreLoggedAsAWarningAtMostOnceEveryTenSeconds(t *testing.T) {
	f := newFixture(t)
	logs := &logRecorder{}
	f.opts.Logger = slog.New(logs)
	f.reopen()
	id := f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	stale := f.claimOne(id)
	f.clock.Advance(time.Hour) // the lease expires: the next claim supersedes it
	f.claimOne(id)
	steps := []struct {
		advance time.Duration
		lines   int
		count   int64 // of the latest line
	}{
		{0, 1, 1},
		{time.Second, 1, 1},     // within ten seconds: counted, not logged
		{5 * time.Second, 1, 1}, // still within
		{5 * time.Second, 2, 3}, // ten seconds after the first line: the three since
	}
	for i, s := range steps {
		f.clock.Advance(s.advance)
		if _, err := f.s.Renew(ctx, stale, time.Minute); !errors.Is(err, execstore.ErrLeaseLost) {
			t.Fatalf("step %d: renew of a superseded lease: %v", i, err)
		}
		lines := logs.about("lease is no longer current")
		if len(lines) != s.lines {
			t.Fatalf("step %d: %d lines, want %d", i, len(lines), s.lines)
		}
		last := lines[len(lines)-1]
		if last.level != slog.LevelWarn || last.attrs["count"].Int64() != s.count ||
			last.attrs["example_execution"].String() != "e" || last.attrs["example_command"].String() != "renew" {
			t.Fatalf("step %d: line %v %v, want a warning counting %d for e's renew", i, last.level, last.attrs, s.count)
		}
	}
}

// A snapshot is logged at info level, and so is the compaction of the log
// behind the older kept snapshot.
func TestSnapshotsAndCompactionsAreLoggedAtInfo(t *testing.T) {
	f := newFixture(t)
	logs := &logRecorder{}
	f.opts.Logger = slog.New(logs)
	f.opts.SegmentSize = 4096
	f.reopen()
	for round := range 3 {
		for i := range 50 {
			f.admit(execstore.AdmitRequest{WorkflowID: "w", Params: raw(`{"round":` + string(rune('0'+round)) + `,"i":"` + string(rune('a'+i%26)) + `"}`)})
		}
		if err := f.s.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	snaps, compactions := logs.about("snapshot written"), logs.about("log compacted")
	if len(snaps) != 3 || len(compactions) == 0 {
		t.Fatalf("%d snapshot lines and %d compaction lines, want 3 and at least 1", len(snaps), len(compactions))
	}
	for _, l := range append(snaps, compactions...) {
		if l.level != slog.LevelInfo {
			t.Errorf("%q logged at %v, want info", l.msg, l.level)
		}
	}
	c := compactions[len(compactions)-1]
	if c.attrs["first_index"].Uint64() <= c.attrs["first_index_before"].Uint64() {
		t.Errorf("compaction line %v does not move the first index", c.attrs)
	}
}

// recordedMetrics is an execstore.Metrics that keeps what it is told.
type recordedMetrics struct {
	mu        sync.Mutex
	commands  map[string]int // "kind result"
	batches   int
	entries   int
	claimed   []time.Duration
	acked     []time.Duration
	lost      int
	snapshots []error
}

func (m *recordedMetrics) Commands(kind, result string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.commands == nil {
		m.commands = map[string]int{}
	}
	m.commands[kind+" "+result] += n
}

func (m *recordedMetrics) Batch(entries, bytes int, write, fsync time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if entries <= 0 || bytes <= 0 || write < fsync || fsync < 0 {
		panic(fmt.Sprintf("Batch(%d, %d, %v, %v)", entries, bytes, write, fsync))
	}
	m.batches++
	m.entries += entries
}

func (m *recordedMetrics) Claimed(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claimed = append(m.claimed, d)
}

func (m *recordedMetrics) Acknowledged(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acked = append(m.acked, d)
}

func (m *recordedMetrics) LeasesLost(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lost += n
}

func (m *recordedMetrics) Snapshot(bytes int64, took time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snapshots = append(m.snapshots, err)
}

// Options.Metrics hears every command by kind and result (those answered
// without a write too, and each acknowledgement of an AcknowledgeBatch),
// each log batch, the admission-to-first-claim and claim-to-acknowledge
// latencies in the store's time, lost leases and snapshots.
func TestMetricsHearCommandsBatchesLatenciesLostLeasesAndSnapshots(t *testing.T) {
	f := newFixture(t)
	m := &recordedMetrics{}
	f.opts.Metrics = m
	f.reopen()
	for _, id := range []string{"a", "b", "c"} {
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
	}
	if _, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w"}); !errors.Is(err, execstore.ErrExecutionIDConflict) {
		t.Fatal(err)
	}
	f.clock.Advance(3 * time.Second)
	leases := f.claim(3, time.Minute) // a, b, c: admitted 3 s ago
	f.clock.Advance(2 * time.Second)
	f.ack(leases[0], execstore.Completed(nil)) // a: 2 s after its claim
	f.clock.Advance(time.Second)
	results, err := f.s.AcknowledgeBatch(ctx, []execstore.Ack{
		{Lease: leases[1], Outcome: execstore.Suspended()},
		{Lease: leases[0], Outcome: execstore.Suspended()}, // a is completed: its recorded outcome, no latency
		{Lease: leases[2], Outcome: execstore.Failed(errors.New("boom"))},
	})
	if err != nil || results[0].Err != nil || results[2].Err != nil {
		t.Fatalf("AcknowledgeBatch: %v %v", results, err)
	}
	if _, err := f.s.Renew(ctx, leases[1], time.Minute); !errors.Is(err, execstore.ErrLeaseLost) {
		t.Fatalf("renew of an acknowledged lease: %v", err)
	}
	if len(f.claim(1, time.Minute)) != 0 {
		t.Fatal("something was due")
	}
	if err := f.s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"admit ok": 3, "admit conflict": 1, "claim ok": 2, "acknowledge ok": 4, "renew lease_lost": 1,
	}
	// Counts are handed over once a batch's callers are answered.
	eventually(t, "the idle claim is counted", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return maps.Equal(m.commands, want)
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.batches == 0 || m.entries < 5 {
		t.Errorf("%d batches of %d entries", m.batches, m.entries)
	}
	if want := []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}; !slices.Equal(m.claimed, want) {
		t.Errorf("admission to first claim %v, want %v", m.claimed, want)
	}
	if want := []time.Duration{2 * time.Second, 3 * time.Second, 3 * time.Second}; !slices.Equal(m.acked, want) {
		t.Errorf("claim to acknowledgement %v, want %v", m.acked, want)
	}
	if m.lost != 1 || len(m.snapshots) != 1 || m.snapshots[0] != nil {
		t.Errorf("lost %d, snapshots %v; want 1 and one without error", m.lost, m.snapshots)
	}
}

// Gauges counts current and expired leases and executions waiting for a
// wake, the age of the oldest due execution in the store's time, the log's
// segments and size and the newest snapshot's.
func TestGaugesCountLeasesTheOldestDueAgeTheLogAndTheNewestSnapshot(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
	}
	g, err := f.s.Gauges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g.Leases != 0 || g.Waiting != 4 || g.DueNow != 4 || g.OldestDueAge != 0 || !g.SnapshotAt.IsZero() || g.WALSegments != 1 || g.WALBytes == 0 {
		t.Fatalf("after admissions: %+v", g)
	}
	f.clock.Advance(time.Second)
	f.claim(1, time.Minute)   // a, for a minute
	f.claim(1, 2*time.Minute) // b, for two
	f.clock.Advance(90 * time.Second)
	f.commit("k") // the store's time moves to the clock
	if err := f.s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	g, err = f.s.Gauges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// c and d have been due since their admission, 91 s ago; a's lease
	// expired 30 s ago.
	if g.Leases != 2 || g.LeasesExpired != 1 || g.Waiting != 2 || g.DueNow != 2 || g.OldestDueAge != 91*time.Second {
		t.Errorf("leases %d (expired %d), waiting %d, due now %d, oldest due %v; want 2 (1), 2, 2, 91s", g.Leases, g.LeasesExpired, g.Waiting, g.DueNow, g.OldestDueAge)
	}
	// In claim order: c and d due since their admission, then a's lease
	// (expired), then b's.
	var upcoming []string
	for _, u := range g.Upcoming {
		upcoming = append(upcoming, fmt.Sprintf("%s:%v", u.ExecutionID, u.Leased))
	}
	if got := strings.Join(upcoming, " "); got != "c:false d:false a:true b:true" {
		t.Errorf("upcoming %s, want c:false d:false a:true b:true", got)
	}
	if g.SnapshotAt.IsZero() || g.SnapshotBytes == 0 {
		t.Errorf("after a snapshot: at %v, %d bytes", g.SnapshotAt, g.SnapshotBytes)
	}
	f.reopen()
	if g2, err := f.s.Gauges(ctx); err != nil || g2.SnapshotBytes != g.SnapshotBytes || g2.SnapshotAt.IsZero() {
		t.Errorf("after a reopen, the loaded snapshot: %d bytes at %v (%v), want %d", g2.SnapshotBytes, g2.SnapshotAt, err, g.SnapshotBytes)
	}
}

// Gauges shows how long the snapshot in flight has run, and zero once it has
// finished or when none runs.
func TestGaugesShowTheSnapshotInFlight(t *testing.T) {
	f := newFixture(t)
	f.s.Close()
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	f.opts.FS = vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		if op.Kind == vfs.OpCreate && filepath.Base(filepath.Dir(op.Path)) == "snapshots" {
			select { // the snapshot's temporary file
			case held <- struct{}{}:
			default:
			}
			<-hold
		}
		return nil
	})
	f.open()
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w"})
	running := func() time.Duration {
		g, err := f.s.Gauges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return g.SnapshotRunning
	}
	if d := running(); d != 0 {
		t.Fatalf("no snapshot in flight, yet running for %v", d)
	}
	done := make(chan error, 1)
	go func() { done <- f.s.Snapshot(ctx) }()
	select {
	case <-held:
	case <-time.After(patience):
		t.Fatal("the snapshot never started writing")
	}
	if d := running(); d <= 0 {
		t.Errorf("a snapshot held while writing, running for %v; want more than zero", d)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := running(); d != 0 {
		t.Errorf("the snapshot finished, yet running for %v", d)
	}
}
