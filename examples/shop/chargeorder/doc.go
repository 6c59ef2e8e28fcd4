// Package chargeorder is the shop's story from RFC 001, in code: the
// charge-order workflow, the shop it charges for (orders and an idempotent
// payment gateway, in memory), and the demo that tells the story with a real
// store.
//
// When a customer places order 42, the shop triggers charge-order with
// execution ID order-42 and one param, the order number. The workflow waits
// ten minutes in case the customer cancels, loads the order, and if it is
// still open charges the card for what is due. Each of the three is an
// operation of package workflow with its own key ("wait", "load", "charge"),
// so a rerun (after the wait's wake, after a restart, after another worker
// took over) replays the finished ones from their saved results and never
// repeats a finished charge.
//
// Exactly once takes two parts, and the tests show both. The execution
// record gives the first: a repeated trigger, or a reused ID, is refused
// with execstore.ErrExecutionIDConflict; any number of wakes merge into one
// delivery; one worker holds the execution at a time, and a stale one's
// writes are fenced out by its lease token. The charge step gives the
// second: it passes the gateway an idempotency key made of the execution ID
// and the step key, because a process can die after the gateway charged and
// before the receipt was saved, and then the rerun must ask again without
// charging again. No storage engine can make an outside effect happen
// exactly once by itself; a durable step plus an idempotent effect can.
//
// Each order is triggered with its customer's concurrency key (Trigger,
// CustomerKey), and charge-order's queue has a key limit of one
// (QueueSettings): one customer's orders charge one at a time, other
// customers' beside them, and a customer's waiting orders cost the others'
// claims nothing.
//
// The shop also settles its card charges every night at 02:00 (settle-night,
// admitted by the schedule SettlementSchedule returns): each night's
// execution ID is the schedule's occurrence ID, so a night is settled once,
// and the nights the shop was down are all settled when it comes back.
package chargeorder
