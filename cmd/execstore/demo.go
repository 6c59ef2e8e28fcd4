package main

import (
	"io"

	"github.com/execstore/execstore/examples/shop/chargeorder"
)

// demoCommand runs the shop's story from RFC 001 with a real store, the
// dispatcher and the workflow package, on the system clock with a short wait:
//
//	execstore demo [--data DIR] [--wait 2s] [--verbose]
//
// Order 42 triggers charge-order as order-42; a repeated trigger is refused;
// the wait passes and the card is charged once; a reused ID for an added
// item is refused, and order-42-2 charges it. The story goes to stdout, step
// by step; with --verbose the store's and dispatcher's logs go to stderr.
// Without --data the store lives in a temporary directory, removed
// afterwards.
func demoCommand(args []string, stdout, stderr io.Writer) error {
	return chargeorder.Command("demo", args, stdout, stderr)
}
