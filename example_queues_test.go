package execstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/execstore/execstore"
)

// Each worker claims the queues it serves: by default an execution is in its
// workflow's own queue, so a worker that names the workflows it runs never
// leases another's. A named queue is shared by the workflows admitted to it.
func ExampleClaimRequest_queues() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	store, err := execstore.Open(dir, execstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-1", WorkflowID: "charge-order"})
	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "mail-1", WorkflowID: "send-email"})
	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "report-1", WorkflowID: "monthly-report", Queue: "batch"})

	for _, queues := range [][]string{{"send-email"}, {"charge-order", "batch"}} {
		leases, err := store.Claim(ctx, execstore.ClaimRequest{Limit: 10, LeaseDuration: time.Minute, Queues: queues})
		if err != nil {
			panic(err)
		}
		for _, l := range leases {
			rec, _ := store.Get(ctx, l.ExecutionID)
			fmt.Printf("a worker of %v leases %s (queue %q)\n", queues, l.ExecutionID, rec.Queue)
		}
	}
	// Output:
	// a worker of [send-email] leases mail-1 (queue "")
	// a worker of [charge-order batch] leases order-1 (queue "")
	// a worker of [charge-order batch] leases report-1 (queue "batch")
}

// A queue's settings bound what every claim takes from it, exactly: here at
// most 2 leases in any second, so a third execution waits until the first
// grants are a second old, the time NextDue reports.
func ExampleStore_PutQueue() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	var clock atomic.Int64 // the store's clock, moved by hand
	clock.Store(time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC).UnixNano())
	store, err := execstore.Open(dir, execstore.Options{Now: func() time.Time { return time.Unix(0, clock.Load()).UTC() }})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	if _, err := store.PutQueue(ctx, execstore.QueueSettings{Name: "send-sms", Rate: 2, RatePeriod: time.Second}); err != nil {
		panic(err)
	}
	for i := range 3 {
		store.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprintf("sms-%d", i), WorkflowID: "send-sms"})
	}
	leases, _ := store.ClaimDue(ctx, 10, time.Minute)
	next, _ := store.NextDue(ctx)
	info, _ := store.Queue(ctx, "send-sms")
	fmt.Printf("leased %d, %d granted in the window, next at %s\n", len(leases), info.Granted, next.Format(time.TimeOnly))
	clock.Store(next.UnixNano())
	leases, _ = store.ClaimDue(ctx, 10, time.Minute)
	fmt.Printf("at %s leased %s\n", next.Format(time.TimeOnly), leases[0].ExecutionID)
	// Output:
	// leased 2, 2 granted in the window, next at 12:00:01
	// at 12:00:01 leased sms-2
}
