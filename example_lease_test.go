package execstore_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
)

// A claimer that acknowledges what it ran and claims more in one call: one
// write and one fsync per round instead of two.
func ExampleStore_AcknowledgeAndClaim() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	store, err := execstore.Open(dir, execstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	for _, id := range []string{"invoice-1", "invoice-2", "invoice-3", "invoice-4"} {
		store.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "send-invoice"})
	}

	leases, _ := store.ClaimDue(ctx, 2, time.Minute)
	for round := 1; len(leases) > 0; round++ {
		acks := make([]execstore.Ack, len(leases))
		for i, l := range leases {
			fmt.Println("round", round, "sends", l.ExecutionID)
			acks[i] = execstore.Ack{Lease: l, Outcome: execstore.Completed(nil)}
		}
		var results []execstore.AckResult
		results, leases, err = store.AcknowledgeAndClaim(ctx, acks, 2, time.Minute)
		if err != nil {
			panic(err)
		}
		for _, r := range results {
			fmt.Println("round", round, r.Record.ExecutionID, r.Record.Status)
		}
	}
	// Output:
	// round 1 sends invoice-1
	// round 1 sends invoice-2
	// round 1 invoice-1 completed
	// round 1 invoice-2 completed
	// round 2 sends invoice-3
	// round 2 sends invoice-4
	// round 2 invoice-3 completed
	// round 2 invoice-4 completed
}

// A claim with a request key is safe to retry: a worker that lost the answer
// (a timeout, a dropped connection) asks again with the same key and gets
// the same leases, instead of leaving them to expire unworked.
func ExampleStore_Claim() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	store, err := execstore.Open(dir, execstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	for _, id := range []string{"invoice-1", "invoice-2", "invoice-3"} {
		store.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "send-invoice"})
	}

	req := execstore.ClaimRequest{Limit: 2, LeaseDuration: time.Minute, RequestKey: "worker-7/round-1"}
	first, _ := store.Claim(ctx, req) // suppose this answer never arrived
	retry, _ := store.Claim(ctx, req)
	for i := range retry {
		fmt.Println(retry[i].ExecutionID, retry[i].Token == first[i].Token)
	}
	// Output:
	// invoice-1 true
	// invoice-2 true
}
