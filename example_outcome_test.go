package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
)

// stockError is an application's error with a stable code.
type stockError struct{ sku string }

func (e *stockError) Error() string { return "out of stock: " + e.sku }
func (e *stockError) Code() string  { return "OUT_OF_STOCK" }

// errOutOfStock is the application's sentinel for every stockError.
var errOutOfStock = &stockError{}

// A failed outcome's error, read back from the record, matches the errors
// its code identifies: errors.Is and ErrorCode work on it as they did on the
// error the workflow failed with, in this process or after a restart.
func ExampleWorkflowError_Is() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	defer store.Close()
	ctx := context.Background()

	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	leases, _ := store.ClaimDue(ctx, 1, time.Minute)
	failure := fmt.Errorf("reserving order 42: %w", &stockError{sku: "sku-7"})
	store.Acknowledge(ctx, leases[0], execstore.Failed(failure))

	rec, _ := store.Await(ctx, "order-42")
	err := rec.Outcome.Error // an *execstore.WorkflowError
	fmt.Println(err)
	fmt.Println("out of stock:", errors.Is(err, errOutOfStock))
	fmt.Println("lease lost:", errors.Is(err, execstore.ErrLeaseLost))
	fmt.Println("code:", execstore.ErrorCode(err))
	// Output:
	// reserving order 42: out of stock: sku-7
	// out of stock: true
	// lease lost: false
	// code: OUT_OF_STOCK
}
