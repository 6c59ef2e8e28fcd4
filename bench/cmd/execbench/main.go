// Command execbench runs execstore and its peers through the same workloads
// and writes results/RESULTS.md with charts.
//
//	go run ./cmd/execbench -quick            # seconds per contender, no PostgreSQL
//	go run ./cmd/execbench -pg 'postgres://...' # the full run (run.sh starts PostgreSQL)
//	go run ./cmd/execbench -quick -workloads b -claim-mode one -only execstore
//	go run ./cmd/execbench -workloads b -only execstore -pending 100000,1000000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/execstore/execstore/bench/internal/harness"
)

func main() {
	quick := flag.Bool("quick", false, "the quick mode: short runs, one repetition, no PostgreSQL")
	pg := flag.String("pg", os.Getenv("BENCH_PG_DSN"), "PostgreSQL connection string for the River contenders (full mode; with -quick, River on PostgreSQL joins the quick plan, e.g. run.sh full -quick)")
	out := flag.String("out", "", "directory for RESULTS.md and the charts (default results, or results/quick in the quick mode)")
	dur := flag.Duration("duration", 0, "one timed run (default 0.5s quick, 2s full)")
	reps := flag.Int("reps", 0, "repetitions of each configuration (default 1 quick, 3 full)")
	workloads := flag.String("workloads", "abcdefg", "workloads to run: (a) admission, (b) claim + complete, (c) end to end, (d) duplicate storm, (e) the scale curve, (f) a CPU profile, (g) workers over HTTP")
	tmp := flag.String("tmp", "", "directory for the stores (default: the system's temporary directory)")
	only := flag.String("only", "", "run only the contenders whose name contains this")
	claimMode := flag.String("claim-mode", harness.ClaimModeBoth, `workloads (b) and (e), how claimers run: "`+harness.ClaimModeTwo+
		`" claim, then complete (two calls a round); "`+harness.ClaimModeOne+
		`" complete the batch they ran and claim the next in one call (execstore AcknowledgeAndClaim, one SQLite transaction; River has none, so its claim rows are left out); "`+
		harness.ClaimModeBoth+`" each configuration of the plan in its modes`)
	pending := flag.String("pending", "", "workloads (b) and (e), only at these pending sizes, comma-separated (e.g. 100000,1000000): the scale configurations at each, the plan's grid at those that are grid sizes too")
	report := flag.String("report", "", "write the report again from this results.json, measuring nothing")
	flag.Parse()
	if *report != "" {
		if err := rewrite(*report, *out); err != nil {
			fmt.Fprintln(os.Stderr, "execbench:", err)
			os.Exit(1)
		}
		return
	}
	sizes, err := parseSizes(*pending)
	if err != nil {
		fmt.Fprintln(os.Stderr, "execbench: -pending:", err)
		os.Exit(2)
	}
	if err := run(*quick, *pg, *out, *dur, *reps, *workloads, *tmp, *only, *claimMode, sizes); err != nil {
		fmt.Fprintln(os.Stderr, "execbench:", err)
		os.Exit(1)
	}
}

func run(quick bool, pg, out string, dur time.Duration, reps int, workloads, tmp, only, claimMode string, pending []int) error {
	cfg := harness.Config{Quick: quick, Duration: dur, Reps: reps, Out: os.Stdout, Only: only}
	plan := harness.FullPlan(pg)
	if quick {
		plan = harness.QuickPlan()
		plan.PostgresDSN = pg // River on PostgreSQL joins the quick plan when it is given one
		cfg.Duration = cmpOr(cfg.Duration, 500*time.Millisecond)
		cfg.Reps = cmpOr(cfg.Reps, 1)
	} else {
		cfg.Duration = cmpOr(cfg.Duration, 2*time.Second)
		cfg.Reps = cmpOr(cfg.Reps, 3)
	}
	plan.Workloads = workloads
	var err error
	if plan.Claim, err = plan.Claim.WithMode(claimMode); err != nil {
		return err
	}
	if plan.Claim, err = plan.Claim.WithPending(pending); err != nil {
		return err
	}
	if out == "" {
		out = "results"
		if quick {
			out = "results/quick"
		}
	}
	dir, err := os.MkdirTemp(tmp, "execbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.TempDir = dir
	meta := harness.CollectMeta(cfg, plan, dir)
	r := harness.NewRunner(cfg)
	if plan.PostgresDSN == "" && !quick {
		r.Res.Notes = append(r.Res.Notes, "No PostgreSQL connection string was given: River on PostgreSQL did not run.")
	}
	runErr := r.Run(context.Background(), plan)
	meta.Finish()
	if err := harness.WriteReport(out, meta, plan, r.Res); err != nil {
		return err
	}
	fmt.Printf("wrote %s/RESULTS.md\n", out)
	return runErr
}

// parseSizes reads a comma-separated list of pending sizes; "" is nil (the
// plan's own).
func parseSizes(v string) ([]int, error) {
	if v == "" {
		return nil, nil
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// rewrite writes RESULTS.md and the charts again from a saved run.
func rewrite(path, out string) error {
	s, err := harness.LoadSaved(path)
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Dir(path)
	}
	return harness.WriteReport(out, s.Meta, s.Plan, s.Results)
}
