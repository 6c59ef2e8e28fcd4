package metrics_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/metrics"
)

// BenchmarkClaimAcknowledgeBatch is the root package's benchmark of the
// same name, without fsync, with Prometheus metrics off and on (registered,
// as serve does): claims of 64 from 100,000 pending executions, each
// claim's acknowledgements in one AcknowledgeBatch. -count interleaves the
// two; compare them with benchstat.
func BenchmarkClaimAcknowledgeBatch(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=false/pending=100k/batch=64/metrics=%v", on), func(b *testing.B) { claimAckBatch(b, on) })
	}
}

func claimAckBatch(b *testing.B, metricsOn bool) {
	const pending, batch = 100_000, 64
	opts := execstore.Options{NoSync: true}
	m := metrics.New()
	if metricsOn {
		prometheus.NewRegistry().MustRegister(m)
		opts.Metrics = m
	}
	s, err := execstore.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m.Watch(s)
	admitted := 0
	refill := func(n int) {
		var wg sync.WaitGroup
		for c := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c; i < n; i += 64 {
					if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("e-%d", admitted+i), WorkflowID: "w"}); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		admitted += n
	}
	refill(pending)
	acks := make([]execstore.Ack, 0, batch)
	b.ResetTimer()
	for done := 0; done < b.N; {
		if admitted-done < pending-10*batch {
			b.StopTimer()
			refill(10 * batch)
			b.StartTimer()
		}
		leases, err := s.ClaimDue(ctx, min(batch, b.N-done), time.Minute)
		if err != nil || len(leases) == 0 {
			b.Fatalf("ClaimDue: %d leases, %v", len(leases), err)
		}
		acks = acks[:0]
		for _, l := range leases {
			acks = append(acks, execstore.Ack{Lease: l, Outcome: execstore.Completed(nil)})
		}
		if _, err := s.AcknowledgeBatch(ctx, acks); err != nil {
			b.Fatal(err)
		}
		done += len(leases)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "executions/s")
}
