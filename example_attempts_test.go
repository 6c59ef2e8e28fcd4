package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
)

// An admission with MaxAttempts 2: two deliveries end without an outcome
// (the first is released with its error, the second's lease expires), and
// the claim after that fails the execution instead of delivering it a third
// time.
func ExampleAdmitRequest_maxAttempts() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	defer store.Close()
	ctx := context.Background()

	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order", MaxAttempts: 2})
	leases, _ := store.ClaimDue(ctx, 1, time.Minute)
	store.ReleaseWithCause(ctx, leases[0], 0, errors.New("payment gateway unavailable"))

	leases, _ = store.ClaimDue(ctx, 1, time.Minute)
	fmt.Println("attempt", leases[0].Token, "claimed")
	now = now.Add(2 * time.Minute) // the worker died: its lease expires

	leases, _ = store.ClaimDue(ctx, 1, time.Minute)
	rec, _ := store.Get(ctx, "order-42")
	fmt.Println("claimed:", len(leases), "status:", rec.Status, "attempts:", rec.Attempts, "of", rec.MaxAttempts)
	fmt.Println(execstore.ErrorCode(rec.Outcome.Error), "caused by", rec.Outcome.Error.Cause.Name)
	// Output:
	// attempt 2 claimed
	// claimed: 0 status: failed attempts: 2 of 2
	// ATTEMPTS_EXHAUSTED caused by LeaseExpiredError
}
