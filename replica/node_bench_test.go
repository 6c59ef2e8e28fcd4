package replica

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execstore/execstore/fsm"
)

// The node benchmarks run three nodes on loopback TCP, each with a durable log (every
// append fsynced), and NodeOptions' default timeouts:
//
//	go test -run '^$' -bench 'Node' -benchtime 3s ./replica
//	go test -run '^$' -bench 'NodeFailover' -benchtime 5x ./replica
//
// The single-node store's admissions, for comparison: go test -run '^$' -bench
// 'Admit/sync=true' . in the repository's root.

// benchCluster runs three members over TCP with NodeOptions' defaults (but for the test
// clocks, no timed snapshots and a 5s RaftTimeout), recording nothing they apply.
var benchCluster = clusterOptions{tcp: true, defaults: true, quiet: true}

// BenchmarkNodeApplyAdmit measures admissions through the leader's Apply from 1 and 64
// concurrent callers; raft gathers concurrent commands into one append (and one fsync on
// each node) of up to MaxAppendEntries logs.
func BenchmarkNodeApplyAdmit(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			c := newClusterWith(b, 3, benchCluster)
			ld := c.leader().n
			ctx := context.Background()
			var next, failed atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						cmd := fsm.Command{Kind: fsm.KindAdmit, ExecutionID: fmt.Sprintf("g%d-%d", g, i), WorkflowID: "wf",
							Params: `{"n":1}`, HasParams: true}
						if _, err := ld.Apply(ctx, &cmd); err != nil {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commands/s")
			if failed.Load() > 0 {
				b.Fatalf("%d admissions failed", failed.Load())
			}
		})
	}
}

// BenchmarkNodeFailover measures, on a fresh cluster each time, the time from closing the
// leader to the first Apply a new leader answers; it reports the median.
func BenchmarkNodeFailover(b *testing.B) {
	var took []time.Duration
	for i := range b.N {
		b.StopTimer()
		c := newClusterWith(b, 3, benchCluster)
		old := c.leader()
		cmd := fsm.Command{Kind: fsm.KindAdmit, ExecutionID: "before", WorkflowID: "wf"}
		if _, err := old.n.Apply(context.Background(), &cmd); err != nil {
			b.Fatal(err)
		}
		nodes := []*Node{}
		for _, tn := range c.running() {
			if tn != old {
				nodes = append(nodes, tn.n)
			}
		}
		b.StartTimer()
		start := time.Now()
		c.stop(old)
		cmd = fsm.Command{Kind: fsm.KindAdmit, ExecutionID: fmt.Sprintf("after-%d", i), WorkflowID: "wf"}
		ok := false
		for !ok {
			if time.Since(start) > waitBound {
				b.Fatal("no new leader took a write")
			}
			for _, n := range nodes {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				if _, err := n.Apply(ctx, &cmd); err == nil {
					ok = true
				}
				cancel()
			}
			if !ok {
				time.Sleep(time.Millisecond)
			}
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		for _, tn := range c.running() {
			c.stop(tn)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "ms-median")
}
