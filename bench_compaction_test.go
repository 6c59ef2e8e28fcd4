package execstore_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// BenchmarkAdmitLatencyDuringCompaction compares Admit's p99 latency (one
// caller, durable) while the store compacts its write-ahead log with its p99
// when nothing else runs (goal: within 2x).
//
// Each round writes compactionRoundBytes of log (a 256 KiB value committed
// over and over, so that the state and its snapshot stay small) and then takes
// a snapshot, which removes the log before the older kept snapshot: about four
// 16 MiB segments. The admits measured "during" are those that overlap the
// Snapshot call; with a state this small, it is mostly the compaction,
// including the time it takes to free the removed segments' space.
//
//	go test -run '^$' -bench DuringCompaction -benchtime 10x
func BenchmarkAdmitLatencyDuringCompaction(b *testing.B) {
	const compactionRoundBytes = 64 << 20
	value := []byte(`"` + string(bytes.Repeat([]byte("v"), 256<<10-2)) + `"`)
	s, err := execstore.Open(b.TempDir(), execstore.Options{SnapshotEntries: 1 << 30, SnapshotWALBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	grow := func() {
		for range compactionRoundBytes / len(value) {
			if err := s.Commit(ctx, execstore.Write{Key: "filler", Value: value}); err != nil {
				b.Fatal(err)
			}
		}
	}
	next := 0
	admit := func() time.Duration {
		start := time.Now()
		if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("new-%08d", next), WorkflowID: "w"}); err != nil {
			b.Fatal(err)
		}
		next++
		return time.Since(start)
	}
	// Two rounds first, so that every measured snapshot has an older one to compact to.
	for range 2 {
		grow()
		if err := s.Snapshot(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var quiet, during []time.Duration
	var removed uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		grow()
		b.StartTimer()
		for range 500 {
			quiet = append(quiet, admit())
		}
		before, _ := s.Stats(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Snapshot(ctx) }()
		for waiting := true; waiting; {
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
				waiting = false
			default:
				during = append(during, admit())
			}
		}
		after, _ := s.Stats(ctx)
		removed += after.WALFirstIndex - before.WALFirstIndex
	}
	b.StopTimer()
	if removed == 0 {
		b.Fatal("no snapshot compacted the log")
	}
	p := func(l []time.Duration, q float64) float64 {
		slices.Sort(l)
		return float64(l[int(float64(len(l)-1)*q)].Microseconds())
	}
	b.ReportMetric(p(quiet, 0.50), "quiet-p50-µs")
	b.ReportMetric(p(quiet, 0.99), "quiet-p99-µs")
	b.ReportMetric(p(quiet, 1), "quiet-max-µs")
	b.ReportMetric(p(during, 0.50), "compaction-p50-µs")
	b.ReportMetric(p(during, 0.99), "compaction-p99-µs")
	b.ReportMetric(p(during, 1), "compaction-max-µs")
	b.ReportMetric(float64(len(during))/float64(b.N), "admits-during")
}
