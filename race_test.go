package execstore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// Readers share the store's read lock, so everything a read touches must be
// safe to share; run with -race.
func TestConcurrentReadersAndTheWriterDoNotRace(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 50; i++ {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("e-%d", i), WorkflowID: "w"})
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("e-%d", (i*7+r)%60)
				f.s.Get(ctx, id)
				f.s.Step(ctx, id, "s")
				f.s.Read(ctx, "k")
				f.s.Stats(ctx)
			}
		}(r)
	}
	for i := 0; i < 200; i++ {
		id := fmt.Sprintf("e-%d", i%50)
		f.s.RequestWake(ctx, id, t0.Add(time.Duration(i)))
		for _, l := range f.claim(3, time.Minute) {
			f.s.SaveStep(ctx, l, "s", raw(`1`))
			f.s.Acknowledge(ctx, l, execstore.Suspended())
		}
	}
	close(stop)
	wg.Wait()
}
