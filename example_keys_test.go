package execstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/execstore/execstore"
)

// A queue with a live key limit of one runs each customer's orders one
// after another, each to its end, while other customers' run beside them:
// the second order of customer-7 is claimed only once the first has ended.
func ExampleQueueSettings_keyLimit() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	store, err := execstore.Open(dir, execstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	if _, err := store.PutQueue(ctx, execstore.QueueSettings{Name: "charge-order", KeyLimit: 1, KeyMode: execstore.KeyLive}); err != nil {
		panic(err)
	}
	for _, o := range []struct{ id, customer string }{{"order-1", "customer-7"}, {"order-2", "customer-7"}, {"order-3", "customer-9"}} {
		if _, err := store.Admit(ctx, execstore.AdmitRequest{ExecutionID: o.id, WorkflowID: "charge-order", ConcurrencyKey: o.customer}); err != nil {
			panic(err)
		}
	}
	claim := func() []execstore.Lease {
		leases, err := store.ClaimDue(ctx, 10, time.Minute)
		if err != nil {
			panic(err)
		}
		ids := make([]string, len(leases))
		for i, l := range leases {
			ids[i] = l.ExecutionID
		}
		fmt.Println(strings.Join(ids, " "))
		return leases
	}
	first := claim()
	keys, _ := store.QueueKeys(ctx, "charge-order", 10)
	fmt.Printf("%s: %d holding, %d parked\n", keys[0].Key, keys[0].Holding, keys[0].Parked)
	if _, err := store.Acknowledge(ctx, first[0], execstore.Completed(nil)); err != nil {
		panic(err)
	}
	claim()
	// Output:
	// order-1 order-3
	// customer-7: 1 holding, 1 parked
	// order-2
}
