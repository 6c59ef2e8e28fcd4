package sim

import (
	"bytes"
	"context"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// These tests are the quick share of the simulator that runs with every
// `go test ./...`, under the race detector too; the full budget (thousands of
// seeds) runs through `execstore sim`. None of them is parallel: the mutation
// tests (mutants_test.go, built with -tags mutants only) flip package-level
// switches that every store in the binary reads.

func TestSeedsHoldEveryGuarantee(t *testing.T) {
	s, err := Run(context.Background(), Config{FirstSeed: 1, Seeds: 30, Ops: 500, CheckEvery: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.Failed {
		t.Errorf("seed %d: %v\nreplay: go run ./cmd/execstore sim -seed %d -seeds 1 -ops 500 -check-every 5 -lin 0 -v",
			f.Seed, f.Violation, f.Seed)
	}
	if s.Crashes < s.Seeds*2 {
		t.Errorf("%d crashes in %d seeds: the workload hardly crashes", s.Crashes, s.Seeds)
	}
	t.Log(s.Line())
}

func TestSameSeedGivesTheSameTraceByteForByte(t *testing.T) {
	run := func(seed uint64) ([32]byte, string) {
		var buf bytes.Buffer
		r := RunSeed(seed, Config{Ops: 400, Trace: &buf}, t.TempDir())
		if r.Violation != nil {
			t.Fatalf("seed %d: %v", seed, r.Violation)
		}
		return r.Trace, buf.String()
	}
	for _, seed := range []uint64{3, 7} {
		h1, t1 := run(seed)
		h2, t2 := run(seed)
		if h1 != h2 || t1 != t2 {
			t.Fatalf("seed %d gave two different traces", seed)
		}
	}
	if a, _ := run(3); a == func() [32]byte { h, _ := run(4); return h }() {
		t.Fatal("seeds 3 and 4 gave the same trace")
	}
}

func TestCoverageCountsEveryOperationAndCrashItReached(t *testing.T) {
	s, err := Run(context.Background(), Config{FirstSeed: 1, Seeds: 4, Ops: 300, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	ops, crashes := 0, 0
	for cell, n := range s.Coverage {
		switch {
		case strings.HasPrefix(cell, "op/"):
			ops += n
		case strings.HasPrefix(cell, "crash/"):
			crashes += n
		}
	}
	// Every compared operation is counted once (a batch's, and each
	// acknowledgement of an acknowledge-batch, on top); every crash too, and
	// the idle ones are also counted when an armed crash found nothing to
	// stop.
	if ops < s.Ops/2 || crashes < s.Crashes/2 {
		t.Fatalf("coverage counts %d operations and %d crashes for %d and %d", ops, crashes, s.Ops, s.Crashes)
	}
	missing := s.Coverage.Missing()
	for _, m := range missing {
		if s.Coverage[m] != 0 {
			t.Fatalf("%s is reached %d times and reported missing", m, s.Coverage[m])
		}
	}
	if len(missing) == 0 {
		t.Fatal("four short seeds reached every required cell: the list asks too little")
	}
}

func TestSummaryLineHasTheCIFormat(t *testing.T) {
	s, err := Run(context.Background(), Config{FirstSeed: 11, Seeds: 2, Ops: 50, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^sim: 2 seeds, \d+ ops, \d+ crashes, 0 violations, trace [0-9a-f]{16}$`)
	if !re.MatchString(s.Line()) {
		t.Fatalf("summary line %q does not match %s", s.Line(), re)
	}
}

func TestDispatchersDeliverEverythingAndNeverActOnALostLease(t *testing.T) {
	lost, late := 0, 0
	for seed := uint64(1); seed <= 10; seed++ {
		rep, err := CheckDispatch(DispatchConfig{Seed: seed, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Violation != nil {
			t.Fatalf("seed %d: %v", seed, rep.Violation)
		}
		lost += rep.LostLeases
		late += rep.LateAcks
	}
	if lost == 0 {
		t.Fatal("no delivery lost its lease: the check proves nothing about lost leases")
	}
	if late == 0 {
		t.Fatal("no acknowledgement found its execution ended by another delivery: the check proves nothing about publishing once")
	}
	t.Logf("%d leases lost, %d late acknowledgements", lost, late)
}

func TestWorkflowsEndAsPlannedAndNeverRunASavedStepAgain(t *testing.T) {
	var sum WorkflowReport
	for seed := uint64(1); seed <= 20; seed++ {
		rep, err := CheckWorkflow(WorkflowConfig{Seed: seed, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Violation != nil {
			t.Fatalf("seed %d: %v\nrerun: go run ./cmd/execstore sim -seeds 0 -lin 0 -dispatch 0 -workflow 1 -seed %d", seed, rep.Violation, seed)
		}
		sum.Children += rep.Children
		sum.Cancelled += rep.Cancelled
		sum.Suspensions += rep.Suspensions
		sum.LostLeases += rep.LostLeases
		sum.StepRepeats += rep.StepRepeats
	}
	// Each property must have had its chance: children that were cancelled,
	// runs that suspended, leases lost, and steps run again because a
	// delivery lost its lease (or its outcome) before saving them.
	for what, n := range map[string]int{
		"children": sum.Children, "cancelled children": sum.Cancelled, "suspensions": sum.Suspensions,
		"lost leases": sum.LostLeases, "steps run again before their save": sum.StepRepeats,
	} {
		if n == 0 {
			t.Errorf("20 seeds had no %s: the check proves nothing about them", what)
		}
	}
	t.Logf("%d children (%d cancelled), %d suspensions, %d leases lost, %d steps run again before their save",
		sum.Children, sum.Cancelled, sum.Suspensions, sum.LostLeases, sum.StepRepeats)
}

// A few replicated worlds hold every property, and between them reach
// every fault, failovers, calls of unknown outcome and a replaced disk that
// catches up from a snapshot (with -short, two worlds and no such demand).
func TestReplicatedWorldsHoldEveryGuarantee(t *testing.T) {
	seeds := uint64(6)
	if testing.Short() {
		seeds = 2
	}
	faults := map[string]int{}
	var unknown, failovers, fromSnapshot int
	for seed := uint64(1); seed <= seeds; seed++ {
		rep, err := CheckReplicated(ReplConfig{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Violation != nil {
			t.Fatalf("seed %d: %v\nrerun: go run ./cmd/execstore sim -seeds 0 -lin 0 -dispatch 0 -workflow 0 -replicated 1 -seed %d",
				seed, rep.Violation, seed)
		}
		for k, v := range rep.Faults {
			faults[k] += v
		}
		unknown += rep.Unknown
		failovers += rep.Failovers
		fromSnapshot += rep.FromSnapshot
	}
	t.Logf("faults: %s; %d failovers, %d calls of unknown outcome, %d disks caught up from a snapshot",
		DescribeFaults(faults), failovers, unknown, fromSnapshot)
	if testing.Short() {
		return
	}
	for _, k := range append(append([]string(nil), faultKinds...), "replace-disk", "clock-behind") {
		if faults[k] == 0 {
			t.Errorf("%d worlds had no %s fault", seeds, k)
		}
	}
	for what, n := range map[string]int{"failover": failovers, "call of unknown outcome": unknown,
		"replaced disk caught up from a snapshot": fromSnapshot} {
		if n == 0 {
			t.Errorf("%d worlds had no %s: the checks prove nothing about it", seeds, what)
		}
	}
}

func TestConcurrentHistoriesAreLinearizable(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		rep, err := CheckLinearizable(LinConfig{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Result != porcupine.Ok {
			path := t.TempDir() + "/history.html"
			if err := Visualize(rep, path); err == nil {
				t.Logf("history written to %s", path)
			}
			t.Fatalf("seed %d: a history of %d operations is %s", seed, rep.Operations, rep.Result)
		}
	}
}

func TestLinearizabilityCheckRejectsAnAlteredHistory(t *testing.T) {
	rep, err := CheckLinearizable(LinConfig{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Result != porcupine.Ok {
		t.Fatalf("the unaltered history is %s", rep.Result)
	}
	altered := 0
	for i, op := range rep.History {
		out := op.Output.(linOut)
		if op.Input.(linIn).Kind != "claim" || out.Token == 0 {
			continue
		}
		h := append([]porcupine.Operation(nil), rep.History...)
		out.Token++ // a claim that skipped a token
		h[i].Output = out
		if res := Recheck(h, time.Minute); res != porcupine.Illegal {
			t.Fatalf("a history whose claim returned token %d is %s, want %s", out.Token, res, porcupine.Illegal)
		}
		if altered++; altered == 3 {
			return
		}
	}
	t.Fatal("the history has no claim to alter")
}

// The durable bytes of a file are in every crash image; what follows them is
// a cut of what was written, possibly filled with zeros, garbage or stale
// bytes, never longer than what was written.
func TestCrashImagesKeepEveryDurableByte(t *testing.T) {
	dir := t.TempDir()
	d, err := newDisk(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	durable := bytes.Repeat([]byte("durable."), 300)
	written := append(bytes.Clone(durable), bytes.Repeat([]byte("unsynced"), 700)...)
	d.files["wal/00000000000000000001"] = &fileRec{durable: durable, entry: true}
	rng := rand.New(rand.NewPCG(1, 2))
	cuts := map[bool]int{}
	for range 2000 {
		im := &crashImage{}
		got := d.cutTail(rng, im, "wal/00000000000000000001", written)
		if !bytes.HasPrefix(got, durable) || len(got) > len(written) {
			t.Fatalf("image of %d bytes (%s) loses durable bytes or grows past the %d written", len(got), im.describe(), len(written))
		}
		cuts[bytes.Equal(got, written)]++
	}
	if cuts[false] == 0 || cuts[true] == 0 {
		t.Fatalf("images: %d whole, %d cut; want both", cuts[true], cuts[false])
	}
}

// The seeds that forget (Options.ForgetAfter) hold every guarantee, forget
// archived executions and admit a forgotten ID again: the first six of them.
func TestSeedsThatForgetHoldEveryGuarantee(t *testing.T) {
	var seeds []uint64
	for s := uint64(1); len(seeds) < 6; s++ {
		if r := retentionOf(s); r > 0 && archiveOf(s) && forgetOf(s, r) > 0 {
			seeds = append(seeds, s)
		}
	}
	forgot, readmitted := 0, 0
	for _, seed := range seeds {
		s, err := Run(context.Background(), Config{FirstSeed: seed, Seeds: 1, Ops: 600, CheckEvery: 5})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range s.Failed {
			t.Errorf("seed %d: %v\nreplay: go run ./cmd/execstore sim -seed %d -seeds 1 -ops 600 -check-every 5 -lin 0 -v",
				f.Seed, f.Violation, f.Seed)
		}
		forgot += s.Coverage["forget/archived executions forgotten"]
		readmitted += s.Coverage["forget/a forgotten ID admitted again"]
	}
	if forgot == 0 || readmitted == 0 {
		t.Fatalf("seeds %v forgot %d times and admitted a forgotten ID %d times: they check nothing of forgetting", seeds, forgot, readmitted)
	}
}
