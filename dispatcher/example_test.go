package dispatcher_test

import (
	"context"
	"fmt"
	"os"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
)

// A dispatcher delivers order-42 to an invoker, which reads the event from
// the delivery and completes it; the outcome is published.
func Example() {
	dir, _ := os.MkdirTemp("", "dispatcher-example")
	defer os.RemoveAll(dir)
	store, err := execstore.Open(dir, execstore.Options{NoSync: true})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	charge := dispatcher.InvokerFunc(func(ctx context.Context, d dispatcher.Delivery) (execstore.RunOutcome, error) {
		fmt.Printf("delivery %d of %s: %s %s\n", d.Attempt, d.ExecutionID, d.WorkflowID, d.Params)
		return execstore.Completed([]byte(`{"receipt":"r-1"}`)), nil
	})
	done := make(chan execstore.Record, 1)
	d, err := dispatcher.New(store, charge, dispatcher.Options{
		OnOutcome: func(rec execstore.Record) { done <- rec },
	})
	if err != nil {
		panic(err)
	}
	d.Start()
	defer d.Stop(context.Background())

	store.Admit(context.Background(), execstore.AdmitRequest{
		ExecutionID: "order-42", WorkflowID: "charge-order", Params: []byte(`{"order":42}`),
	})
	rec := <-done
	fmt.Println(rec.ExecutionID, rec.Status, string(rec.Outcome.Result))
	// Output:
	// delivery 1 of order-42: charge-order {"order":42}
	// order-42 completed {"receipt":"r-1"}
}
