package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/replica"
)

// The life of one execution: admit it, claim it under a lease, save a step,
// acknowledge its outcome.
func Example() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, err := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()

	id, _ := store.Admit(ctx, execstore.AdmitRequest{
		ExecutionID: "order-42",
		WorkflowID:  "charge-order",
		Params:      []byte(`{"order":42}`),
	})
	leases, _ := store.ClaimDue(ctx, 10, 30*time.Second)
	lease := leases[0]
	fmt.Println("claimed", lease.ExecutionID, "token", lease.Token, "until", lease.ExpiresAt.Format(time.TimeOnly))

	rec, _ := store.Get(ctx, lease.ExecutionID) // the event comes from the record
	fmt.Println("running", rec.WorkflowID, string(rec.Params))
	_ = store.SaveStep(ctx, lease, "charge", []byte(`{"receipt":"r-1"}`))

	rec, _ = store.Acknowledge(ctx, lease, execstore.Completed([]byte(`{"receipt":"r-1"}`)))
	fmt.Println(id, rec.Status, string(rec.Outcome.Result))
	// Output:
	// claimed order-42 token 1 until 12:00:30
	// running charge-order {"order":42}
	// order-42 completed {"receipt":"r-1"}
}

// A repeated trigger with the same execution ID is refused: no second run,
// no second wake, and the caller learns that order-42 exists.
func ExampleStore_Admit_duplicate() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	store, _ := execstore.Open(dir, execstore.Options{})
	defer store.Close()
	ctx := context.Background()

	req := execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order", Params: []byte(`{"order":42}`)}
	_, err := store.Admit(ctx, req)
	fmt.Println("first:", err)
	_, err = store.Admit(ctx, req)
	fmt.Println("again:", errors.Is(err, execstore.ErrExecutionIDConflict), execstore.ErrorCode(err))
	leases, _ := store.ClaimDue(ctx, 10, time.Minute)
	fmt.Println("deliveries:", len(leases))
	// Output:
	// first: <nil>
	// again: true EXECUTION_ID_CONFLICT
	// deliveries: 1
}

// Wakes merge into one due time, the earliest; a wake during a delivery is
// kept for after it.
func ExampleStore_RequestWake() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	defer store.Close()
	ctx := context.Background()

	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	leases, _ := store.ClaimDue(ctx, 1, time.Minute)
	// The workflow sleeps ten minutes: it asks for a wake, then suspends.
	store.RequestWake(ctx, "order-42", now.Add(10*time.Minute))
	store.RequestWake(ctx, "order-42", now.Add(20*time.Minute))
	rec, _ := store.Acknowledge(ctx, leases[0], execstore.Suspended())
	fmt.Println(rec.Status, "due at", rec.DueAt.Format(time.TimeOnly))
	// Output:
	// suspended due at 12:10:00
}

// stockError is an application's error with a stable code.
type stockError struct{ sku string }

func (e *stockError) Error() string { return "out of stock: " + e.sku }
func (e *stockError) Code() string  { return "OUT_OF_STOCK" }

// errOutOfStock is the application's sentinel for every stockError.
var errOutOfStock = &stockError{}

// A failed outcome's error, read back from the record, matches the errors
// its code identifies: errors.Is and ErrorCode work on it as they did on the
// error the workflow failed with, in this process or after a restart.
func ExampleWorkflowError_Is() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	defer store.Close()
	ctx := context.Background()

	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	leases, _ := store.ClaimDue(ctx, 1, time.Minute)
	failure := fmt.Errorf("reserving order 42: %w", &stockError{sku: "sku-7"})
	store.Acknowledge(ctx, leases[0], execstore.Failed(failure))

	rec, _ := store.Await(ctx, "order-42")
	err := rec.Outcome.Error // an *execstore.WorkflowError
	fmt.Println(err)
	fmt.Println("out of stock:", errors.Is(err, errOutOfStock))
	fmt.Println("lease lost:", errors.Is(err, execstore.ErrLeaseLost))
	fmt.Println("code:", execstore.ErrorCode(err))
	// Output:
	// reserving order 42: out of stock: sku-7
	// out of stock: true
	// lease lost: false
	// code: OUT_OF_STOCK
}

// The store's time never goes backwards: after its clock jumped ahead (and a
// command was stamped then) and back, Now stays at the store's time, and
// Stats shows the stamps held back until the clock catches up. Decide
// whether a wake has come with Now, as the store does.
func ExampleStore_Now() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	clock := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{Now: func() time.Time { return clock }})
	defer store.Close()
	ctx := context.Background()

	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	leases, _ := store.ClaimDue(ctx, 1, time.Minute)
	store.RequestWake(ctx, "order-42", clock.Add(10*time.Minute)) // a sleep until 12:10
	store.Acknowledge(ctx, leases[0], execstore.Suspended())

	clock = clock.Add(time.Hour) // the clock jumps ahead...
	store.Commit(ctx, execstore.Write{Key: "seen", Value: []byte(`true`)})
	clock = clock.Add(-59 * time.Minute) // ...and is corrected

	leases, _ = store.ClaimDue(ctx, 1, time.Minute) // the store's time is 13:00: the wake is due
	fmt.Println("clock", clock.Format(time.TimeOnly), "store", store.Now().Format(time.TimeOnly), "claimed", len(leases))
	wake := time.Date(2026, 1, 2, 12, 10, 0, 0, time.UTC)
	fmt.Println("wake reached by the store's time:", !store.Now().Before(wake), "by the clock:", !clock.Before(wake))
	st, _ := store.Stats(ctx)
	fmt.Println("stamps held back:", st.ClockBehindStamps, "by up to", st.ClockBehindMax)
	// Output:
	// clock 12:01:00 store 13:00:00 claimed 1
	// wake reached by the store's time: true by the clock: false
	// stamps held back: 1 by up to 59m0s
}

// The customer cancels order 42 while its delivery runs: the record is
// cancelled with the reason, and the worker's next fenced write is refused
// with an error that says why.
func ExampleStore_Cancel() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	defer store.Close()
	ctx := context.Background()

	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	leases, _ := store.ClaimDue(ctx, 1, time.Minute)

	rec, _ := store.Cancel(ctx, "order-42", "the customer cancelled")
	fmt.Println(rec.Status, rec.Status.Terminal(), rec.Outcome.Error.Message)
	fmt.Println("matches ErrCancelled:", errors.Is(rec.Outcome.Error, execstore.ErrCancelled))

	err := store.SaveStep(ctx, leases[0], "charge", []byte(`{"receipt":"r-1"}`))
	fmt.Println("the worker's write:", errors.Is(err, execstore.ErrLeaseLost), errors.Is(err, execstore.ErrCancelled))

	again, _ := store.Cancel(ctx, "order-42", "twice")
	fmt.Println("again:", again.Status, again.Outcome.Error.Message)
	// Output:
	// cancelled true the customer cancelled
	// matches ErrCancelled: true
	// the worker's write: true true
	// again: cancelled the customer cancelled
}

// An admission with MaxAttempts 2: two deliveries end without an outcome
// (the first is released with its error, the second's lease expires), and
// the claim after that fails the execution instead of delivering it a third
// time.
func ExampleAdmitRequest_maxAttempts() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	defer store.Close()
	ctx := context.Background()

	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order", MaxAttempts: 2})
	leases, _ := store.ClaimDue(ctx, 1, time.Minute)
	store.ReleaseWithCause(ctx, leases[0], 0, errors.New("payment gateway unavailable"))

	leases, _ = store.ClaimDue(ctx, 1, time.Minute)
	fmt.Println("attempt", leases[0].Token, "claimed")
	now = now.Add(2 * time.Minute) // the worker died: its lease expires

	leases, _ = store.ClaimDue(ctx, 1, time.Minute)
	rec, _ := store.Get(ctx, "order-42")
	fmt.Println("claimed:", len(leases), "status:", rec.Status, "attempts:", rec.Attempts, "of", rec.MaxAttempts)
	fmt.Println(execstore.ErrorCode(rec.Outcome.Error), "caused by", rec.Outcome.Error.Cause.Name)
	// Output:
	// attempt 2 claimed
	// claimed: 0 status: failed attempts: 2 of 2
	// ATTEMPTS_EXHAUSTED caused by LeaseExpiredError
}

// A nightly settlement: the schedule admits one execution per night, under
// the ID "<schedule>@<occurrence>", so a night is settled at most once, even
// if the store restarts or a caller triggers that night by hand.
func ExampleStore_PutSchedule() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	var clock atomic.Int64 // the store's clock, which the example moves
	clock.Store(time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	store, _ := execstore.Open(dir, execstore.Options{Now: now})
	defer store.Close()
	ctx := context.Background()

	sc, err := store.PutSchedule(ctx, execstore.Schedule{
		ID:         "nightly-settlement",
		WorkflowID: "settle",
		Params:     []byte(`{"shop":"main"}`),
		Cron:       "0 2 * * *", // 02:00 every night...
		CronOffset: time.Hour,   // ...at UTC+1, a fixed offset
		Start:      now(),
		CatchUp:    execstore.CatchUpLatest, // after downtime, settle only the latest missed night
	})
	fmt.Println("next:", sc.NextAt, err)

	// The night comes: the store's writer, which reads its clock at least
	// once a second while a schedule exists, admits the occurrence, and the
	// execution is due for a worker.
	due := store.DueChanged()
	clock.Store(sc.NextAt.UnixNano())
	<-due
	rec, _ := store.Get(ctx, execstore.ScheduleOccurrenceID(sc.ID, sc.NextAt))
	fmt.Println(rec.ExecutionID, rec.WorkflowID, string(rec.Params), rec.Status)
	sc, _ = store.GetSchedule(ctx, sc.ID)
	fmt.Println("next:", sc.NextAt)
	// Output:
	// next: 2026-01-03 01:00:00 +0000 UTC <nil>
	// nightly-settlement@2026-01-03T01:00:00Z settle {"shop":"main"} admitted
	// next: 2026-01-04 01:00:00 +0000 UTC
}

// List pages through the executions a query selects, here the failed ones
// of one workflow, newest first, two to a page.
func ExampleStore_List() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, _ := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	defer store.Close()
	ctx := context.Background()

	for _, id := range []string{"order-1", "order-2", "order-3", "order-4"} {
		store.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "charge-order"})
		now = now.Add(time.Minute)
	}
	leases, _ := store.ClaimDue(ctx, 10, time.Minute)
	for _, l := range leases {
		if l.ExecutionID == "order-2" {
			store.Acknowledge(ctx, l, execstore.Completed(nil))
		} else {
			store.Acknowledge(ctx, l, execstore.Failed(errors.New("card declined")))
		}
	}

	q := execstore.ListQuery{WorkflowID: "charge-order", Status: execstore.StatusFailed, Order: execstore.NewestFirst, Limit: 2}
	for page := 1; ; page++ {
		p, err := store.List(ctx, q)
		if err != nil {
			panic(err)
		}
		for _, rec := range p.Records {
			fmt.Println("page", page, rec.ExecutionID, rec.Status, rec.AdmittedAt.Format(time.TimeOnly))
		}
		if p.Cursor == "" {
			break
		}
		q.Cursor = p.Cursor
	}
	// Output:
	// page 1 order-4 failed 12:03:00
	// page 1 order-3 failed 12:02:00
	// page 2 order-1 failed 12:00:00
}

// A consumer of the change feed keeps its position and reads on from it,
// waiting for the next change instead of polling; after a restart it
// resumes where it stopped.
func ExampleStore_Changes() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	opts := execstore.Options{Now: func() time.Time { return now }}
	store, _ := execstore.Open(dir, opts)
	ctx := context.Background()

	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	page, _ := store.Changes(ctx, 0, 100)
	for _, c := range page.Changes {
		fmt.Println(c.Position, c.ExecutionID, c.Status)
	}
	position := page.Next // the consumer stores this

	// Elsewhere, the execution completes while the consumer waits.
	go func() {
		leases, _ := store.ClaimDue(ctx, 1, time.Minute)
		store.Acknowledge(ctx, leases[0], execstore.Completed(nil))
	}()
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	page, _ = store.Changes(wait, position, 100) // returns once the change is applied
	cancel()
	for _, c := range page.Changes {
		fmt.Println(c.Position, c.ExecutionID, c.Status)
	}
	position = page.Next

	store.Close()
	store, _ = execstore.Open(dir, opts)
	defer store.Close()
	store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-43", WorkflowID: "charge-order"})
	page, _ = store.Changes(ctx, position, 100)
	for _, c := range page.Changes {
		fmt.Println(c.Position, c.ExecutionID, c.Status)
	}
	// Output:
	// 1 order-42 admitted
	// 2 order-42 completed
	// 3 order-43 admitted
}

// A claimer that acknowledges what it ran and claims more in one call: one
// write and one fsync per round instead of two.
func ExampleStore_AcknowledgeAndClaim() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	store, err := execstore.Open(dir, execstore.Options{})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	for _, id := range []string{"invoice-1", "invoice-2", "invoice-3", "invoice-4"} {
		store.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "send-invoice"})
	}

	leases, _ := store.ClaimDue(ctx, 2, time.Minute)
	for round := 1; len(leases) > 0; round++ {
		acks := make([]execstore.Ack, len(leases))
		for i, l := range leases {
			fmt.Println("round", round, "sends", l.ExecutionID)
			acks[i] = execstore.Ack{Lease: l, Outcome: execstore.Completed(nil)}
		}
		var results []execstore.AckResult
		results, leases, err = store.AcknowledgeAndClaim(ctx, acks, 2, time.Minute)
		if err != nil {
			panic(err)
		}
		for _, r := range results {
			fmt.Println("round", round, r.Record.ExecutionID, r.Record.Status)
		}
	}
	// Output:
	// round 1 sends invoice-1
	// round 1 sends invoice-2
	// round 1 invoice-1 completed
	// round 1 invoice-2 completed
	// round 2 sends invoice-3
	// round 2 sends invoice-4
	// round 2 invoice-3 completed
	// round 2 invoice-4 completed
}

// A replicated store is the same Store on a raft node. Here one node on
// raft's in-memory transport forms a cluster of itself, so it leads at once;
// a real cluster runs three or five nodes on TCP (ReplicaOptions.Node's
// BindAddr), bootstrapped with the same Peers.
func ExampleOpenReplicated() {
	dir, _ := os.MkdirTemp("", "replicated-example")
	defer os.RemoveAll(dir)
	_, trans := raft.NewInmemTransport("mem-1")
	store, err := execstore.OpenReplicated(dir, execstore.ReplicaOptions{
		Node:  replica.NodeOptions{ID: "n1", Transport: trans},
		Peers: []execstore.Peer{{ID: "n1", Addr: "mem-1", Voter: true}},
	})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	if _, _, err := store.Node().WaitLeader(ctx); err != nil {
		panic(err)
	}
	// Once it leads, every write commits through raft before it answers.
	for {
		_, err = store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
		if !errors.Is(err, execstore.ErrNotLeader) {
			break // a node knows it leads a moment before it takes writes
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		panic(err)
	}
	rec, _ := store.Get(ctx, "order-42")
	fmt.Println(rec.ExecutionID, rec.Status)
	_, err = store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "charge-order"})
	fmt.Println(errors.Is(err, execstore.ErrExecutionIDConflict))
	// Output:
	// order-42 admitted
	// true
}
