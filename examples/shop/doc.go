// Command shop tells the shop's story from RFC 001 with a real store: order
// 42 triggers charge-order as order-42, a repeated trigger is refused, the
// wait passes and the card is charged once, and a reused ID for an added
// item is refused so that the shop uses order-42-2.
//
//	go run ./examples/shop [--data DIR] [--wait 2s]
//
// The story's code is in package chargeorder, whose tests prove the card is
// charged exactly once under repeated triggers, simultaneous wakes, a
// stalled worker and restarts.
package main
