package execstore

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/tune"
	"github.com/execstore/execstore/replica"
)

// Each store cuts its states by the sizes it was opened with, and by no
// other store's: one opened with small sizes (internal/tune, as the crash
// simulator opens its stores) has them in the state it starts with, in the
// state it loads from a snapshot after reopening, and in a replica's state,
// while a store opened beside it, in the same process, keeps the defaults.
func TestAStoreCutsItsStatesByTheSizesItWasOpenedWith(t *testing.T) {
	ctx := context.Background()
	small := fsm.Sizes{FeedChunk: 4, FeedSweep: 1}
	def := fsm.Sizes{FeedChunk: fsm.DefaultFeedChunk, FeedSweep: fsm.DefaultFeedSweep}
	var opts Options
	opts.NoSync = true
	tune.SetSizes(&opts, small)
	dir := t.TempDir()
	for round := range 2 { // and from its snapshot, after reopening
		s, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		other, err := Open(t.TempDir(), Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := s.Admit(ctx, AdmitRequest{WorkflowID: "w"}); err != nil {
				t.Fatalf("round %d, admission %d: %v", round, i, err)
			}
		}
		if err := s.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
		if got := s.state.Sizes(); got != small {
			t.Fatalf("round %d: the small store's state has sizes %+v, want %+v", round, got, small)
		}
		if got := other.state.Sizes(); got != def {
			t.Fatalf("round %d: the store beside it has sizes %+v, want the defaults %+v", round, got, def)
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		s.Close()
		other.Close()
	}

	addr, trans := raft.NewInmemTransport("")
	ro := ReplicaOptions{
		Options: opts,
		Node: replica.NodeOptions{ID: "solo", Transport: trans, HeartbeatTimeout: 50 * time.Millisecond,
			ElectionTimeout: 50 * time.Millisecond, LeaderLeaseTimeout: 50 * time.Millisecond},
		Peers: []Peer{{ID: "solo", Addr: string(addr), Voter: true}},
	}
	s, err := OpenReplicated(t.TempDir(), ro)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.rw.RLock()
	got := s.state.Sizes()
	s.rw.RUnlock()
	if got != small {
		t.Fatalf("the replica's state has sizes %+v, want %+v", got, small)
	}
}
