package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/execstore/execstore"
)

// An execution that has not ended by its deadline fails with
// ErrDeadlineExceeded: here the deadline has passed when it is admitted, so
// the store's writer fails it at once, stamped with the store's time.
func ExampleAdmitRequest_deadline() {
	dir, _ := os.MkdirTemp("", "execstore-example")
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	store, err := execstore.Open(dir, execstore.Options{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	ctx := context.Background()
	if _, err := store.Admit(ctx, execstore.AdmitRequest{ExecutionID: "quote-7", WorkflowID: "price-quote",
		Deadline: now.Add(-time.Minute)}); err != nil {
		panic(err)
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rec, err := store.Await(wait, "quote-7")
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Status, errors.Is(rec.Outcome.Error, execstore.ErrDeadlineExceeded), rec.UpdatedAt.Format(time.TimeOnly))
	// Output:
	// failed true 12:00:00
}
