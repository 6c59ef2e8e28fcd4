package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
)

// The customer cancels order 42 while its delivery runs: the record is
// cancelled with the reason, and the worker's next fenced write is refused
// with an error that says why.
func ExampleStore_Cancel() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	defer store.Close()
	ctx := context.Background()

	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	leases, _ := store.ClaimDue(ctx, 1, time.Minute)

	rec, _ := store.Cancel(ctx, "order-42", "the customer cancelled")
	fmt.Println(rec.Status, rec.Status.Terminal(), rec.Outcome.Error.Message)
	fmt.Println("matches ErrCancelled:", errors.Is(rec.Outcome.Error, execstore.ErrCancelled))

	err := store.SaveStep(ctx, leases[0], "charge", []byte(`{"receipt":"r-1"}`))
	fmt.Println("the worker's write:", errors.Is(err, execstore.ErrLeaseLost), errors.Is(err, execstore.ErrCancelled))

	again, _ := store.Cancel(ctx, "order-42", "twice")
	fmt.Println("again:", again.Status, again.Outcome.Error.Message)
	// Output:
	// cancelled true the customer cancelled
	// matches ErrCancelled: true
	// the worker's write: true true
	// again: cancelled the customer cancelled
}
