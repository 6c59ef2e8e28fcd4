package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
)

// A repeated trigger with the same execution ID is refused: no second run,
// no second wake, and the caller learns that order-42 exists.
func ExampleStore_Admit_duplicate() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	store, _ := execstore.Open(dir, execstore.Options{})
	defer store.Close()
	ctx := context.Background()

	req := execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order", Params: []byte(`{"order":42}`)}
	_, err := store.Admit(ctx, req)
	fmt.Println("first:", err)
	_, err = store.Admit(ctx, req)
	fmt.Println("again:", errors.Is(err, execstore.ErrExecutionIDConflict), execstore.ErrorCode(err))
	leases, _ := store.ClaimDue(ctx, 10, time.Minute)
	fmt.Println("deliveries:", len(leases))
	// Output:
	// first: <nil>
	// again: true EXECUTION_ID_CONFLICT
	// deliveries: 1
}
