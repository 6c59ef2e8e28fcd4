package execstore_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// Benchmarks of snapshots and recovery (heavy: each builds a store of
// 1,000,000 records first, which takes several seconds):
//
//	go test -run '^$' -bench 'Reopen|DuringSnapshot|HeapPerRecord' -benchtime 3x

const bigStore = 1_000_000

// buildBig admits n executions (no params) into dir with 64 callers.
func buildBig(b *testing.B, dir string, n int) {
	b.Helper()
	s, err := execstore.Open(dir, execstore.Options{NoSync: true, SnapshotEntries: 1 << 30, SnapshotWALBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	parallel(n, 64, func(i int) {
		if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("order-%07d", i), WorkflowID: "charge-order"}); err != nil {
			b.Error(err)
		}
	})
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReopen measures Open of a store with a 1,000,000-record snapshot
// and 100,000 WAL entries after it (goal: under 1.5 s).
func BenchmarkReopen(b *testing.B) {
	dir := b.TempDir()
	buildBig(b, dir, bigStore)
	s, err := execstore.Open(dir, execstore.Options{NoSync: true, SnapshotEntries: 1 << 30, SnapshotWALBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Snapshot(ctx); err != nil {
		b.Fatal(err)
	}
	parallel(100_000, 64, func(i int) {
		s.RequestWake(ctx, fmt.Sprintf("order-%07d", i), time.Unix(1, int64(i)))
	})
	st, _ := s.Stats(ctx)
	s.Close()
	b.Logf("records %d, WAL [%d, %d]", st.Executions, st.WALFirstIndex, st.WALLastIndex)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := execstore.Open(dir, execstore.Options{NoSync: true, SnapshotEntries: 1 << 30, SnapshotWALBytes: 1 << 40})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/open")
}

// BenchmarkAdmitLatencyDuringSnapshot compares Admit's p99 latency (one
// caller, durable) while a 1,000,000-record snapshot is being written with
// its p99 when no snapshot runs (goal: within 2x).
func BenchmarkAdmitLatencyDuringSnapshot(b *testing.B) {
	dir := b.TempDir()
	buildBig(b, dir, bigStore)
	s, err := execstore.Open(dir, execstore.Options{SnapshotEntries: 1 << 30, SnapshotWALBytes: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	next := 0
	measure := func(n int) []time.Duration {
		lat := make([]time.Duration, 0, n)
		for i := 0; i < n; i++ {
			start := time.Now()
			if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("new-%08d", next), WorkflowID: "w"}); err != nil {
				b.Fatal(err)
			}
			next++
			lat = append(lat, time.Since(start))
		}
		return lat
	}
	var quiet, during []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		quiet = append(quiet, measure(2000)...)
		var wg sync.WaitGroup
		wg.Add(1)
		snapDone := make(chan struct{})
		go func() {
			defer wg.Done()
			defer close(snapDone)
			if err := s.Snapshot(ctx); err != nil {
				b.Error(err)
			}
		}()
		for {
			select {
			case <-snapDone:
			default:
				during = append(during, measure(50)...)
				continue
			}
			break
		}
		wg.Wait()
	}
	b.StopTimer()
	p := func(l []time.Duration, q float64) float64 {
		slices.Sort(l)
		return float64(l[int(float64(len(l)-1)*q)].Microseconds())
	}
	b.ReportMetric(p(quiet, 0.50), "quiet-p50-µs")
	b.ReportMetric(p(quiet, 0.99), "quiet-p99-µs")
	b.ReportMetric(p(during, 0.50), "snapshot-p50-µs")
	b.ReportMetric(p(during, 0.99), "snapshot-p99-µs")
	b.ReportMetric(float64(len(during))/float64(b.N), "admits-during")
}

// BenchmarkHeapPerRecord reports the heap bytes each idle admitted record
// costs (no params; goal: under 350 B).
func BenchmarkHeapPerRecord(b *testing.B) {
	const n = bigStore
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		s, err := execstore.Open(dir, execstore.Options{NoSync: true, SnapshotEntries: 1 << 30, SnapshotWALBytes: 1 << 40})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		parallel(n, 64, func(i int) {
			s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("order-%07d", i), WorkflowID: "charge-order"})
		})
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/record")
		s.Close()
		os.RemoveAll(filepath.Join(dir))
	}
}
