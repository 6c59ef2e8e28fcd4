package execstore_test

import (
	"fmt"
	"testing"

	"github.com/execstore/execstore"
)

// BenchmarkKeys measures concurrency keys against the same run without
// them, as the goals are stated, with 16 claimers claiming 64 and
// acknowledging (claimLoop, without fsync; ns/op is per execution):
//
//   - keys=none: 100,000 + b.N due executions, no keys, no key limit;
//   - keys=10000: the same spread over 10,000 keys, with a key limit of 1
//     leased at once: at least half of keys=none's executions/s is the goal;
//   - hot=absent: 100,000 + b.N due executions over 10,000 keys under the
//     limit; hot=1000000: the same behind 1,000,000 executions of one key,
//     due first, at its limit: at least 90 % of hot=absent's is the goal (a
//     claim never looks at the hot key's waiting executions), while the
//     hot key's run one at a time as each ends.
//
// Use a fixed -benchtime (e.g. 300000x): the executions are admitted before
// the timer starts.
func BenchmarkKeys(b *testing.B) {
	for _, cfg := range []struct {
		name      string
		keys, hot int
	}{{"keys=none", 0, 0}, {"keys=10000", 10_000, 0}, {"hot=absent", 10_000, 0}, {"hot=1000000", 10_000, 1_000_000}} {
		b.Run(cfg.name, func(b *testing.B) {
			s := openBench(b, true)
			if cfg.keys > 0 {
				if _, err := s.PutQueue(ctx, execstore.QueueSettings{Name: "w", KeyLimit: 1}); err != nil {
					b.Fatal(err)
				}
			}
			admit := func(n int, id func(i int) string, key func(i int) string) {
				parallel(n, 64, func(i int) {
					if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: id(i), WorkflowID: "w", ConcurrencyKey: key(i)}); err != nil {
						b.Error(err)
					}
				})
			}
			if cfg.hot > 0 {
				admit(cfg.hot, func(i int) string { return fmt.Sprintf("hot-%d", i) }, func(int) string { return "hot" })
			}
			admit(100_000+b.N, func(i int) string { return fmt.Sprintf("e-%d", i) }, func(i int) string {
				if cfg.keys == 0 {
					return ""
				}
				return fmt.Sprintf("k-%d", i%cfg.keys)
			})
			if err := s.Snapshot(ctx); err != nil {
				b.Fatal(err)
			}
			claimLoop(b, s, 16, 64, false)
			if cfg.hot > 0 {
				// The hot key's executions ran one at a time, each as the one
				// before ended: at most one held its slot, and the claims
				// started some of them.
				keys, err := s.QueueKeys(ctx, "w", 1)
				if err != nil || len(keys) != 1 || keys[0].Key != "hot" || keys[0].Holding > 1 {
					b.Fatalf("QueueKeys(w, 1) = %+v, %v", keys, err)
				}
				started := cfg.hot - keys[0].Ready - keys[0].Parked
				// Each of them starts a claimer's round after the one before
				// ended: a run of 100,000 executions or more has many rounds.
				if b.N >= 100_000 && started < 2 {
					b.Fatalf("the hot key started %d executions: %+v", started, keys[0])
				}
				b.ReportMetric(float64(started), "hot-started")
			}
		})
	}
}
