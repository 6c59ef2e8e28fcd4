package harness

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ClaimConfig is one configuration of workload (b).
type ClaimConfig struct {
	Claimers int // concurrent claimers ...
	Limit    int // ... each claiming up to this many at a time
	// Chained: each claimer completes the batch it ran and claims the next
	// in one call, as a worker loop does (a Chainer's chain); otherwise it
	// claims, then completes, in two calls (ClaimComplete). A contender that
	// does not chain skips the chained configurations.
	Chained bool
}

func (c ClaimConfig) String() string {
	return fmt.Sprintf("%d claimers x %d, %s", c.Claimers, c.Limit, callsLabel(c.Chained))
}

// overshoot bounds how far past a round's quota the claims go: the
// completions of the calls in flight when it is reached and, chained, the
// batches the chains still hold then.
func (c ClaimConfig) overshoot() int {
	if c.Chained {
		return 2 * c.Claimers * c.Limit
	}
	return c.Claimers * c.Limit
}

// ClaimPlan is what workloads (b) and (e) run for one contender.
type ClaimPlan struct {
	Pending []int         // pending sizes, each in a fresh store filled once
	Grid    []int         // pending sizes at which Configs run
	Configs []ClaimConfig // (b)
	// Scale is the scale curve's configuration in each mode it runs in (one
	// claimers x limit, at most once chained and once not), run at every
	// pending size.
	Scale []ClaimConfig
}

// The values of the -claim-mode flag.
const (
	ClaimModeBoth = "both" // every configuration of the plan
	ClaimModeTwo  = "two"  // only claim, then complete (two calls per round)
	ClaimModeOne  = "one"  // only chained: complete and claim the next in one call
)

// claimGrid is every claimers x limit in each of modes (false: two calls,
// true: chained), the modes of one claimers x limit next to each other.
func claimGrid(claimers, limits []int, modes ...bool) []ClaimConfig {
	var out []ClaimConfig
	for _, c := range claimers {
		for _, l := range limits {
			for _, m := range modes {
				out = append(out, ClaimConfig{Claimers: c, Limit: l, Chained: m})
			}
		}
	}
	return out
}

// WithMode keeps the configurations of one mode (ClaimModeTwo or
// ClaimModeOne), or all of them (ClaimModeBoth).
func (c ClaimPlan) WithMode(mode string) (ClaimPlan, error) {
	var keep func(ClaimConfig) bool
	switch mode {
	case ClaimModeBoth, "":
		return c, nil
	case ClaimModeTwo:
		keep = func(cc ClaimConfig) bool { return !cc.Chained }
	case ClaimModeOne:
		keep = func(cc ClaimConfig) bool { return cc.Chained }
	default:
		return c, fmt.Errorf("claim mode %q: want %s, %s or %s", mode, ClaimModeBoth, ClaimModeTwo, ClaimModeOne)
	}
	drop := func(cc ClaimConfig) bool { return !keep(cc) }
	c.Configs = slices.DeleteFunc(slices.Clone(c.Configs), drop)
	c.Scale = slices.DeleteFunc(slices.Clone(c.Scale), drop)
	return c, nil
}

// WithPending runs the plan at the given pending sizes only, in increasing
// order: the scale configurations at each, the grid at those that are grid
// sizes too. A size need not be one of the plan's. Nil keeps the plan.
func (c ClaimPlan) WithPending(sizes []int) (ClaimPlan, error) {
	if sizes == nil {
		return c, nil
	}
	if len(sizes) == 0 {
		return c, errors.New("pending sizes: none given")
	}
	for _, n := range sizes {
		if n < 1 || n > pendingMax {
			return c, fmt.Errorf("pending size %d: want 1 to %d", n, pendingMax)
		}
	}
	sizes = slices.Compact(slices.Sorted(slices.Values(sizes)))
	c.Grid = slices.DeleteFunc(slices.Clone(c.Grid), func(n int) bool { return !slices.Contains(sizes, n) })
	c.Pending = sizes
	return c, nil
}

// pendingMax bounds a pending size given on the command line: an execstore
// holds about 350 B per record, and the fresh store the harness opens after
// 16 million executions must fit beside the one it replaces.
const pendingMax = 20_000_000

// configsAt is what runs at pending size n: the Configs at a Grid size, and
// the Scale configurations (once, if they are among the Configs).
func (c ClaimPlan) configsAt(n int) []ClaimConfig {
	var out []ClaimConfig
	if slices.Contains(c.Grid, n) {
		out = slices.Clone(c.Configs)
	}
	for _, sc := range c.Scale {
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	return out
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

// storeExecutionsMax bounds the executions one store takes before the
// next configuration gets a fresh one (filled again, untimed): every
// completed record stays in an execstore's memory (about 350 B each), and
// the configurations of the full plan complete several million executions
// each at 10^6 pending, more than the machine's memory holds all together.
var storeExecutionsMax = 16_000_000

func (r *Runner) claimAt(ctx context.Context, mk Maker, plan ClaimPlan, size int) error {
	s, done, err := r.open(ctx, mk)
	if skip(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { done() }()
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
	_, chains := s.(Chainer)
	for _, c := range plan.configsAt(size) {
		if c.Chained && !chains {
			continue
		}
		if p.next-size > storeExecutionsMax {
			took := p.next - p.pending
			done()
			if s, done, err = r.open(ctx, mk); err != nil {
				done = func() {}
				return err
			}
			p = &pool{s: s, size: size}
			t0 := time.Now()
			if err := p.topUp(ctx); err != nil {
				return fmt.Errorf("%s: fill %d: %w", s.Name(), size, err)
			}
			r.logf("(b) %s: a fresh store (the last completed %d executions), filled %d pending in %.1f s",
				s.Name(), took, size, time.Since(t0).Seconds())
		}
		row, err := r.claimConfig(ctx, p, c)
		if err != nil {
			return err
		}
		if slices.Contains(plan.Grid, size) {
			r.Res.Claim = append(r.Res.Claim, row)
		}
		if slices.Contains(plan.Scale, c) {
			if c.Chained {
				scale.ChainedRate = row.Rate
			} else {
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

func (r *Runner) claimConfig(ctx context.Context, p *pool, c ClaimConfig) (ClaimRow, error) {
	row := ClaimRow{System: p.s.Name(), Pending: p.size, Claimers: c.Claimers, Limit: c.Limit, Chained: c.Chained}
	es, isExec := p.s.(*Execstore)
	var execs, batches, entries float64
	for range r.Cfg.Reps {
		res, err := r.claimFor(ctx, p, c)
		if err != nil {
			return row, fmt.Errorf("%s: claim (%s): %w", p.s.Name(), c, err)
		}
		row.Rate = append(row.Rate, float64(res.done)/res.timed.Seconds())
		execs += float64(res.done)
		batches += float64(res.batches)
		entries += float64(res.entries)
		r.logf("(b) %s, %d pending, %s: %.0f/s", p.s.Name(), p.size, c, row.Rate[len(row.Rate)-1])
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

// claimResult is one timed run of a configuration, over its rounds.
type claimResult struct {
	done             int           // completions in the timed windows: the rate's numerator
	finished         int           // completions outside them (the chains' Finish)
	timed            time.Duration // the timed windows: the rate's denominator
	batches, entries uint64        // execstore's WAL batches and entries in the timed windows
}

// claimFor runs claimers concurrently for the configured duration, in
// rounds: before each round the pool is topped up to its size (untimed);
// a round ends when half the pool is consumed or the time is up.
func (r *Runner) claimFor(ctx context.Context, p *pool, c ClaimConfig) (claimResult, error) {
	var res claimResult
	var wal func() (uint64, uint64)
	if es, ok := p.s.(*Execstore); ok {
		wal = func() (uint64, uint64) {
			b, e, _ := es.WALBatches(ctx)
			return b, e
		}
	}
	for res.timed < r.Cfg.Duration {
		if err := p.topUp(ctx); err != nil {
			return res, err
		}
		// Claims in flight may overshoot the quota: the pool never drops
		// below half its size.
		quota := max(c.Limit, p.size/2-c.overshoot())
		round, err := claimRound(ctx, p.s, c, quota, r.Cfg.Duration-res.timed, wal)
		if err != nil {
			return res, err
		}
		res.done += round.done
		res.finished += round.finished
		res.timed += round.elapsed
		res.batches += round.batches
		res.entries += round.entries
		p.pending -= round.done + round.finished
		if round.done+round.finished == 0 {
			return res, fmt.Errorf("nothing claimed with %d pending", p.pending)
		}
	}
	return res, nil
}

// roundResult is one round of claimRound.
type roundResult struct {
	done             int           // completions in the timed window
	finished         int           // completions after it, untimed (the chains' Finish)
	elapsed          time.Duration // the timed window
	batches, entries uint64        // WAL batches and entries in the window, if wal was given
}

// claimRound runs c's claimers until quota executions are completed or d has
// passed. wal, if not nil, reads execstore's WAL batch and entry counters.
func claimRound(ctx context.Context, s System, c ClaimConfig, quota int, d time.Duration, wal func() (uint64, uint64)) (roundResult, error) {
	if !c.Chained {
		return twoCallRound(ctx, s, c, quota, d, wal)
	}
	ch, ok := s.(Chainer)
	if !ok {
		return roundResult{}, fmt.Errorf("%s does not chain", s.Name())
	}
	return chainRound(ctx, ch, c, quota, d, wal)
}

// walDelta reads the WAL counters now and returns a function that gives the
// counts since.
func walDelta(wal func() (uint64, uint64)) func() (uint64, uint64) {
	if wal == nil {
		return func() (uint64, uint64) { return 0, 0 }
	}
	b0, e0 := wal()
	return func() (uint64, uint64) {
		b1, e1 := wal()
		return b1 - b0, e1 - e0
	}
}

// twoCallRound is the round of the two-call mode: each claimer calls
// ClaimComplete (claim, then complete) again and again. The whole round is
// timed.
func twoCallRound(ctx context.Context, s System, c ClaimConfig, quota int, d time.Duration, wal func() (uint64, uint64)) (roundResult, error) {
	var consumed atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	since := walDelta(wal)
	start := time.Now()
	deadline := start.Add(d)
	for range c.Claimers {
		wg.Go(func() {
			// Once at least, whatever the clock: a round whose time left is
			// shorter than starting a goroutine still claims.
			for calls := 0; calls == 0 || consumed.Load() < int64(quota) && time.Now().Before(deadline); calls++ {
				n, err := s.ClaimComplete(ctx, c.Limit)
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
	res := roundResult{done: int(consumed.Load()), elapsed: time.Since(start)}
	res.batches, res.entries = since()
	return res, first
}

// chainRound is the round of the chained mode: one chain per claimer, each
// Next completing the batch the chain holds and claiming the next in one call.
//
// The timed window holds the same work per completed execution as the
// two-call mode's. Each chain's first Next only claims (it completes
// nothing): it runs before the window opens, untimed. In the window each Next
// completes one batch and claims one, and only its completions count. When
// the window closes, each chain still holds the batch its last Next claimed:
// Finish completes it, untimed and outside the rate, so that nothing is left
// leased when the pool is topped up, and the pool's pending count goes down
// by it too. So k batches completed in the window cost k completions and k
// claims in it, as k calls of ClaimComplete would; what moved out of the
// window is one claim and one completion per chain per round.
func chainRound(ctx context.Context, ch Chainer, c ClaimConfig, quota int, d time.Duration, wal func() (uint64, uint64)) (roundResult, error) {
	var res roundResult
	chains := make([]ClaimChain, c.Claimers)
	held := make([]int, c.Claimers) // the batch each chain holds
	for i := range chains {
		chains[i] = ch.Chain()
	}
	// Untimed: each chain claims its first batch.
	err := eachChain(chains, func(i int, cc ClaimChain) error {
		done, n, err := cc.Next(ctx, c.Limit)
		if err == nil && done != 0 {
			err = fmt.Errorf("a chain's first Next completed %d", done)
		}
		held[i] = n
		return err
	})
	if err != nil {
		return res, err
	}
	var consumed atomic.Int64
	since := walDelta(wal)
	start := time.Now()
	deadline := start.Add(d)
	err = eachChain(chains, func(i int, cc ClaimChain) error {
		// Once at least, whatever the clock: every chain that holds a
		// batch completes it in the window.
		for held[i] > 0 {
			done, n, err := cc.Next(ctx, c.Limit)
			if err != nil {
				return err
			}
			held[i] = n
			if consumed.Add(int64(done)) >= int64(quota) || !time.Now().Before(deadline) {
				break
			}
		}
		return nil
	})
	res.elapsed = time.Since(start)
	res.batches, res.entries = since()
	res.done = int(consumed.Load())
	if err != nil {
		return res, err
	}
	// Untimed: complete what the chains hold.
	var finished atomic.Int64
	err = eachChain(chains, func(_ int, cc ClaimChain) error {
		n, err := cc.Finish(ctx)
		finished.Add(int64(n))
		return err
	})
	res.finished = int(finished.Load())
	return res, err
}

// eachChain runs fn for every chain, each on its own goroutine, and returns
// their errors joined.
func eachChain(chains []ClaimChain, fn func(i int, c ClaimChain) error) error {
	errs := make([]error, len(chains))
	var wg sync.WaitGroup
	for i, c := range chains {
		wg.Go(func() { errs[i] = fn(i, c) })
	}
	wg.Wait()
	return errors.Join(errs...)
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
	r.logf("(b) floor at %s: %d entries of %d B per batch (%.0f executions): %.0f executions/s",
		configLabel(*row), entries, size, row.ExecPerBatch, row.Floor.Median())
	return nil
}
