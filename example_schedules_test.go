package execstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/execstore/execstore"
)

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
