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

// ClaimPlan is what workloads (b) and (e) run for one contender.
type ClaimPlan struct {
	Pending  []int // pending sizes, each in a fresh store filled once
	Claimers []int // (b): concurrent claimers ...
	Limits   []int // ... each claiming up to this many at a time
	Grid     []int // pending sizes at which the whole Claimers x Limits grid runs
	// The scale curve's configuration, run at every pending size.
	ScaleClaimers, ScaleLimit int
}

// pool is a contender kept at a pending size: fill tops it up (untimed)
// between timed rounds.
type pool struct {
	s       System
	size    int
	next    int
	pending int
}

func (p *pool) topUp(ctx context.Context) error {
	n := p.size - p.pending
	if n <= 0 {
		return nil
	}
	if err := p.s.Fill(ctx, "p-", p.next, n); err != nil {
		return err
	}
	p.next += n
	p.pending += n
	return nil
}

// Claim runs workloads (b) and (e) for one contender.
func (r *Runner) Claim(ctx context.Context, mk Maker, plan ClaimPlan) error {
	for _, size := range plan.Pending {
		if err := r.claimAt(ctx, mk, plan, size); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) claimAt(ctx context.Context, mk Maker, plan ClaimPlan, size int) error {
	s, done, err := r.open(ctx, mk)
	if skip(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer done()
	p := &pool{s: s, size: size}
	t0 := time.Now()
	if err := p.topUp(ctx); err != nil {
		return fmt.Errorf("%s: fill %d: %w", s.Name(), size, err)
	}
	fill := time.Since(t0).Seconds()
	r.logf("(b) %s: filled %d pending in %.1f s", s.Name(), size, fill)
	scale := ScaleRow{System: s.Name(), Pending: size, FillSecs: fill}
	if err := r.measureSize(ctx, s, &scale); err != nil {
		return err
	}
	if err := r.measureReopen(ctx, s, &scale); err != nil {
		return err
	}
	for _, claimers := range plan.Claimers {
		for _, limit := range plan.Limits {
			isScale := claimers == plan.ScaleClaimers && limit == plan.ScaleLimit
			if !isScale && !slices.Contains(plan.Grid, size) {
				continue
			}
			row, err := r.claimConfig(ctx, p, claimers, limit)
			if err != nil {
				return err
			}
			if slices.Contains(plan.Grid, size) {
				r.Res.Claim = append(r.Res.Claim, row)
			}
			if isScale {
				scale.Rate = row.Rate
			}
		}
	}
	r.Res.Scale = append(r.Res.Scale, scale)
	return nil
}

// measureSize records what the contender holds per pending record.
func (r *Runner) measureSize(ctx context.Context, s System, row *ScaleRow) error {
	sz, ok := s.(Sizer)
	if !ok {
		return nil
	}
	n, kind, err := sz.Size(ctx)
	if err != nil {
		return fmt.Errorf("%s: size: %w", s.Name(), err)
	}
	row.PerRec = float64(n) / float64(row.Pending)
	row.SizeKind = kind
	r.logf("(e) %s at %d pending: %.0f B per record (%s)", s.Name(), row.Pending, row.PerRec, kind)
	return nil
}

// measureReopen times reopening the freshly filled store.
func (r *Runner) measureReopen(ctx context.Context, s System, row *ScaleRow) error {
	re, ok := s.(Reopener)
	if !ok {
		return nil
	}
	for range r.Cfg.Reps {
		d, err := re.Reopen(ctx)
		if err != nil {
			return fmt.Errorf("%s: reopen: %w", s.Name(), err)
		}
		row.Reopen = append(row.Reopen, d.Seconds())
	}
	r.logf("(e) %s at %d pending: reopen %.2f s", s.Name(), row.Pending, row.Reopen.Median())
	return nil
}

func (r *Runner) claimConfig(ctx context.Context, p *pool, claimers, limit int) (ClaimRow, error) {
	row := ClaimRow{System: p.s.Name(), Pending: p.size, Claimers: claimers, Limit: limit}
	es, isExec := p.s.(*Execstore)
	var execs, batches, entries float64
	for range r.Cfg.Reps {
		res, err := r.claimFor(ctx, p, claimers, limit)
		if err != nil {
			return row, fmt.Errorf("%s: claim: %w", p.s.Name(), err)
		}
		row.Rate = append(row.Rate, float64(res.done)/res.timed.Seconds())
		execs += float64(res.done)
		batches += float64(res.batches)
		entries += float64(res.entries)
		r.logf("(b) %s, %d pending, %d claimers x %d: %.0f/s", p.s.Name(), p.size, claimers, limit, row.Rate[len(row.Rate)-1])
	}
	if isExec && batches > 0 {
		row.ExecPerBatch = execs / batches
		row.EntriesPerBatch = entries / batches
		if !es.NoSync {
			if err := r.claimFloor(&row); err != nil {
				return row, err
			}
		}
	}
	return row, nil
}

type claimResult struct {
	done             int
	timed            time.Duration
	batches, entries uint64
}

// claimFor runs claimers concurrently for the configured duration, in
// rounds: before each round the pool is topped up to its size (untimed);
// a round ends when half the pool is consumed or the time is up.
func (r *Runner) claimFor(ctx context.Context, p *pool, claimers, limit int) (claimResult, error) {
	var res claimResult
	es, isExec := p.s.(*Execstore)
	for res.timed < r.Cfg.Duration {
		if err := p.topUp(ctx); err != nil {
			return res, err
		}
		var b0, e0, b1, e1 uint64
		if isExec {
			b0, e0, _ = es.WALBatches(ctx)
		}
		// Claims in flight may overshoot the quota by claimers x limit: the
		// pool never drops below half its size.
		quota := max(limit, p.size/2-claimers*limit)
		n, el, err := claimRound(ctx, p.s, claimers, limit, quota, r.Cfg.Duration-res.timed)
		if isExec {
			b1, e1, _ = es.WALBatches(ctx)
			res.batches += b1 - b0
			res.entries += e1 - e0
		}
		if err != nil {
			return res, err
		}
		res.done += n
		res.timed += el
		p.pending -= n
		if n == 0 {
			return res, fmt.Errorf("nothing claimed with %d pending", p.pending)
		}
	}
	return res, nil
}

func claimRound(ctx context.Context, s System, claimers, limit, quota int, d time.Duration) (int, time.Duration, error) {
	var consumed atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range claimers {
		wg.Go(func() {
			for consumed.Load() < int64(quota) && time.Now().Before(deadline) {
				n, err := s.ClaimComplete(ctx, limit)
				if err != nil {
					once.Do(func() { first = err })
					return
				}
				if n == 0 {
					return
				}
				consumed.Add(int64(n))
			}
		})
	}
	wg.Wait()
	return int(consumed.Load()), time.Since(start), first
}

// claimFloor runs raw tidwall/wal at the batch execstore reached: as many
// entries per batch, the same payload bytes, one fsync per batch; the floor
// in executions/s is its batches/s times execstore's executions per batch.
func (r *Runner) claimFloor(row *ClaimRow) error {
	entries := max(1, int(math.Round(row.EntriesPerBatch)))
	bytesPerExec := float64(claimAckBytes(row.Limit, "p-1234567")) / float64(row.Limit)
	size := max(1, int(math.Round(bytesPerExec*row.ExecPerBatch/float64(entries))))
	for range r.Cfg.Reps {
		dir, done, err := r.tempDir()
		if err != nil {
			return err
		}
		bps, err := FloorWAL(dir, entries, size, r.Cfg.Duration)
		done()
		if err != nil {
			return err
		}
		row.Floor = append(row.Floor, bps*row.ExecPerBatch)
	}
	r.logf("(b) floor: %d entries of %d B per batch (%.0f executions): %.0f executions/s",
		entries, size, row.ExecPerBatch, row.Floor.Median())
	return nil
}
