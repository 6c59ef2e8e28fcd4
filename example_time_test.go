package execstore_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
)

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
