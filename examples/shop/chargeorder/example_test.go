package chargeorder_test

import (
	"context"
	"os"
	"time"

	"github.com/execstore/execstore/dispatcher/dispatchertest"
	"github.com/execstore/execstore/examples/shop/chargeorder"
)

// The shop's story, on a manual clock: the ten minutes pass in one step.
func ExampleRunDemo() {
	dir, _ := os.MkdirTemp("", "shop-example")
	defer os.RemoveAll(dir)
	err := chargeorder.RunDemo(context.Background(), chargeorder.DemoOptions{
		Dir:   dir,
		Out:   os.Stdout,
		Clock: dispatchertest.NewClock(time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// 1. Order 42 is placed (25.00). The shop triggers charge-order for it with execution ID order-42.
	//    trigger order-42: admitted
	//    order-42: suspended in its wait, in case the customer cancels; due at 12:10:00.000 UTC
	// 2. The shop's request timed out, so it sends the same trigger again.
	//    trigger order-42: refused with EXECUTION_ID_CONFLICT: order-42 exists, and nothing was queued
	// 3. 10m0s later, the wake falls due and order-42 runs again from the top.
	//    order-42: loaded order 42: open, 25.00 due
	//    order-42: charged the card 25.00 (receipt r-1)
	//    order-42: completed, charged 25.00 (receipt r-1)
	// 4. The customer adds socks (7.00). The shop triggers order-42 again, meaning a new charge.
	//    trigger order-42: refused with EXECUTION_ID_CONFLICT: order-42 exists, and nothing was queued
	//    so the shop knows at once to use a new ID, order-42-2.
	//    trigger order-42-2: admitted
	//    order-42-2: suspended in its wait, in case the customer cancels; due at 12:20:00.000 UTC
	// 5. 10m0s later:
	//    order-42-2: loaded order 42: open, 7.00 due
	//    order-42-2: charged the card 7.00 (receipt r-2)
	//    order-42-2: completed, charged 7.00 (receipt r-2)
	// card statement: 25.00 for order-42/charge (r-1)
	// card statement: 7.00 for order-42-2/charge (r-2)
	// charged 2 times, 32.00 in all, 2 gateway requests
}
