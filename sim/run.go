package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

// Config sets up a simulation run. The zero value of each field means its
// default.
type Config struct {
	// FirstSeed is the first seed run; seeds FirstSeed, FirstSeed+1, ... follow.
	FirstSeed uint64
	// Seeds is how many seeds to run. Default 1. With Duration set, it is a
	// maximum (0: no maximum). Negative runs none.
	Seeds int
	// Duration, when set, stops starting new seeds once it has passed: a
	// nightly run's budget. Results never depend on it, only how many seeds run.
	Duration time.Duration
	// Ops is the number of workload steps per seed. Default 1000.
	Ops int
	// CheckEvery is how many operations pass between comparisons of the whole
	// state with the model (every operation's result, the records it touched,
	// the summary and the invariants are always checked). Default 25.
	CheckEvery int
	// Workers run seeds in parallel. Default GOMAXPROCS + 1: a seed spends
	// part of its time in its files' system calls, which one more worker
	// fills (a tenth faster on two cores).
	Workers int
	// Dir holds the stores' directories. Default: a new directory under
	// /dev/shm when it exists (tmpfs: fsync is cheap), else the system's
	// temporary directory.
	Dir string
	// StrictDirs makes crash images honor a rule journaling file systems
	// do not need but POSIX allows: a directory created since its parent's
	// last fsync may vanish in a crash. The store never fsyncs its own
	// directory after creating wal/ and snapshots/ in it, so with this set
	// a crash of a new store may lose everything; off by default.
	StrictDirs bool
	// Trace, when set, receives every trace line of every seed.
	Trace io.Writer
	// Progress, when set, receives a line every ProgressEvery.
	Progress      io.Writer
	ProgressEvery time.Duration
	// OnFailure, when set, is called with each failing seed as soon as it
	// fails (one call at a time), so a long run reports early.
	OnFailure func(SeedResult)
}

func (c Config) withDefaults() Config {
	if c.Seeds == 0 && c.Duration == 0 {
		c.Seeds = 1
	}
	if c.Ops <= 0 {
		c.Ops = 1000
	}
	if c.CheckEvery <= 0 {
		c.CheckEvery = 25
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0) + 1
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 10 * time.Second
	}
	return c
}

// SeedResult is one seed's outcome.
type SeedResult struct {
	Seed      uint64
	Ops       int
	Crashes   int
	Trace     [32]byte // hash of the seed's trace
	Violation error    // nil when every check held
	Tail      []string // the trace's last lines, with a violation
	Coverage  Coverage // what the seed reached
}

// Summary is a whole run's outcome.
type Summary struct {
	Seeds, Ops, Crashes int
	Failed              []SeedResult // seeds with a violation, in seed order
	Trace               string       // hash over the seeds' trace hashes, in seed order
	Elapsed             time.Duration
	Coverage            Coverage // what the seeds reached, summed
}

// Line is the summary line CI prints.
func (s Summary) Line() string {
	return fmt.Sprintf("sim: %d seeds, %d ops, %d crashes, %d violations, trace %s",
		s.Seeds, s.Ops, s.Crashes, len(s.Failed), s.Trace)
}

// RunSeed runs one seed in a directory of its own under dir.
func RunSeed(seed uint64, cfg Config, dir string) SeedResult {
	cfg = cfg.withDefaults()
	base := filepath.Join(dir, fmt.Sprintf("seed-%d", seed))
	defer os.RemoveAll(base)
	res := SeedResult{Seed: seed}
	if err := os.MkdirAll(base, 0o750); err != nil {
		res.Violation = err
		return res
	}
	w := newWorld(seed, cfg, base)
	err := w.run()
	res.Ops, res.Crashes, res.Trace, res.Coverage = w.ops, w.crashes, w.tr.sum(), w.cov
	if err != nil {
		res.Violation = err
		res.Tail = w.tr.tail
	}
	return res
}

// Run runs cfg's seeds on cfg.Workers goroutines. Each seed is independent
// and deterministic; the summary's trace hash combines the seeds' hashes in
// seed order.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	cfg = cfg.withDefaults()
	start := time.Now()
	dir, cleanup, err := workDir(cfg.Dir)
	if err != nil {
		return Summary{}, err
	}
	defer cleanup()

	var (
		mu      sync.Mutex
		results = map[uint64]SeedResult{}
		next    = cfg.FirstSeed
		wg      sync.WaitGroup
	)
	deadline := time.Time{}
	if cfg.Duration > 0 {
		deadline = start.Add(cfg.Duration)
	}
	take := func() (uint64, bool) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil || cfg.Seeds < 0 || (cfg.Seeds > 0 && next-cfg.FirstSeed >= uint64(cfg.Seeds)) ||
			(!deadline.IsZero() && time.Now().After(deadline)) {
			return 0, false
		}
		next++
		return next - 1, true
	}
	stop := progress(cfg, start, func() (int, int, int) {
		mu.Lock()
		defer mu.Unlock()
		ops, failed := 0, 0
		for _, r := range results {
			ops += r.Ops
			if r.Violation != nil {
				failed++
			}
		}
		return len(results), ops, failed
	})
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seed, ok := take()
				if !ok {
					return
				}
				r := RunSeed(seed, cfg, dir)
				mu.Lock()
				results[seed] = r
				if r.Violation != nil && cfg.OnFailure != nil {
					cfg.OnFailure(r)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stop()
	return summarize(cfg.FirstSeed, results, time.Since(start)), ctx.Err()
}

func summarize(first uint64, results map[uint64]SeedResult, elapsed time.Duration) Summary {
	s := Summary{Elapsed: elapsed, Coverage: Coverage{}}
	h := sha256.New()
	for seed := first; ; seed++ {
		r, ok := results[seed]
		if !ok {
			break
		}
		s.Seeds++
		s.Ops += r.Ops
		s.Crashes += r.Crashes
		s.Coverage.add(r.Coverage)
		h.Write(r.Trace[:])
		if r.Violation != nil {
			s.Failed = append(s.Failed, r)
		}
	}
	s.Trace = hex.EncodeToString(h.Sum(nil))[:16]
	return s
}

// progress prints a line every cfg.ProgressEvery until the returned stop is
// called.
func progress(cfg Config, start time.Time, counts func() (seeds, ops, failed int)) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				seeds, ops, failed := counts()
				fmt.Fprintf(cfg.Progress, "sim: %s: %d seeds, %d ops, %d violations so far\n",
					time.Since(start).Round(time.Second), seeds, ops, failed)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// workDir creates the directory the stores live in.
func workDir(dir string) (string, func(), error) {
	if dir == "" {
		parent := os.TempDir()
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			parent = "/dev/shm"
		}
		d, err := os.MkdirTemp(parent, "execstore-sim-")
		if err != nil {
			return "", nil, err
		}
		return d, func() { os.RemoveAll(d) }, nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", nil, err
	}
	return dir, func() {}, nil
}

// IsViolation reports whether err is a broken guarantee rather than a
// failure of the simulator itself (an I/O error in its own files).
func IsViolation(err error) bool {
	var v *violation
	return errors.As(err, &v)
}
