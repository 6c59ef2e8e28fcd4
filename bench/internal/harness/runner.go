package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// errSkipped is open's answer for a contender the run leaves out (-only).
var errSkipped = errors.New("skipped")

// skip reports whether err only says the contender was left out.
func skip(err error) bool { return errors.Is(err, errSkipped) }

// Config says how long and how often to measure.
type Config struct {
	Quick    bool          // the CI mode: seconds per contender, no PostgreSQL
	Duration time.Duration // one timed run of one configuration
	Reps     int           // runs of each configuration (the report gives the median and spread)
	TempDir  string        // where stores are created (and removed)
	Only     string        // run only the contenders whose name contains this
	Out      io.Writer     `json:"-"` // progress lines
}

// Maker makes a fresh, unopened contender.
type Maker func() System

// Runner runs the workloads and collects their results.
type Runner struct {
	Cfg   Config
	Res   *Results
	start time.Time
}

// NewRunner returns a runner with empty results.
func NewRunner(cfg Config) *Runner {
	return &Runner{Cfg: cfg, Res: &Results{}, start: time.Now()}
}

func (r *Runner) logf(format string, args ...any) {
	el := time.Since(r.start).Round(time.Second)
	fmt.Fprintf(r.Cfg.Out, "[%6s] %s\n", el, fmt.Sprintf(format, args...))
}

// open makes a fresh contender in its own temporary directory; done closes
// it and removes the directory.
func (r *Runner) open(ctx context.Context, mk Maker) (System, func(), error) {
	dir, err := os.MkdirTemp(r.Cfg.TempDir, "store-")
	if err != nil {
		return nil, nil, err
	}
	s := mk()
	if !strings.Contains(s.Name(), r.Cfg.Only) {
		_ = os.RemoveAll(dir)
		return nil, nil, errSkipped
	}
	if err := s.Open(ctx, dir); err != nil {
		_ = s.Close()
		_ = os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("%s: open: %w", s.Name(), err)
	}
	return s, func() {
		if err := s.Close(); err != nil {
			r.logf("%s: close: %v", s.Name(), err)
		}
		_ = os.RemoveAll(dir)
	}, nil
}

func (r *Runner) tempDir() (string, func(), error) {
	dir, err := os.MkdirTemp(r.Cfg.TempDir, "floor-")
	return dir, func() { _ = os.RemoveAll(dir) }, err
}
