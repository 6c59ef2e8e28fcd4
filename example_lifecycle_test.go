package execstore_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
)

// The life of one execution: admit it, claim it under a lease, save a step,
// acknowledge its outcome.
func Example() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, err := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()

	id, _ := store.Admit(ctx, execstore.AdmitRequest{
		ExecutionID: "order-42",
		WorkflowID:  "charge-order",
		Params:      []byte(`{"order":42}`),
	})
	leases, _ := store.ClaimDue(ctx, 10, 30*time.Second)
	lease := leases[0]
	fmt.Println("claimed", lease.ExecutionID, "token", lease.Token, "until", lease.ExpiresAt.Format(time.TimeOnly))

	rec, _ := store.Get(ctx, lease.ExecutionID) // the event comes from the record
	fmt.Println("running", rec.WorkflowID, string(rec.Params))
	_ = store.SaveStep(ctx, lease, "charge", []byte(`{"receipt":"r-1"}`))

	rec, _ = store.Acknowledge(ctx, lease, execstore.Completed([]byte(`{"receipt":"r-1"}`)))
	fmt.Println(id, rec.Status, string(rec.Outcome.Result))
	// Output:
	// claimed order-42 token 1 until 12:00:30
	// running charge-order {"order":42}
	// order-42 completed {"receipt":"r-1"}
}
