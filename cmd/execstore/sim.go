package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/execstore/execstore/sim"
)

const simUsage = `usage: execstore sim [flags]

sim runs the deterministic crash simulator: seeded workloads against real
stores on real files, crashes at every step of writing, recovering and
snapshotting, storage errors, a reference model compared after every
operation, and porcupine linearizability checks of concurrent clients.
It then runs dispatchers (-dispatch) and workflows on a worker under
dispatchers (-workflow) against stores under a manual clock, with
deliveries that fail, stall and lose their leases, and replicated worlds
(-replicated): three nodes on raft with crashes, partitions, delays,
replaced disks and clocks behind, under clients that follow the leader.
It prints one summary line:

  sim: <seeds> seeds, <ops> ops, <crashes> crashes, <violations> violations, trace <hash>

(the violations include those of every check), what the dispatcher,
workflow and replicated checks reached on stderr, and, for each failing
seed, the violation and the command that replays or reruns it.
It exits non-zero on any violation. The same seeds and -ops give the same
trace hash on every run (the checks of concurrent clients, dispatchers,
workflows and replicated worlds are outside the hash: the seed fixes their
workloads, plans and faults, the scheduler and raft's timing their
interleaving).

The -mutant flag exists only in a binary built with -tags mutants (go run
-tags mutants ./cmd/execstore sim -mutant NAME): it turns on one deliberate
bug of internal/mutant to watch the simulator catch it. Every other build,
the shipped binary included, compiles the bugs out and has no such flag.

flags:
`

// simCommand runs the simulator ("execstore sim").
func simCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, simUsage)
		fs.PrintDefaults()
	}
	seeds := fs.Int("seeds", 2000, "number of seeds to run (with -duration: at most this many; 0 for no limit)")
	first := fs.Uint64("seed", 1, "the first seed")
	ops := fs.Int("ops", 1000, "workload steps per seed")
	duration := fs.Duration("duration", 0, "stop starting seeds after this long (nightly runs); 0 runs every seed")
	workers := fs.Int("workers", 0, "seeds run in parallel (default GOMAXPROCS + 1)")
	checkEvery := fs.Int("check-every", 25, "operations between whole-state comparisons with the model")
	dir := fs.String("dir", "", "directory for the stores (default: a new one under /dev/shm, else the temp directory)")
	verbose := fs.Bool("v", false, "print every seed's trace (use with one seed)")
	lin := fs.Int("lin", 10, "linearizability checks of concurrent clients to run")
	dispatch := fs.Int("dispatch", 10, "dispatcher checks to run: dispatchers and invokers that fail, panic, hang and lose leases, against a store under a manual clock")
	wf := fs.Int("workflow", 10, "workflow checks to run: workflows on a worker under dispatchers, with steps, sleeps, children, keys and cancels, and deliveries that fail, stall and lose leases, against a store under a manual clock")
	replicated := fs.Int("replicated", 30, "replicated worlds to run: nodes on raft's in-memory transport, clients that follow the leader, and crashes, partitions, message delays, replaced disks and clocks behind")
	linOut := fs.String("lin-out", "", "write a failing linearizability history as HTML here")
	progressEvery := fs.Duration("progress", 10*time.Second, "interval between progress lines on stderr")
	strictDirs := fs.Bool("strict-dirs", false, "let crashes lose directories created since their parent's last fsync (POSIX, not ext4)")
	coverage := fs.Bool("coverage", false, "print what the seeds reached (operations x results, crash points, faults, batches, boundaries) and fail if a required cell stays at zero")
	mutation := mutantFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sim: unexpected arguments %q", fs.Args())
	}
	if *mutation != "" {
		reset, err := setMutant(*mutation)
		if err != nil {
			return err
		}
		defer reset()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("GOGC") == "" {
		// A seed's live heap is small (tens of megabytes) and its garbage
		// plentiful: collecting at four times the live heap instead of twice
		// makes the same seeds run about a fifth faster.
		debug.SetGCPercent(400)
	}

	cfg := sim.Config{
		FirstSeed:     *first,
		Seeds:         *seeds,
		Duration:      *duration,
		Ops:           *ops,
		CheckEvery:    *checkEvery,
		Workers:       *workers,
		Dir:           *dir,
		Progress:      stderr,
		ProgressEvery: *progressEvery,
		StrictDirs:    *strictDirs,
	}
	if *verbose {
		cfg.Trace = stdout
	}
	cfg.OnFailure = func(f sim.SeedResult) { reportSeed(stderr, f, cfg, *mutation) }
	if *seeds == 0 && *duration == 0 {
		cfg.Seeds = -1 // run none: only the linearizability checks
	}
	sum, err := sim.Run(ctx, cfg)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	linFailed, err := runLin(ctx, stderr, *lin, *first, *dir, *linOut)
	if err != nil {
		return err
	}
	dispatchFailed, err := runDispatch(ctx, stderr, *dispatch, *first, *dir, *mutation)
	if err != nil {
		return err
	}
	linFailed += dispatchFailed
	workflowFailed, err := runWorkflow(ctx, stderr, *wf, *first, *dir, *mutation)
	if err != nil {
		return err
	}
	linFailed += workflowFailed
	replicatedFailed, err := runReplicated(ctx, stderr, *replicated, *first, *dir, *mutation, *linOut)
	if err != nil {
		return err
	}
	linFailed += replicatedFailed
	line := sum.Line()
	if linFailed > 0 {
		line = fmt.Sprintf("sim: %d seeds, %d ops, %d crashes, %d violations, trace %s",
			sum.Seeds, sum.Ops, sum.Crashes, len(sum.Failed)+linFailed, sum.Trace)
	}
	var missing []string
	if *coverage {
		sum.Coverage.Print(stdout)
		if ctx.Err() == nil {
			missing = sum.Coverage.Missing()
		}
	}
	fmt.Fprintln(stdout, line)
	fmt.Fprintf(stderr, "sim: took %s\n", sum.Elapsed.Round(time.Millisecond))
	if n := len(sum.Failed) + linFailed; n > 0 {
		return fmt.Errorf("sim: %d violations", n)
	}
	if len(missing) > 0 {
		return fmt.Errorf("sim: %d required coverage cells not reached: %s", len(missing), strings.Join(missing, ", "))
	}
	return ctx.Err()
}

// reportSeed prints a failing seed: the violation, the end of its trace, and
// the command that replays it.
func reportSeed(w io.Writer, f sim.SeedResult, cfg sim.Config, mutation string) {
	fmt.Fprintf(w, "\nsim: seed %d: VIOLATION: %v\n", f.Seed, f.Violation)
	if len(f.Tail) > 0 {
		fmt.Fprintf(w, "sim: seed %d: the trace's last lines:\n", f.Seed)
		for _, l := range f.Tail {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	replay := fmt.Sprintf("%s -seed %d -seeds 1 -ops %d -lin 0 -v", simRun(mutation), f.Seed, cfg.Ops)
	if cfg.CheckEvery != 25 {
		replay += fmt.Sprintf(" -check-every %d", cfg.CheckEvery)
	}
	if cfg.StrictDirs {
		replay += " -strict-dirs"
	}
	if mutation != "" {
		replay += " -mutant " + mutation
	}
	fmt.Fprintf(w, "sim: seed %d: replay with: %s\n", f.Seed, replay)
}

// runDispatch runs n dispatcher checks, reports each failure, and prints what
// they reached; it returns how many failed.
func runDispatch(ctx context.Context, w io.Writer, n int, first uint64, dir, mutation string) (int, error) {
	failed := 0
	var sum sim.DispatchReport
	ran, bounded := 0, 0
	defer func() {
		if ran > 0 {
			fmt.Fprintf(w, "sim: dispatcher checks: %d seeds (%d with attempt bounds), %d executions, %d deliveries, every claimed lease invoked, %d leases lost, %d late acknowledgements, %d attempts exhausted, %d violations\n",
				ran, bounded, sum.Executions, sum.Deliveries, sum.LostLeases, sum.LateAcks, sum.Exhausted, failed)
		}
	}()
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		seed := first + uint64(i)
		rep, err := sim.CheckDispatch(sim.DispatchConfig{Seed: seed, Dir: dir})
		if err != nil {
			return failed, err
		}
		ran++
		sum.Executions += rep.Executions
		sum.Deliveries += rep.Deliveries
		sum.LostLeases += rep.LostLeases
		sum.LateAcks += rep.LateAcks
		sum.Exhausted += rep.Exhausted
		if rep.Bounded {
			bounded++
		}
		if rep.Violation == nil {
			continue
		}
		failed++
		fmt.Fprintf(w, "\nsim: dispatcher seed %d: VIOLATION: %v\n", seed, rep.Violation)
		rerun := fmt.Sprintf("%s -seeds 0 -lin 0 -dispatch 1 -workflow 0 -seed %d", simRun(mutation), seed)
		if mutation != "" {
			rerun += " -mutant " + mutation
		}
		fmt.Fprintf(w, "sim: rerun with: %s"+
			" (the seed fixes each execution's behaviour and the clock's moves; the interleaving is the scheduler's)\n", rerun)
	}
	return failed, nil
}

// runWorkflow runs n workflow checks, reports each failure, and prints what
// they reached; it returns how many failed.
func runWorkflow(ctx context.Context, w io.Writer, n int, first uint64, dir, mutation string) (int, error) {
	failed := 0
	var sum sim.WorkflowReport
	ran := 0
	defer func() {
		if ran > 0 {
			fmt.Fprintf(w, "sim: workflow checks: %d seeds, %d executions (%d cancelled), %d deliveries, %d suspensions, %d leases lost, %d step runs (%d again before their save), %d violations\n",
				ran, sum.Executions, sum.Cancelled, sum.Deliveries, sum.Suspensions, sum.LostLeases, sum.StepRuns, sum.StepRepeats, failed)
		}
	}()
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		seed := first + uint64(i)
		rep, err := sim.CheckWorkflow(sim.WorkflowConfig{Seed: seed, Dir: dir})
		if err != nil {
			return failed, err
		}
		ran++
		sum.Executions += rep.Executions + rep.Children
		sum.Cancelled += rep.Cancelled
		sum.Deliveries += rep.Deliveries
		sum.Suspensions += rep.Suspensions
		sum.LostLeases += rep.LostLeases
		sum.StepRuns += rep.StepRuns
		sum.StepRepeats += rep.StepRepeats
		if rep.Violation == nil {
			continue
		}
		failed++
		fmt.Fprintf(w, "\nsim: workflow seed %d: VIOLATION: %v\n", seed, rep.Violation)
		rerun := fmt.Sprintf("%s -seeds 0 -lin 0 -dispatch 0 -workflow 1 -seed %d", simRun(mutation), seed)
		if mutation != "" {
			rerun += " -mutant " + mutation
		}
		fmt.Fprintf(w, "sim: rerun with: %s"+
			" (the seed fixes each workflow's plan, each delivery's fate and the clock's moves; the interleaving is the scheduler's)\n", rerun)
	}
	return failed, nil
}

// runReplicated runs n replicated worlds, reports each failure, and prints
// what they reached; it returns how many failed.
func runReplicated(ctx context.Context, w io.Writer, n int, first uint64, dir, mutation, out string) (int, error) {
	failed := 0
	var sum sim.ReplReport
	sum.Faults = map[string]int{}
	ran, replaced := 0, 0
	defer func() {
		if ran > 0 {
			fmt.Fprintf(w, "sim: replicated worlds: %d seeds, %d calls (%d of unknown outcome), faults: %s, %d failovers, %d of %d replaced disks caught up from a snapshot, "+
				"%d reads on a healthy cluster's new leader answered (%d after a restart on a snapshot, %d nodes not led in time), %d violations\n",
				ran, sum.Calls, sum.Unknown, sim.DescribeFaults(sum.Faults), sum.Failovers, sum.FromSnapshot, replaced,
				sum.Reads, sum.Restarts, sum.NotLed, failed)
		}
	}()
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		seed := first + uint64(i)
		rep, err := sim.CheckReplicated(sim.ReplConfig{Seed: seed, Dir: dir})
		if err != nil {
			return failed, err
		}
		ran++
		sum.Calls += rep.Calls
		sum.Unknown += rep.Unknown
		sum.Reads += rep.Reads
		sum.Restarts += rep.Restarts
		sum.NotLed += rep.NotLed
		sum.Failovers += rep.Failovers
		sum.FromSnapshot += rep.FromSnapshot
		for k, v := range rep.Faults {
			sum.Faults[k] += v
		}
		replaced += rep.Faults["replace-disk"]
		if rep.Violation == nil {
			continue
		}
		failed++
		fmt.Fprintf(w, "\nsim: replicated seed %d: VIOLATION: %v\n", seed, rep.Violation)
		if out != "" && rep.Lin.Result == porcupine.Illegal {
			path := filepath.Clean(out)
			if err := sim.Visualize(rep.Lin, path); err != nil {
				fmt.Fprintf(w, "sim: writing %s: %v\n", path, err)
			} else {
				fmt.Fprintf(w, "sim: the history is in %s\n", path)
			}
		}
		rerun := fmt.Sprintf("%s -seeds 0 -lin 0 -dispatch 0 -workflow 0 -replicated 1 -seed %d", simRun(mutation), seed)
		if mutation != "" {
			rerun += " -mutant " + mutation
		}
		fmt.Fprintf(w, "sim: rerun with: %s"+
			" (the seed fixes the clients' calls, the faults and the clocks; raft's timing fixes the interleaving, so a rerun may pass or fail differently)\n", rerun)
	}
	return failed, nil
}

// runLin runs n linearizability checks and reports each failure; it returns
// how many failed.
func runLin(ctx context.Context, w io.Writer, n int, first uint64, dir, out string) (int, error) {
	failed := 0
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		seed := first + uint64(i)
		rep, err := sim.CheckLinearizable(sim.LinConfig{Seed: seed, Dir: dir})
		if err != nil {
			return failed, err
		}
		if rep.Result == porcupine.Ok {
			continue
		}
		failed++
		fmt.Fprintf(w, "\nsim: linearizability seed %d: VIOLATION: the history of %d operations is %s\n", seed, rep.Operations, rep.Result)
		if out != "" {
			path := filepath.Clean(out)
			if err := sim.Visualize(rep, path); err != nil {
				fmt.Fprintf(w, "sim: writing %s: %v\n", path, err)
			} else {
				fmt.Fprintf(w, "sim: the history is in %s\n", path)
			}
		}
		fmt.Fprintf(w, "sim: rerun with: go run ./cmd/execstore sim -seeds 0 -lin 1 -seed %d -lin-out history.html"+
			" (the seed fixes each client's calls; the interleaving is the scheduler's)\n", seed)
	}
	return failed, nil
}

// simRun is the start of a command that runs the simulator; with a
// mutation, the binary must be built with the tag that compiles the
// switches in.
func simRun(mutation string) string {
	if mutation == "" {
		return "go run ./cmd/execstore sim"
	}
	return "go run -tags mutants ./cmd/execstore sim"
}
