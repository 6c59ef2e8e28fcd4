package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
	"github.com/execstore/execstore/dispatcher/dispatchertest"
	"github.com/execstore/execstore/workflow"
)

type Order struct {
	ID     int    `json:"id"`
	Status string `json:"status"`
	Cents  int    `json:"cents"`
}

type Receipt struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

// The shop's charge-order workflow: wait ten minutes in case the customer
// cancels, load the order, charge the card. The clock is manual, so the ten
// minutes pass in one call.
func Example() {
	dir, _ := os.MkdirTemp("", "workflow-example")
	defer os.RemoveAll(dir)
	clock := dispatchertest.NewClock(time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC))
	store, _ := execstore.Open(dir, execstore.Options{Now: clock.Now, NoSync: true})
	defer store.Close()

	worker := workflow.NewWorker(store, workflow.Options{})
	workflow.Register(worker, "charge-order", func(x *workflow.Execution, p struct{ Order int }) (Receipt, error) {
		if err := x.Sleep("wait", 10*time.Minute); err != nil {
			return Receipt{}, err // suspended: this run ends here
		}
		order, err := workflow.Run(x, "load", func(ctx context.Context) (Order, error) {
			fmt.Println(clock.Now().Format(time.TimeOnly), "loading order", p.Order)
			return Order{ID: p.Order, Status: "open", Cents: 2500}, nil
		})
		if err != nil {
			return Receipt{}, err
		}
		return workflow.Run(x, "charge", func(ctx context.Context) (Receipt, error) {
			fmt.Println(clock.Now().Format(time.TimeOnly), "charging", order.Cents, "cents")
			return Receipt{ID: "r-1", Cents: order.Cents}, nil
		})
	})
	d, _ := dispatcher.New(store, worker, dispatcher.Options{Clock: clock})
	d.Start()
	defer d.Stop(context.Background())

	client := workflow.NewClient(store)
	ctx := context.Background()
	id, _ := client.Trigger(ctx, workflow.TriggerRequest{ExecutionID: "order-42", WorkflowID: "charge-order", Params: map[string]int{"Order": 42}})
	_, err := client.Trigger(ctx, workflow.TriggerRequest{ExecutionID: "order-42", WorkflowID: "charge-order", Params: map[string]int{"Order": 42}})
	fmt.Println("trigger again:", errors.Is(err, execstore.ErrExecutionIDConflict))

	waitUntil(store, id, execstore.StatusSuspended)
	clock.Advance(10 * time.Minute)
	rec, _ := client.Wait(ctx, id)
	receipt, err := workflow.Result[Receipt](rec)
	fmt.Println(rec.ExecutionID, rec.Status, receipt, err)
	// Output:
	// trigger again: true
	// 12:10:00 loading order 42
	// 12:10:00 charging 2500 cents
	// order-42 completed {r-1 2500} <nil>
}

// waitUntil waits until id's record has status s.
func waitUntil(store *execstore.Store, id string, s execstore.Status) {
	for {
		changed := store.DueChanged()
		if rec, _ := store.Get(context.Background(), id); rec.Status == s {
			return
		}
		<-changed
	}
}
