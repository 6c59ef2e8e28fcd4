package execstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
)

// With a retention and the archive, an execution that ended longer ago than
// the retention leaves memory for the archive on disk: it is still read back
// (marked Archived), its ID still conflicts, and ListArchived finds it by
// workflow, status and the time it ended.
func ExampleStore_ListArchived() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	clock := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{
		Now:       func() time.Time { return clock },
		Retention: 24 * time.Hour,
		Archive:   true,
	})
	defer store.Close()
	ctx := context.Background()

	for _, id := range []string{"order-41", "order-42"} {
		store.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "charge-order"})
	}
	leases, _ := store.ClaimDue(ctx, 2, time.Minute)
	store.Acknowledge(ctx, leases[0], execstore.Completed(json.RawMessage(`{"receipt":"r-41"}`)))
	store.Acknowledge(ctx, leases[1], execstore.Failed(errors.New("card declined")))

	clock = clock.Add(25 * time.Hour)                                                             // past the retention
	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-43", WorkflowID: "charge-order"}) // a write: retirement first

	rec, _ := store.Get(ctx, "order-42")
	fmt.Println(rec.ExecutionID, rec.Status, "archived:", rec.Archived)
	_, err := store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	fmt.Println("again:", errors.Is(err, execstore.ErrExecutionIDConflict))
	page, _ := store.ListArchived(ctx, execstore.ArchiveQuery{WorkflowID: "charge-order", Status: execstore.StatusFailed})
	for _, r := range page.Records {
		fmt.Println("failed:", r.ExecutionID, r.Outcome.Error.Message)
	}
	st, _ := store.Stats(ctx)
	fmt.Println("executions", st.Executions, "archived", st.Archived)
	// Output:
	// order-42 failed archived: true
	// again: true
	// failed: order-42 card declined
	// executions 3 archived 2
}
