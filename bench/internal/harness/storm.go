package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Storm is workload (d): triggers triggers for triggers/2 IDs, each ID
// triggered twice, in a shuffled order, from 64 producers while the
// contender's worker loop runs; it counts the executions whose body ran
// more than once.
func (r *Runner) Storm(ctx context.Context, mk Maker, triggers int) error {
	s, done, err := r.open(ctx, mk)
	if skip(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer done()
	ids := triggers / 2
	order := make([]int, 0, 2*ids)
	for i := range ids {
		order = append(order, i, i)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })

	var mu sync.Mutex
	runs := make(map[string]int, ids)
	var completed atomic.Int64
	stop, err := s.Work(ctx, e2eWorkers, func(id string) {
		mu.Lock()
		runs[id]++
		mu.Unlock()
	}, func(string) { completed.Add(1) })
	if err != nil {
		return err
	}
	var refused atomic.Int64
	err = parallel(ctx, len(order), 64, func(k int) error {
		dup, err := s.Admit(ctx, id("d-", order[k]))
		if dup {
			refused.Add(1)
		}
		return err
	})
	if err != nil {
		stop()
		return fmt.Errorf("%s: storm: %w", s.Name(), err)
	}
	accepted := int64(len(order)) - refused.Load()
	for wait := time.Now().Add(30 * time.Second); completed.Load() < accepted && time.Now().Before(wait); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a late second run still counts
	stop()
	row := StormRow{System: s.Name(), Triggers: len(order), IDs: ids, Refused: int(refused.Load())}
	mu.Lock()
	for _, n := range runs {
		row.Runs += n
		if n > 1 {
			row.RanTwice++
		}
	}
	mu.Unlock()
	r.logf("(d) %s: %d triggers for %d IDs: %d refused, %d runs, %d executions ran twice",
		row.System, row.Triggers, row.IDs, row.Refused, row.Runs, row.RanTwice)
	r.Res.Storm = append(r.Res.Storm, row)
	return nil
}
