package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
)

// The story on the real clock with a short wait. The first line names the
// temporary directory, and the due times depend on the clock, so they are
// left out here; the rest is what `go run ./examples/shop --wait 100ms`
// prints.
func Example() {
	var out bytes.Buffer
	if err := run([]string{"--wait", "250ms"}, &out, io.Discard); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		if i := strings.Index(line, "; due at"); i >= 0 {
			line = line[:i]
		}
		fmt.Println(line)
	}
	// Output:
	// 1. Order 42 is placed (25.00). The shop triggers charge-order for it with execution ID order-42.
	//    trigger order-42: admitted
	//    order-42: suspended in its wait, in case the customer cancels
	// 2. The shop's request timed out, so it sends the same trigger again.
	//    trigger order-42: refused with EXECUTION_ID_CONFLICT: order-42 exists, and nothing was queued
	// 3. 250ms later, the wake falls due and order-42 runs again from the top.
	//    order-42: loaded order 42: open, 25.00 due
	//    order-42: charged the card 25.00 (receipt r-1)
	//    order-42: completed, charged 25.00 (receipt r-1)
	// 4. The customer adds socks (7.00). The shop triggers order-42 again, meaning a new charge.
	//    trigger order-42: refused with EXECUTION_ID_CONFLICT: order-42 exists, and nothing was queued
	//    so the shop knows at once to use a new ID, order-42-2.
	//    trigger order-42-2: admitted
	//    order-42-2: suspended in its wait, in case the customer cancels
	// 5. 250ms later:
	//    order-42-2: loaded order 42: open, 7.00 due
	//    order-42-2: charged the card 7.00 (receipt r-2)
	//    order-42-2: completed, charged 7.00 (receipt r-2)
	// card statement: 25.00 for order-42/charge (r-1)
	// card statement: 7.00 for order-42-2/charge (r-2)
	// charged 2 times, 32.00 in all, 2 gateway requests
}

// A wait that is not positive is refused.
func Example_waitNotPositive() {
	fmt.Println(run([]string{"--wait", "0s"}, io.Discard, io.Discard))
	// Output:
	// --wait 0s must be positive
}
