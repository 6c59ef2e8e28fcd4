package execstore_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
)

// Wakes merge into one due time, the earliest; a wake during a delivery is
// kept for after it.
func ExampleStore_RequestWake() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	defer store.Close()
	ctx := context.Background()

	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	leases, _ := store.ClaimDue(ctx, 1, time.Minute)
	// The workflow sleeps ten minutes: it asks for a wake, then suspends.
	store.RequestWake(ctx, "order-42", now.Add(10*time.Minute))
	store.RequestWake(ctx, "order-42", now.Add(20*time.Minute))
	rec, _ := store.Acknowledge(ctx, leases[0], execstore.Suspended())
	fmt.Println(rec.Status, "due at", rec.DueAt.Format(time.TimeOnly))
	// Output:
	// suspended due at 12:10:00
}
