package execstore_test

import (
	"context"
	"fmt"
	"os"
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
