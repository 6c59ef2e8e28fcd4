package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
)

// List pages through the executions a query selects, here the failed ones
// of one workflow, newest first, two to a page.
func ExampleStore_List() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	defer store.Close()
	ctx := context.Background()

	for _, id := range []string{"order-1", "order-2", "order-3", "order-4"} {
		store.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "charge-order"})
		now = now.Add(time.Minute)
	}
	leases, _ := store.ClaimDue(ctx, 10, time.Minute)
	for _, l := range leases {
		if l.ExecutionID == "order-2" {
			store.Acknowledge(ctx, l, execstore.Completed(nil))
		} else {
			store.Acknowledge(ctx, l, execstore.Failed(errors.New("card declined")))
		}
	}

	q := execstore.ListQuery{WorkflowID: "charge-order", Status: execstore.StatusFailed, Order: execstore.NewestFirst, Limit: 2}
	for page := 1; ; page++ {
		p, err := store.List(ctx, q)
		if err != nil {
			panic(err)
		}
		for _, rec := range p.Records {
			fmt.Println("page", page, rec.ExecutionID, rec.Status, rec.AdmittedAt.Format(time.TimeOnly))
		}
		if p.Cursor == "" {
			break
		}
		q.Cursor = p.Cursor
	}
	// Output:
	// page 1 order-4 failed 12:03:00
	// page 1 order-3 failed 12:02:00
	// page 2 order-1 failed 12:00:00
}

// A consumer of the change feed keeps its position and reads on from it,
// waiting for the next change instead of polling; after a restart it
// resumes where it stopped.
func ExampleStore_Changes() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	opts := execstore.Options{Now: func() time.Time { return now }}
	store, _ := execstore.Open(dir, opts)
	ctx := context.Background()

	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	page, _ := store.Changes(ctx, 0, 100)
	for _, c := range page.Changes {
		fmt.Println(c.Position, c.ExecutionID, c.Status)
	}
	position := page.Next // the consumer stores this

	// Elsewhere, the execution completes while the consumer waits.
	go func() {
		leases, _ := store.ClaimDue(ctx, 1, time.Minute)
		store.Acknowledge(ctx, leases[0], execstore.Completed(nil))
	}()
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	page, _ = store.Changes(wait, position, 100) // returns once the change is applied
	cancel()
	for _, c := range page.Changes {
		fmt.Println(c.Position, c.ExecutionID, c.Status)
	}
	position = page.Next

	store.Close()
	store, _ = execstore.Open(dir, opts)
	defer store.Close()
	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-43", WorkflowID: "charge-order"})
	page, _ = store.Changes(ctx, position, 100)
	for _, c := range page.Changes {
		fmt.Println(c.Position, c.ExecutionID, c.Status)
	}
	// Output:
	// 1 order-42 admitted
	// 2 order-42 completed
	// 3 order-43 admitted
}
