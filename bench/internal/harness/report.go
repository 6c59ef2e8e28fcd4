package harness

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	nameExec       = "execstore"
	nameExecNoSync = "execstore NoSync"
)

// Saved is everything a report is made from, kept as results.json beside it
// so that the report can be written again without measuring again.
type Saved struct {
	Meta    *Meta
	Plan    Plan
	Results *Results
}

// LoadSaved reads a results.json.
func LoadSaved(path string) (*Saved, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Saved
	return &s, json.Unmarshal(b, &s)
}

// WriteReport writes out/results.json, out/RESULTS.md and the charts.
func WriteReport(out string, m *Meta, p Plan, res *Results) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	p.PostgresDSN = strings.TrimSpace(redactDSN(p.PostgresDSN))
	raw, err := json.MarshalIndent(Saved{m, p, res}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	writeHeader(w, m, p)
	writeGoals(w, res)
	writeAdmission(w, res)
	writeClaims(w, res)
	writeScale(w, res)
	writeE2E(w, res)
	writeStorm(w, res)
	writeHTTP(w, res)
	writeProfiles(w, res)
	if len(res.Notes) > 0 {
		w("\n## Notes\n\n")
		for _, n := range res.Notes {
			w("- %s\n", n)
		}
	}
	if err := writeCharts(out, res); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "RESULTS.md"), []byte(b.String()), 0o644)
}

type writer func(format string, args ...any)

func writeHeader(w writer, m *Meta, p Plan) {
	mode := "full"
	if m.Cfg.Quick {
		mode = "quick"
	}
	w("# execstore beside its peers: claim throughput and latency\n\n")
	w("Made by `%s` (%s mode) on %s, in %s. Each configuration ran %d time(s) for %s; a cell is the median, "+
		"with the spread (slowest–fastest run) in brackets. Load average (1, 5, 15 min): %s at the start, %s at the end.\n\n",
		m.Command, mode, m.Started.UTC().Format("2006-01-02 15:04 MST"), m.Ended.Sub(m.Started).Round(time.Second),
		m.Cfg.Reps, m.Cfg.Duration, m.LoadStart, m.LoadEnd)
	w("## Machine, versions, settings\n\n")
	w("| | |\n| --- | --- |\n")
	w("| machine | %s, %d cores, %.0f GiB, Linux %s |\n", m.CPU, m.Cores, m.MemoryGiB, m.Kernel)
	w("| disk for every store | %s |\n", m.Filesystem)
	w("| Go | %s; execstore at commit %s |\n", m.Go, m.Commit)
	w("| modules | %s |\n", strings.Join(m.Modules, ", "))
	w("| SQLite | %s (C library through mattn/go-sqlite3) for the hand-written designs; %s (modernc.org/sqlite, the driver River tests with) for River |\n", m.SQLite, m.SQLiteGo)
	if p.PostgresDSN != "" {
		w("| PostgreSQL | %s on 127.0.0.1, a fresh cluster in a temporary directory: %s |\n", m.Postgres, m.PGSettings)
	} else {
		w("| PostgreSQL | not run |\n")
	}
	w("| execstore | default Options (fsync per WAL batch, snapshots on their default cadence); `NoSync` rows skip fsync; dispatcher with Concurrency %d |\n", e2eWorkers)
	w("| River | `Insert`/`InsertMany` for admission; its driver's `JobGetAvailable` and `JobSetStateIfRunningMany` (the statements its producer and batch completer run) for claim + complete; its client for end to end: defaults are FetchCooldown 100 ms, FetchPollInterval 1 s, 100 workers; tuned is FetchCooldown 1 ms (the minimum), FetchPollInterval 10 ms, %d workers |\n", e2eWorkers)
	w("| SQLite (every design) | WAL mode, synchronous=FULL (an fsync per commit), one connection, 128 MiB page cache; a claim is one transaction and the completions of a claim one more, or, in the one-call mode, one transaction completes a batch and claims the next |\n")
	w("| durability | every row not marked NoSync fsyncs before it answers: execstore per WAL batch, PostgreSQL with fsync=on and synchronous_commit=on, SQLite per commit |\n\n")
	w("Workloads: (a) admission; (b) claim + complete, each claimer claiming up to 64 or 256 and completing them, in two calls (execstore `ClaimDue`, then `AcknowledgeBatch`) or in one that completes the batch it ran and claims the next (execstore `AcknowledgeAndClaim`; one transaction for SQLite), the pool topped up between timed rounds; (c) trigger → no-op → completed through each system's own worker loop; (d) a duplicate-trigger storm; (e) the scale curve; (f) execstore's CPU profile.\n\n")
}

// best returns the row of system at pending with the highest median rate,
// in either mode.
func best(rows []ClaimRow, system string, pending int) (ClaimRow, bool) {
	return bestWhere(rows, func(r ClaimRow) bool { return r.System == system && r.Pending == pending })
}

// bestIn is best in one mode.
func bestIn(rows []ClaimRow, c claimSeries, pending int) (ClaimRow, bool) {
	return bestWhere(rows, func(r ClaimRow) bool {
		return r.System == c.System && r.Chained == c.Chained && r.Pending == pending
	})
}

func bestWhere(rows []ClaimRow, keep func(ClaimRow) bool) (ClaimRow, bool) {
	var b ClaimRow
	found := false
	for _, r := range rows {
		if keep(r) && (!found || r.Rate.Median() > b.Rate.Median()) {
			b, found = r, true
		}
	}
	return b, found
}

// claimSeries is a contender in one mode of workload (b).
type claimSeries struct {
	System  string
	Chained bool
}

func (c claimSeries) String() string { return c.System + " (" + callsLabel(c.Chained) + ")" }

// seriesIn lists the contenders and modes of rows, in their order.
func seriesIn(rows []ClaimRow) []claimSeries {
	var out []claimSeries
	for _, r := range rows {
		if c := (claimSeries{r.System, r.Chained}); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func systemsIn(rows []ClaimRow) []string {
	var out []string
	for _, r := range rows {
		if !slices.Contains(out, r.System) {
			out = append(out, r.System)
		}
	}
	return out
}

func pendingsIn(rows []ClaimRow) []int {
	var out []int
	for _, r := range rows {
		if !slices.Contains(out, r.Pending) {
			out = append(out, r.Pending)
		}
	}
	slices.Sort(out)
	return out
}

// sizeLabel is a claim row's claimers × limit; configLabel adds its mode.
func sizeLabel(r ClaimRow) string { return fmt.Sprintf("%d × %d", r.Claimers, r.Limit) }

func configLabel(r ClaimRow) string { return sizeLabel(r) + ", " + callsLabel(r.Chained) }

// callsLabel names a mode of workload (b): claim, then complete (two calls
// per round), or complete the batch held and claim the next (one call).
func callsLabel(chained bool) string {
	if chained {
		return "one call"
	}
	return "two calls"
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

func writeGoals(w writer, res *Results) {
	w("## The goals\n\n")
	w("| goal | measured | verdict |\n| --- | --- | --- |\n")
	for _, pend := range pendingsIn(res.Claim) {
		ex, ok := best(res.Claim, nameExec, pend)
		if !ok {
			continue
		}
		if pg, ok := best(res.Claim, "River on PostgreSQL", pend); ok {
			x := ex.Rate.Median() / pg.Rate.Median()
			w("| durable claim + complete ≥ 30× River on PostgreSQL (%s pending, each at its best configuration) | execstore %s/s (%s) vs River %s/s (%s): %s | %s%s |\n",
				pendingLabel(pend), thousands(ex.Rate.Median()), configLabel(ex), thousands(pg.Rate.Median()), configLabel(pg),
				ratio(ex.Rate.Median(), pg.Rate.Median()), verdict(x >= 30), shortfall(x, 30))
		}
		bestSQL, name := ClaimRow{}, ""
		for _, s := range systemsIn(res.Claim) {
			if !strings.Contains(s, "SQLite") {
				continue
			}
			// name == "" first: a missing row's median is NaN, which no comparison passes.
			if r, ok := best(res.Claim, s, pend); ok && (name == "" || r.Rate.Median() > bestSQL.Rate.Median()) {
				bestSQL, name = r, s
			}
		}
		if name != "" {
			x := ex.Rate.Median() / bestSQL.Rate.Median()
			w("| durable claim + complete ≥ 10× the best SQLite design (%s pending) | execstore %s/s vs %s %s/s (%s): %s | %s%s |\n",
				pendingLabel(pend), thousands(ex.Rate.Median()), name, thousands(bestSQL.Rate.Median()), configLabel(bestSQL),
				ratio(ex.Rate.Median(), bestSQL.Rate.Median()), verdict(x >= 10), shortfall(x, 10))
		}
		if f := ex.Floor.Median(); f > 0 {
			x := f / ex.Rate.Median()
			w("| within 2× of the floor at the same batch size (%s pending, %s) | execstore %s/s at %.0f executions and %.1f entries per fsync; raw tidwall/wal at that batch: %s/s; execstore is %s below | %s |\n",
				pendingLabel(pend), configLabel(ex), thousands(ex.Rate.Median()), ex.ExecPerBatch, ex.EntriesPerBatch,
				thousands(f), ratio(f, ex.Rate.Median()), verdict(x <= 2))
		}
	}
	writeScaleGoal(w, res)
	writeSnapshotGoal(w, res)
	writeAdmitGoal(w, res)
	for _, r := range res.E2E {
		if r.System == nameExecNoSync && r.Offered == 10_000 {
			p99 := r.P99.Median()
			w("| end-to-end p99 under 1 ms at 10k/s offered, without fsync | execstore NoSync through the dispatcher: p99 %s (p50 %s, p99.9 %s) | %s%s |\n",
				fmtLatency(p99), fmtLatency(r.P50.Median()), fmtLatency(r.P999.Median()), verdict(p99 < 1e-3), latShortfall(p99, 1e-3))
		}
	}
	w("\n")
}

// writeSnapshotGoal compares each series of the scale curve at 10^6 pending
// with 10^5: the larger state's snapshots cost more, and some fall inside
// its runs.
func writeSnapshotGoal(w writer, res *Results) {
	for _, sys := range []string{nameExec, nameExecNoSync} {
		for _, chained := range []bool{false, true} {
			var at5, at6 Reps
			for _, r := range res.Scale {
				switch {
				case r.System != sys:
				case r.Pending == 100_000:
					at5 = r.rate(chained)
				case r.Pending == 1_000_000:
					at6 = r.rate(chained)
				}
			}
			if len(at5) == 0 || len(at6) == 0 {
				continue
			}
			x := at6.Median() / at5.Median()
			w("| %s: claim + complete at 10^6 pending within 20 %% of 10^5 (snapshots do not show) | %s/s at 10^6, %s/s at 10^5: %s | %s |\n",
				claimSeries{sys, chained}, rateCell(at6), rateCell(at5), ratio(at6.Median(), at5.Median()), verdict(x >= 0.8))
		}
	}
}

// admitGoal is the share of the raw WAL's rate, at the batch size its group
// commit reached, that durable Admit from 64 callers is to reach.
const admitGoal = 0.70

func writeAdmitGoal(w writer, res *Results) {
	for _, r := range res.Admission {
		if r.System != nameExec || r.Producers != 64 || r.Batch != 1 || len(r.OfFloor) == 0 {
			continue
		}
		x := r.OfFloor.Median()
		w("| durable Admit from 64 callers ≥ %.0f %% of raw tidwall/wal at the batch size reached (median of interleaved pairs) | execstore %s/s at %.1f per batch, the floor %s/s; pairs %s | %s |\n",
			100*admitGoal, rateCell(r.Rate), r.PerBatch, rateCell(r.Floor), percentCell(r.OfFloor), verdict(x >= admitGoal))
	}
}

// pairCell is the median of per-pair ratios with their spread, or alt when
// there are none.
func pairCell(r Reps, alt string) string {
	if len(r) == 0 {
		return alt
	}
	return fmt.Sprintf("%s (pairs %s–%s)", ratio(r.Median(), 1), ratio(r.Min(), 1), ratio(r.Max(), 1))
}

// percentCell is the median of ratios as a percentage, with their spread.
func percentCell(r Reps) string {
	if len(r) == 1 {
		return fmt.Sprintf("%.0f %%", 100*r[0])
	}
	return fmt.Sprintf("%.0f %% (%.0f–%.0f %%)", 100*r.Median(), 100*r.Min(), 100*r.Max())
}

func writeScaleGoal(w writer, res *Results) {
	for _, sys := range []string{nameExec, nameExecNoSync} {
		for _, chained := range []bool{false, true} {
			var lo, hi ScaleRow
			n := 0
			for _, r := range res.Scale {
				if r.System != sys || len(r.rate(chained)) == 0 {
					continue
				}
				if n == 0 || r.rate(chained).Median() < lo.rate(chained).Median() {
					lo = r
				}
				if n == 0 || r.rate(chained).Median() > hi.rate(chained).Median() {
					hi = r
				}
				n++
			}
			if n < 2 {
				continue
			}
			x := hi.rate(chained).Median() / lo.rate(chained).Median()
			w("| %s scale curve flat within 2× from the smallest to the largest pending size | fastest %s/s at %s, slowest %s/s at %s: %s apart | %s |\n",
				claimSeries{sys, chained}, thousands(hi.rate(chained).Median()), pendingLabel(hi.Pending), thousands(lo.rate(chained).Median()),
				pendingLabel(lo.Pending), ratio(hi.rate(chained).Median(), lo.rate(chained).Median()), verdict(x <= 2))
		}
	}
}

// rate is the scale row's rate in one mode.
func (r ScaleRow) rate(chained bool) Reps {
	if chained {
		return r.ChainedRate
	}
	return r.Rate
}

func shortfall(x, goal float64) string {
	if x >= goal {
		return ""
	}
	return fmt.Sprintf(" (%.1f× short: %.0f%% of the goal)", goal/x, 100*x/goal)
}

func latShortfall(v, goal float64) string {
	if v < goal {
		return ""
	}
	return fmt.Sprintf(" (%s over)", ratio(v, goal))
}

func writeAdmission(w writer, res *Results) {
	if len(res.Admission) == 0 {
		return
	}
	w("## (a) Admission\n\n")
	if len(res.FdatasyncAppend) > 0 {
		w("The disk: a loop of 64-byte writes, each followed by fdatasync, ran at %s/s (%.0f µs per sync) appending to a file and %s/s (%.0f µs) overwriting a preallocated one",
			rateCell(res.FdatasyncAppend), 1e6/res.FdatasyncAppend.Median(), rateCell(res.FdatasyncOverwrite), 1e6/res.FdatasyncOverwrite.Median())
		if len(res.FdatasyncCPU) > 0 {
			w(", of which %.0f µs of CPU on a core (the process's user and system time per sync: what a durable write costs the cores besides waiting)", res.FdatasyncCPU.Median())
		}
		w(".\n\n")
	}
	w("New executions per second. Batch 1 is one execution per call (execstore batches concurrent calls itself: group commit); batch 64 is the peer's batch insert (`InsertMany`, or one transaction of 64 inserts). The last column divides durable execstore (same producers, batch 1) by the row.\n\n")
	w("![admission](admission.png)\n\n")
	w("| contender | producers | batch | admitted/s | execstore ÷ this |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range res.Admission {
		ex := admissionOf(res, nameExec, r.Producers)
		w("| %s | %d | %d | %s | %s |\n", r.System, r.Producers, r.Batch, rateCell(r.Rate), ratio(ex, r.Rate.Median()))
		if len(r.Floor) > 0 {
			w("| floor: raw tidwall/wal at %.1f entries per fsync, each run right after one of execstore's | %d | | %s | %s |\n",
				r.PerBatch, r.Producers, rateCell(r.Floor), pairCell(r.OfFloor, ratio(ex, r.Floor.Median())))
		}
	}
	w("\n")
}

func admissionOf(res *Results, system string, producers int) float64 {
	for _, r := range res.Admission {
		if r.System == system && r.Producers == producers && r.Batch == 1 {
			return r.Rate.Median()
		}
	}
	return math.NaN()
}

func writeClaims(w writer, res *Results) {
	if len(res.Claim) == 0 {
		return
	}
	w("## (b) Claim + complete\n\n")
	w("Executions claimed and completed per second, by claimers × claim size and calls per round. Two calls: each claimer claims a batch, then completes it (execstore `ClaimDue`, then `AcknowledgeBatch`: two fsyncs a round; SQLite one transaction for each; River its claim and completion statements). ")
	w("One call, as a worker loop runs: each claimer completes the batch it ran and claims the next in one call, execstore's `AcknowledgeAndClaim` (one WAL batch, one fsync) and, on SQLite, one transaction; River has no such call. ")
	w("A claimer's first claim and last completion of each round are untimed, so that in both modes the timed window holds one claim and one completion per execution it counts. ")
	w("For durable execstore the floor is raw tidwall/wal with as many entries and bytes per fsync as execstore wrote in that configuration.\n\n")
	w("| contender | pending | claimers × limit | calls per round | executions/s | per fsync (execstore) | floor at that batch | execstore ÷ floor |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range res.Claim {
		per, floor, pct := "", "", ""
		if r.ExecPerBatch > 0 {
			per = fmt.Sprintf("%.0f executions, %.1f entries", r.ExecPerBatch, r.EntriesPerBatch)
		}
		if len(r.Floor) > 0 {
			floor = rateCell(r.Floor)
			pct = ratio(r.Rate.Median(), r.Floor.Median())
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.System, pendingLabel(r.Pending), sizeLabel(r), callsLabel(r.Chained),
			rateCell(r.Rate), per, floor, pct)
	}
	w("\nEach contender at its best configuration in each mode, and durable execstore (at its best in the same mode) divided by it:\n\n")
	w("| contender | pending | calls per round | best configuration | executions/s | execstore ÷ this |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, pend := range pendingsIn(res.Claim) {
		for _, c := range seriesIn(res.Claim) {
			if r, ok := bestIn(res.Claim, c, pend); ok {
				ex, _ := bestIn(res.Claim, claimSeries{nameExec, c.Chained}, pend)
				w("| %s | %s | %s | %s | %s | %s |\n", c.System, pendingLabel(pend), callsLabel(c.Chained), sizeLabel(r), rateCell(r.Rate),
					ratio(ex.Rate.Median(), r.Rate.Median()))
			}
		}
	}
	w("\n")
}

func writeScale(w writer, res *Results) {
	if len(res.Scale) == 0 {
		return
	}
	w("![claim + complete throughput](throughput.png)\n\n")
	w("## (e) The scale curve\n\n")
	w("Claim + complete at each pending size with one configuration for all, in both modes where the contender has them (one call: see (b)), size per record (execstore: heap after a full GC; SQLite: database and WAL files; PostgreSQL: `river_job` with its indexes), the untimed fill, and execstore's reopen right after the fill (the time `Open` takes: newest snapshot plus the log after it).\n\n")
	w("| contender | pending | executions/s, two calls | executions/s, one call | bytes per record | fill | reopen |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range res.Scale {
		per := "-"
		if r.SizeKind != "" {
			per = fmt.Sprintf("%s (%s)", thousands(r.PerRec), r.SizeKind)
		}
		reopen := "-"
		if len(r.Reopen) > 0 {
			reopen = fmt.Sprintf("%.2f s (%.2f–%.2f)", r.Reopen.Median(), r.Reopen.Min(), r.Reopen.Max())
		}
		w("| %s | %s | %s | %s | %s | %.1f s | %s |\n", r.System, pendingLabel(r.Pending), rateCell(r.Rate), rateCell(r.ChainedRate), per, r.FillSecs, reopen)
	}
	w("\n![scale curve](scale.png)\n\n")
}

func writeE2E(w writer, res *Results) {
	if len(res.E2E) == 0 {
		return
	}
	w("## (c) End to end: trigger → no-op → completed\n\n")
	w("Through each system's own worker loop. At an offered load, trigger i is due at i/load seconds and its latency counts from then, so falling behind is charged; flat out keeps %d triggers outstanding. n/c: not completed within the wait (5 s or the run's length after the last trigger).\n\n", flatInFlight)
	w("The last column is the 99th percentile of how late the harness's producers issued their triggers (timer wake-ups on a busy 2-core machine): it is inside the latencies, and bounds how much of them is the harness's own.\n\n")
	w("| contender | offered | completed/s | p50 | p99 | p99.9 | completed / issued (last run) | producer lag p99 |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range res.E2E {
		w("| %s | %s | %s | %s | %s | %s | %s / %s | %s |\n", r.System, offeredLabel(r.Offered), rateCell(r.Throughput),
			latCell(r.P50), latCell(r.P99), latCell(r.P999), thousands(float64(r.Completed)), thousands(float64(r.Issued)), latCell(r.Lag99))
	}
	w("\n")
	for _, load := range offeredLoads(res) {
		w("![latency at %s](latency-%s.png)\n", offeredLabel(load), loadFile(load))
	}
	w("\n")
}

func writeStorm(w writer, res *Results) {
	if len(res.Storm) == 0 {
		return
	}
	w("## (d) Duplicate-trigger storm\n\n")
	w("Half the triggers reuse an ID (each ID triggered twice, shuffled, from 64 producers while the workers run).\n\n")
	w("| contender | triggers | IDs | refused as repeats | body runs | executions that ran twice |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range res.Storm {
		w("| %s | %s | %s | %s | %s | %s |\n", r.System, thousands(float64(r.Triggers)), thousands(float64(r.IDs)),
			thousands(float64(r.Refused)), thousands(float64(r.Runs)), thousands(float64(r.RanTwice)))
	}
	w("\n")
}

func writeProfiles(w writer, res *Results) {
	if len(res.Profiles) == 0 {
		return
	}
	w("## (f) Where execstore's time goes\n\n")
	w("A CPU profile of claim + complete (%d claimers × %d, `AcknowledgeBatch`), per claimed-and-completed execution. Only time on a CPU is sampled: waiting for an fsync is not, so in the durable run the wall time per execution exceeds the CPU time.\n\n",
		res.Profiles[0].Claimers, res.Profiles[0].Limit)
	for _, p := range res.Profiles {
		n := float64(p.Executions)
		w("### %s, %s pending at the start\n\n", p.Mode, thousands(float64(p.Pending)))
		w("%s executions in %.1f s: %s/s, %.2f µs of wall time each; the writer goroutine used %.2f µs of CPU each, the whole process %.2f µs.\n\n",
			thousands(n), p.Wall, thousands(n/p.Wall), p.Wall/n*1e6, sum(p.Writer)/n*1e6, sum(p.Process)/n*1e6)
		w("| the writer goroutine | µs per execution | share |\n| --- | --- | --- |\n")
		for _, l := range p.Writer {
			w("| %s | %.3f | %.0f%% |\n", l.Name, l.Seconds/n*1e6, 100*l.Seconds/sum(p.Writer))
		}
		w("\n| the whole process | µs per execution | share |\n| --- | --- | --- |\n")
		for _, l := range p.Process {
			w("| %s | %.3f | %.0f%% |\n", l.Name, l.Seconds/n*1e6, 100*l.Seconds/sum(p.Process))
		}
		w("\n| functions with the most self time on the writer | µs per execution |\n| --- | --- |\n")
		for _, l := range p.TopWriter {
			w("| `%s` | %.3f |\n", l.Name, l.Seconds/n*1e6)
		}
		w("\n")
	}
}

// redactDSN keeps only whether PostgreSQL ran: the throwaway cluster's
// address means nothing after the run.
func redactDSN(dsn string) string {
	if dsn == "" {
		return ""
	}
	return "postgres (a throwaway cluster on 127.0.0.1)"
}

func writeHTTP(w writer, res *Results) {
	if len(res.HTTP) == 0 {
		return
	}
	w("## (g) Workers over HTTP\n\n")
	w("The binary serves a fresh store on 127.0.0.1; %d producers admit %s executions over HTTP while a worker runs them: "+
		"each round acknowledges the last one's outcomes and claims more in one request (`acknowledge-and-claim`, with the executions, waiting on the server when idle), "+
		"and each execution saves one step. The rate runs from the first admission to the last completion; requests per execution are the worker's "+
		"(admission is one more, the producer's). CPU is each process's, in cores on average over the run (the Go worker shares its process with the producers).\n\n",
		httpProducers, thousands(float64(res.HTTP[0].Executions)))
	w("| worker | durability | executions/s | requests per execution | server CPU | worker CPU | producer CPU |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range res.HTTP {
		producers := "(in the worker's)"
		if len(r.ProducerCPU) > 0 {
			producers = fmt.Sprintf("%.2f", r.ProducerCPU.Median())
		}
		w("| %s | %s | %s | %.2f | %.2f | %.2f | %s |\n", r.Worker, durability(r.Durable), rateCell(r.Rate), r.PerExec,
			r.ServerCPU.Median(), r.WorkerCPU.Median(), producers)
	}
	w("\n")
}
