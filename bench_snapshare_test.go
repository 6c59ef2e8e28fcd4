package execstore_test

import (
	"fmt"
	"testing"

	"github.com/execstore/execstore"
)

// BenchmarkAdmitSnapshotShare is durable Admit from 64 callers into a fresh
// store with its automatic snapshots and without them (their cadence set
// past the run): what the snapshots the admissions bring take from the
// writes. Use a -benchtime past DefaultSnapshotEntries (e.g. 400000x), so
// that some fall inside the run; cpu-ns/op is the whole process's CPU time
// per admission (the snapshot encoder and its read-back included).
func BenchmarkAdmitSnapshotShare(b *testing.B) {
	for _, snapshots := range []bool{true, false} {
		b.Run(fmt.Sprintf("snapshots=%v", snapshots), func(b *testing.B) {
			opts := execstore.Options{}
			if !snapshots {
				opts.SnapshotEntries, opts.SnapshotWALBytes = 1<<40, 1<<40
			}
			s, err := execstore.Open(b.TempDir(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			before, _ := s.Stats(ctx)
			cpu := cpuTime()
			b.ResetTimer()
			admitParallel(b, s, 64)
			b.StopTimer()
			reportBatches(b, s, before, b.N)
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			if st, err := s.Stats(ctx); err == nil && !snapshots && st.SnapshotIndex != 0 {
				b.Fatalf("a snapshot was taken (index %d) with the cadence past the run", st.SnapshotIndex)
			}
		})
	}
}
