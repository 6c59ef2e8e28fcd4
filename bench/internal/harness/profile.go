package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// Profile is workload (f): where the CPU goes while execstore claims and
// completes, per claimed-and-completed execution.
type Profile struct {
	Mode       string // "NoSync" or "durable"
	Pending    int
	Claimers   int
	Limit      int
	Executions int
	Wall       float64 // seconds of the profiled run
	Writer     []ProfileLine
	Process    []ProfileLine
	TopWriter  []ProfileLine // functions with the most self time on the writer goroutine
}

// ProfileLine is CPU seconds attributed to a category or function.
type ProfileLine struct {
	Name    string
	Seconds float64
}

const execstorePkg = "github.com/execstore/execstore."

// ProfileClaims fills a store with pending executions, then profiles
// claimers claiming and completing (AcknowledgeBatch) for d. The pool is
// filled up front, large enough that nothing is admitted while profiling.
func (r *Runner) ProfileClaims(ctx context.Context, noSync bool, pending, claimers, limit int, d time.Duration) error {
	mk := func() System { return &Execstore{NoSync: noSync} }
	s, done, err := r.open(ctx, mk)
	if skip(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer done()
	if err := s.Fill(ctx, "f-", 0, pending); err != nil {
		return err
	}
	path := filepath.Join(r.Cfg.TempDir, fmt.Sprintf("cpu-%v.prof", noSync))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	round, err := claimRound(ctx, s, ClaimConfig{Claimers: claimers, Limit: limit}, pending-100_000, d, nil)
	pprof.StopCPUProfile()
	f.Close()
	if err != nil {
		return err
	}
	n := round.done
	p := Profile{Mode: "durable", Pending: pending, Claimers: claimers, Limit: limit, Executions: n, Wall: round.elapsed.Seconds()}
	if noSync {
		p.Mode = "NoSync"
	}
	if err := p.read(path); err != nil {
		return err
	}
	r.logf("(f) execstore %s: %d executions in %.1f s (%.0f/s); writer CPU %.2f µs per execution",
		p.Mode, n, p.Wall, float64(n)/p.Wall, sum(p.Writer)/float64(n)*1e6)
	r.Res.Profiles = append(r.Res.Profiles, p)
	return nil
}

func (p *Profile) read(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	prof, err := profile.Parse(f)
	if err != nil {
		return err
	}
	vi := len(prof.SampleType) - 1 // cpu nanoseconds
	writer, process, top := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, s := range prof.Sample {
		stack := stackOf(s)
		secs := float64(s.Value[vi]) / 1e9
		group := groupOf(stack)
		process[group] += secs
		if group == groupWriter {
			writer[writerCategory(stack)] += secs
			if len(stack) > 0 {
				top[shortName(stack[0])] += secs
			}
		}
	}
	p.Writer, p.Process, p.TopWriter = sorted(writer, 0), sorted(process, 0), sorted(top, 15)
	return nil
}

// stackOf lists a sample's functions, leaf first, inlined frames included.
func stackOf(s *profile.Sample) []string {
	var out []string
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil {
				out = append(out, l.Function.Name)
			}
		}
	}
	return out
}

const (
	groupWriter   = "the writer goroutine"
	groupSnapshot = "snapshot encoding (background)"
	groupGC       = "garbage collector (background marking)"
	groupCallers  = "claimers: ClaimDue and AcknowledgeBatch callers, validation, waiting"
	groupOther    = "other runtime (scheduler, timers, idle)"
)

func has(stack []string, sub string) bool {
	return slices.ContainsFunc(stack, func(f string) bool { return strings.Contains(f, sub) })
}

func groupOf(stack []string) string {
	switch {
	case has(stack, execstorePkg+"(*Store).run"):
		return groupWriter
	case has(stack, execstorePkg+"(*Store).writeSnapshot"), has(stack, "execstore/snapshot."):
		return groupSnapshot
	case has(stack, "runtime.gcBgMarkWorker"):
		return groupGC
	case has(stack, execstorePkg), has(stack, "/bench/internal/harness."):
		return groupCallers
	}
	return groupOther
}

// writerCategory names the phase of the writer's work a sample fell in: the
// phase function nearest the writer's root decides.
func writerCategory(stack []string) string {
	gcAssist := has(stack, "runtime.gcAssistAlloc")
	for i := len(stack) - 1; i >= 0; i-- {
		f := stack[i]
		var cat string
		switch {
		case strings.HasSuffix(f, "(*Store).encodeLogged"):
			cat = "encoding commands (fsm codec)"
		case strings.HasSuffix(f, "wal.(*Log).Write"):
			if has(stack[:i], "syscall.") || has(stack[:i], "internal/runtime/syscall") {
				cat = "WAL: write and fsync system calls"
			} else {
				cat = "WAL: framing, CRC-32C, tidwall/wal"
			}
		case strings.HasSuffix(f, "fsm.(*State).Precheck"):
			cat = "state machine: precheck"
		case strings.HasSuffix(f, "fsm.(*State).Apply"), strings.HasSuffix(f, "fsm.(*State).ApplyWith"):
			cat = "state machine: apply"
		case strings.HasSuffix(f, "(*Store).snapshotTick"), strings.HasSuffix(f, "(*Store).pollSnapshots"):
			cat = "snapshot start (copy-on-write clone)"
		case strings.HasSuffix(f, "(*Store).stamp"):
			cat = "clock"
		}
		if cat != "" {
			if gcAssist {
				return "GC assist (during " + cat + ")"
			}
			return cat
		}
	}
	if gcAssist {
		return "GC assist (writer loop)"
	}
	return "writer loop: queue, batching, answering callers, wake-ups"
}

func sorted(m map[string]float64, limit int) []ProfileLine {
	out := make([]ProfileLine, 0, len(m))
	for k, v := range m {
		out = append(out, ProfileLine{k, v})
	}
	slices.SortFunc(out, func(a, b ProfileLine) int {
		if a.Seconds != b.Seconds {
			if a.Seconds > b.Seconds {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

func sum(lines []ProfileLine) float64 {
	t := 0.0
	for _, l := range lines {
		t += l.Seconds
	}
	return t
}

// shortName drops a generic function's instantiation, which spells out the
// whole element type.
func shortName(f string) string {
	if i := strings.Index(f, "[go.shape."); i >= 0 {
		if j := strings.Index(f[i:], "}]"); j >= 0 {
			return f[:i] + "[…]" + f[i+j+2:]
		}
	}
	return f
}
