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
	return openReplicatedCluster(b, n, noSync)[0]
}

// openReplicatedCluster is openReplicatedBench returning every store, the
// leader's first.
func openReplicatedCluster(b *testing.B, n int, noSync bool) []*execstore.Store {
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
			stores[0], stores[i] = stores[i], stores[0]
			return stores
		}
	}
	b.Fatalf("the leader %s is not a member", id)
	return nil
}

// BenchmarkReplicated is BenchmarkAdmit and BenchmarkClaimers on the leader of
// three replicas: each batch is committed once two of the three nodes stored
// it durably, then applied on every node. The after-raft-snapshot row has
// every node take a raft snapshot before the timer starts, without fsync so
// that the state machine's share shows: a node that kept its snapshot's copy
// of the state would replace each record it changes from then on.
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
		noSync          bool
		snapshotted     bool // every node took a raft snapshot before the timer
	}{
		{claimers: 1, batch: 64, together: true},
		{claimers: 4, batch: 64},
		{claimers: 16, batch: 256},
		{claimers: 4, batch: 64, noSync: true, snapshotted: true},
	} {
		name := fmt.Sprintf("claim-ack/replicas=3/sync=%v/claimers=%d/batch=%d", !cfg.noSync, cfg.claimers, cfg.batch)
		if cfg.together {
			name += "/together"
		}
		if cfg.snapshotted {
			name += "/after-raft-snapshot"
		}
		b.Run(name, func(b *testing.B) {
			stores := openReplicatedCluster(b, 3, cfg.noSync)
			s := stores[0]
			(&pool{b: b, s: s}).refill(20_000 + b.N)
			if cfg.snapshotted {
				for _, n := range stores {
					if err := n.Node().Snapshot(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportAllocs()
			claimLoop(b, s, cfg.claimers, cfg.batch, cfg.together)
		})
	}
}
