package chargeorder

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
)

// WorkflowID is the ID charge-order is registered under.
const WorkflowID = "charge-order"

// Params are charge-order's params: the order to charge.
type Params struct {
	Order int `json:"order"` // the order number
}

// Result is how charge-order ended.
type Result struct {
	Status  string `json:"status"`            // "charged", or "skipped" if nothing was due
	Receipt string `json:"receipt,omitempty"` // the charge's receipt
	Cents   int    `json:"cents,omitempty"`   // the amount charged
}

// Config configures charge-order.
type Config struct {
	// Wait is how long charge-order waits before charging, in case the
	// customer cancels. Default ten minutes.
	Wait time.Duration
	// Out receives a line for each thing the workflow does. Nil discards
	// them.
	Out io.Writer
}

// Register registers charge-order, charging through shop, with w.
func Register(w *workflow.Worker, shop *Shop, cfg Config) {
	if cfg.Wait == 0 {
		cfg.Wait = 10 * time.Minute
	}
	say := newPrinter(cfg.Out)
	workflow.Register(w, WorkflowID, func(x *workflow.Execution, p Params) (Result, error) {
		return chargeOrder(x, p, shop, cfg.Wait, say)
	})
}

// chargeOrder waits, loads the order and, if it is open with something due,
// charges the card. The charge's idempotency key is the execution ID and the
// step key: a rerun after a crash mid-charge repeats the request with the
// same key, and the gateway does not charge twice.
func chargeOrder(x *workflow.Execution, p Params, shop *Shop, wait time.Duration, say printer) (Result, error) {
	if err := x.Sleep("wait", wait); err != nil {
		return Result{}, err // suspended until the wait is over (or the store failed)
	}
	order, err := workflow.Run(x, "load", func(ctx context.Context) (Order, error) {
		o, err := shop.Load(ctx, p.Order)
		if err == nil {
			say("%s: loaded order %d: %s, %s due", x.ID(), o.ID, o.Status, money(o.DueCents()))
		}
		return o, err
	})
	if err != nil {
		return Result{}, err
	}
	if order.Status != "open" || order.DueCents() <= 0 {
		say("%s: nothing to charge", x.ID())
		return Result{Status: "skipped"}, nil
	}
	receipt, err := workflow.Run(x, "charge", func(ctx context.Context) (Receipt, error) {
		r, err := shop.Charge(ctx, x.ID()+"/charge", order.ID, order.DueCents())
		if err == nil {
			say("%s: charged the card %s (receipt %s)", x.ID(), money(r.Cents), r.ID)
		}
		return r, err
	})
	if err != nil {
		return Result{}, err
	}
	return Result{Status: "charged", Receipt: receipt.ID, Cents: receipt.Cents}, nil
}

func money(cents int) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

// printer prints one line; safe for concurrent use.
type printer func(format string, args ...any)

func newPrinter(w io.Writer) printer {
	if w == nil {
		return func(string, ...any) {}
	}
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// QueueSettings are charge-order's queue's settings: a key limit of one,
// leased, so that one customer's orders charge one at a time (each is
// triggered with its customer's key, CustomerKey) while other customers'
// charge beside them. Its waits hold no slot: only a delivery does.
var QueueSettings = execstore.QueueSettings{Name: WorkflowID, KeyLimit: 1, KeyMode: execstore.KeyLeased}

// CustomerKey is the concurrency key of a customer's orders.
func CustomerKey(customer string) string { return "customer:" + customer }

// Trigger triggers charge-order for an order of the shop as execution id,
// with the order's customer's key.
func Trigger(ctx context.Context, client *workflow.Client, shop *Shop, id string, order int) (string, error) {
	customer, ok := shop.CustomerOf(order)
	if !ok {
		return "", fmt.Errorf("order %d not found", order)
	}
	return client.Trigger(ctx, workflow.TriggerRequest{ExecutionID: id, WorkflowID: WorkflowID, Params: Params{Order: order},
		ConcurrencyKey: CustomerKey(customer)})
}
