package harness

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// admissionBatch is the batch size for peers with a batch insert.
const admissionBatch = 64

// Admission is workload (a): producers admit new executions for the
// configured duration, one per call, and in batches where the peer offers
// a batch insert. For execstore it also runs the floor at the batch size its
// group commit reached.
func (r *Runner) Admission(ctx context.Context, mk Maker) error {
	for _, producers := range []int{1, 64} {
		batches := []int{1}
		if _, ok := mk().(BatchAdmitter); ok {
			batches = append(batches, admissionBatch)
		}
		for _, batch := range batches {
			if err := r.admission(ctx, mk, producers, batch); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Runner) admission(ctx context.Context, mk Maker, producers, batch int) error {
	s, done, err := r.open(ctx, mk)
	if skip(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer done()
	row := AdmissionRow{System: s.Name(), Producers: producers, Batch: batch}
	es, isExec := s.(*Execstore)
	floor := isExec && !es.NoSync
	var perBatch []float64
	for rep := range r.Cfg.Reps {
		var b0, e0 uint64
		if isExec {
			b0, e0, _ = es.WALBatches(ctx)
		}
		rate, err := r.admitFor(ctx, s, fmt.Sprintf("a%d-", rep), producers, batch)
		if err != nil {
			return fmt.Errorf("%s: admission: %w", s.Name(), err)
		}
		row.Rate = append(row.Rate, rate)
		r.logf("(a) %s, %d producers, batch %d: %.0f/s", s.Name(), producers, batch, rate)
		if !isExec {
			continue
		}
		b1, e1, _ := es.WALBatches(ctx)
		per := float64(e1-e0) / float64(max(b1-b0, 1))
		perBatch = append(perBatch, per)
		if floor {
			// The floor right after the run it is compared with, at the
			// batch size that run reached: a pair, so that the machine's
			// drift between runs cancels in the ratio.
			f, err := r.admissionFloor(per)
			if err != nil {
				return err
			}
			row.Floor = append(row.Floor, f)
			row.OfFloor = append(row.OfFloor, rate/f)
			r.logf("(a) floor: raw tidwall/wal, %.0f entries per batch: %.0f entries/s; execstore %.0f %% of it", per, f, 100*rate/f)
		}
	}
	if isExec {
		row.PerBatch = Reps(perBatch).Median()
	}
	r.Res.Admission = append(r.Res.Admission, row)
	return nil
}

// admitFor admits fresh IDs from producers goroutines for the configured
// duration and returns executions admitted per second.
func (r *Runner) admitFor(ctx context.Context, s System, prefix string, producers, batch int) (float64, error) {
	var next, admitted atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(r.Cfg.Duration)
	for range producers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				i := int(next.Add(int64(batch))) - batch
				var err error
				if batch == 1 {
					_, err = s.Admit(ctx, id(prefix, i))
				} else {
					ids := make([]string, batch)
					for k := range ids {
						ids[k] = id(prefix, i+k)
					}
					_, err = s.(BatchAdmitter).AdmitBatch(ctx, ids)
				}
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				admitted.Add(int64(batch))
			}
		})
	}
	wg.Wait()
	return float64(admitted.Load()) / time.Since(start).Seconds(), first
}

// admissionFloor runs raw tidwall/wal for one timed run at perBatch
// entries per batch (rounded), with admission-sized entries, and returns
// entries per second.
func (r *Runner) admissionFloor(perBatch float64) (float64, error) {
	entries := max(1, int(math.Round(perBatch)))
	dir, done, err := r.tempDir()
	if err != nil {
		return 0, err
	}
	defer done()
	bps, err := FloorWAL(dir, entries, admitBytes("a0-1234567"), r.Cfg.Duration)
	return bps * float64(entries), err
}
