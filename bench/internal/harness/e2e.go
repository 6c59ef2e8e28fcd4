package harness

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// e2eProducers issue the triggers; flatInFlight bounds the executions
// triggered but not yet completed in the flat-out run.
const (
	e2eProducers = 64
	flatInFlight = 4096
	e2eWorkers   = 256
)

// E2E is workload (c): triggers at each offered load (0: flat out) go
// through the contender's own worker loop to a recorded completion.
func (r *Runner) E2E(ctx context.Context, mk Maker, loads []int) error {
	for _, load := range loads {
		row := E2ERow{Offered: load}
		for rep := range r.Cfg.Reps {
			s, done, err := r.open(ctx, mk)
			if skip(err) {
				return nil
			}
			if err != nil {
				return err
			}
			row.System = s.Name()
			run, err := r.e2eRun(ctx, s, load)
			done()
			if err != nil {
				return fmt.Errorf("%s: end to end at %d/s: %w", row.System, load, err)
			}
			row.Throughput = append(row.Throughput, run.throughput)
			row.P50 = append(row.P50, run.p50)
			row.P99 = append(row.P99, run.p99)
			row.P999 = append(row.P999, run.p999)
			row.Lag99 = append(row.Lag99, run.lag99)
			row.Issued, row.Completed = run.issued, run.completed
			r.logf("(c) %s, offered %s (rep %d): %.0f/s, p50 %s p99 %s p99.9 %s, %d of %d completed (producer lag p99 %s)",
				row.System, offeredLabel(load), rep+1, run.throughput, fmtLatency(run.p50), fmtLatency(run.p99),
				fmtLatency(run.p999), run.completed, run.issued, fmtLatency(run.lag99))
		}
		r.Res.E2E = append(r.Res.E2E, row)
	}
	return nil
}

func offeredLabel(load int) string {
	if load == 0 {
		return "flat out"
	}
	return fmt.Sprintf("%d/s", load)
}

type e2eResult struct {
	throughput, p50, p99, p999 float64
	lag99                      float64 // p99 of the producers' lateness: the harness's own share
	issued, completed          int
}

// e2eTracker keeps, per trigger, when it was due to be sent and when its
// completion was reported.
type e2eTracker struct {
	prefix    string
	scheduled []atomic.Int64 // ns since start; the latency counts from here
	lag       []atomic.Int64 // ns the producer issued the trigger after its scheduled time
	doneAt    []atomic.Int64 // ns since start; 0 until completed
	completed atomic.Int64
	inflight  chan struct{} // flat out only
	start     time.Time
}

func (t *e2eTracker) onDone(s string) {
	i := idIndex(t.prefix, s)
	if i < 0 || i >= len(t.doneAt) {
		return
	}
	if t.doneAt[i].CompareAndSwap(0, int64(time.Since(t.start))) {
		t.completed.Add(1)
		if t.inflight != nil {
			<-t.inflight
		}
	}
}

func (r *Runner) e2eRun(ctx context.Context, s System, load int) (e2eResult, error) {
	capacity := int(float64(max(load, 500_000)) * r.Cfg.Duration.Seconds())
	t := &e2eTracker{prefix: "c-", scheduled: make([]atomic.Int64, capacity),
		lag: make([]atomic.Int64, capacity), doneAt: make([]atomic.Int64, capacity)}
	if load == 0 {
		t.inflight = make(chan struct{}, flatInFlight)
	}
	stop, err := s.Work(ctx, e2eWorkers, func(string) {}, t.onDone)
	if err != nil {
		return e2eResult{}, err
	}
	defer stop()
	t.start = time.Now()
	issued, err := r.produce(ctx, s, t, load)
	if err != nil {
		return e2eResult{}, err
	}
	// Wait for the issued triggers to complete, at most 5 s or the run's
	// length, whichever is longer.
	wait := time.Now().Add(max(5*time.Second, r.Cfg.Duration))
	for t.completed.Load() < int64(issued) && time.Now().Before(wait) {
		time.Sleep(time.Millisecond)
	}
	return t.summarize(issued), nil
}

// produce issues triggers from e2eProducers goroutines. At an offered load,
// trigger i is due at i/load seconds and its latency counts from then, so a
// system that falls behind is charged for the wait (no coordinated
// omission); producers stop issuing at the run's end plus 2 s of catch-up.
// Flat out, a trigger is issued as soon as fewer than flatInFlight are
// outstanding, and its latency counts from its issue.
func (r *Runner) produce(ctx context.Context, s System, t *e2eTracker, load int) (int, error) {
	var next, issued atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	end := t.start.Add(r.Cfg.Duration)
	cutoff := end.Add(2 * time.Second)
	for range e2eProducers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(t.scheduled) {
					return
				}
				var due time.Time
				if load > 0 {
					due = t.start.Add(time.Duration(float64(i) / float64(load) * float64(time.Second)))
					if !due.Before(end) || time.Now().After(cutoff) {
						return
					}
					if wait := time.Until(due); wait > 50*time.Microsecond {
						time.Sleep(wait)
					}
				} else {
					if time.Now().After(end) {
						return
					}
					t.inflight <- struct{}{}
					due = time.Now()
				}
				t.scheduled[i].Store(int64(due.Sub(t.start)))
				t.lag[i].Store(int64(time.Since(due)))
				issued.Add(1)
				if _, err := s.Admit(ctx, id(t.prefix, i)); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	// Indexes are taken in order, but a producer may stop after taking one:
	// count the issued prefix, the ones whose schedule was recorded.
	return int(issued.Load()), first
}

func (t *e2eTracker) summarize(issued int) e2eResult {
	lat := make([]float64, 0, issued)
	lags := make([]float64, 0, issued)
	var last int64
	completed := 0
	for i := range t.scheduled {
		sch, done := t.scheduled[i].Load(), t.doneAt[i].Load()
		if sch == 0 && done == 0 && i > 0 {
			continue // never issued
		}
		lags = append(lags, float64(t.lag[i].Load())/1e9)
		if done == 0 {
			lat = append(lat, math.Inf(1))
			continue
		}
		completed++
		last = max(last, done)
		lat = append(lat, float64(done-sch)/1e9)
	}
	slices.Sort(lat)
	res := e2eResult{issued: issued, completed: completed}
	if last > 0 {
		res.throughput = float64(completed) / (float64(last) / 1e9)
	}
	res.p50, res.p99, res.p999 = percentile(lat, 0.50), percentile(lat, 0.99), percentile(lat, 0.999)
	slices.Sort(lags)
	res.lag99 = percentile(lags, 0.99)
	return res
}

// fmtLatency prints seconds as µs or ms; +Inf (never completed) as "n/c".
func fmtLatency(s float64) string {
	switch {
	case math.IsInf(s, 1):
		return "n/c"
	case math.IsNaN(s):
		return "-"
	case s < 1e-3:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.2f ms", s*1e3)
	}
	return fmt.Sprintf("%.2f s", s)
}
