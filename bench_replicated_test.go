package execstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/replica"
)

// openReplicatedBench opens a cluster of n replicated stores on loopback TCP,
// each on a directory of its own (one disk here, as two cores: the numbers
// are a floor for machines of their own), every append fsynced unless noSync,
// and returns the leader's store.
func openReplicatedBench(b *testing.B, n int, noSync bool) *execstore.Store {
	b.Helper()
	stores := make([]*execstore.Store, n)
	var peers []execstore.Peer
	for i := range stores {
		s, err := execstore.OpenReplicated(b.TempDir(), execstore.ReplicaOptions{
			Options: execstore.Options{NoSync: noSync},
			Node:    replica.NodeOptions{ID: fmt.Sprint("n", i), BindAddr: "127.0.0.1:0"},
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		stores[i] = s
		peers = append(peers, execstore.Peer{ID: fmt.Sprint("n", i), Addr: s.Node().Addr(), Voter: true})
	}
	for _, s := range stores {
		if err := s.Node().Bootstrap(peers); err != nil {
			b.Fatal(err)
		}
	}
	id, _, err := stores[0].Node().WaitLeader(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for i := range stores {
		if peers[i].ID == id {
			return stores[i]
		}
	}
	b.Fatalf("the leader %s is not a member", id)
	return nil
}

// BenchmarkReplicated is BenchmarkAdmit and BenchmarkClaimers on the leader of
// three replicas: each batch is committed once two of the three nodes stored
// it durably, then applied on every node.
//
//	go test -run '^$' -bench Replicated -benchtime 20000x .
func BenchmarkReplicated(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("admit/replicas=3/sync=true/callers=%d", callers), func(b *testing.B) {
			s := openReplicatedBench(b, 3, false)
			var n atomic.Int64
			b.ResetTimer()
			parallel(b.N, callers, func(i int) {
				if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprint("e-", i), WorkflowID: "w"}); err != nil {
					b.Error(err)
				}
				n.Add(1)
			})
			b.StopTimer()
			b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "executions/s")
		})
	}
	for _, cfg := range []struct {
		claimers, batch int
		together        bool
	}{{1, 64, true}, {4, 64, false}, {16, 256, false}} {
		name := fmt.Sprintf("claim-ack/replicas=3/sync=true/claimers=%d/batch=%d", cfg.claimers, cfg.batch)
		if cfg.together {
			name += "/together"
		}
		b.Run(name, func(b *testing.B) {
			s := openReplicatedBench(b, 3, false)
			(&pool{b: b, s: s}).refill(20_000 + b.N)
			claimLoop(b, s, cfg.claimers, cfg.batch, cfg.together)
		})
	}
}
