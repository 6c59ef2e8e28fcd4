package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/replica"
)

// A replicated store is the same Store on a raft node. Here one node on
// raft's in-memory transport forms a cluster of itself, so it leads at once;
// a real cluster runs three or five nodes on TCP (ReplicaOptions.Node's
// BindAddr), bootstrapped with the same Peers.
func ExampleOpenReplicated() {
	dir, _ := os.MkdirTemp("", "replicated-example")
	defer os.RemoveAll(dir)
	_, trans := raft.NewInmemTransport("mem-1")
	store, err := execstore.OpenReplicated(dir, execstore.ReplicaOptions{
		Node:  replica.NodeOptions{ID: "n1", Transport: trans},
		Peers: []execstore.Peer{{ID: "n1", Addr: "mem-1", Voter: true}},
	})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	if _, _, err := store.Node().WaitLeader(ctx); err != nil {
		panic(err)
	}
	// Once it leads, every write commits through raft before it answers.
	for {
		_, err = store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
		if !errors.Is(err, execstore.ErrNotLeader) {
			break // a node knows it leads a moment before it takes writes
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		panic(err)
	}
	rec, _ := store.Get(ctx, "order-42")
	fmt.Println(rec.ExecutionID, rec.Status)
	_, err = store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	fmt.Println(errors.Is(err, execstore.ErrExecutionIDConflict))
	// Output:
	// order-42 admitted
	// true
}
