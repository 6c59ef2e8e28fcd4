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
	params := raw(`{"order":42,"customer":"c-1842","items":[{"sku":"A-1","qty":2},{"sku":"B-7","qty":1}]}`)
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
			parallel(b.N, 64, func(i int) {
				_, err := s.Admit(ctx, execstore.AdmitRequest{
					ExecutionID: fmt.Sprintf("order-%d", i), WorkflowID: "charge-order", Params: params,
				})
				if err != nil {
					b.Error(err)
				}
			})
			b.StopTimer()
			reportBatches(b, s, before, b.N)
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			if st, err := s.Stats(ctx); err == nil && !snapshots && st.SnapshotIndex != 0 {
				b.Fatalf("a snapshot was taken (index %d) with the cadence past the run", st.SnapshotIndex)
			}
		})
	}
}
