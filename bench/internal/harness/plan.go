package harness

import (
	"context"
	"fmt"
	"time"
)

// Plan is one whole run: which contenders run which workloads at which sizes.
type Plan struct {
	PostgresDSN string // empty: no PostgreSQL contenders
	Claim       ClaimPlan
	PeerMaxPend int   // peers run the scale curve up to this pending size
	Loads       []int // (c): offered loads; 0 is flat out
	StormSize   int   // (d): triggers
	ProfileSize int   // (f): pending executions when the profile starts
	ProfileTime time.Duration
	HTTPSize    int    // (g): executions per run
	Workloads   string // letters of the workloads to run, e.g. "abcdefg"
}

// QuickPlan is the CI mode: seconds per contender, no PostgreSQL.
func QuickPlan() Plan {
	return Plan{
		// 1 x 64 and 4 x 64 in both modes at 10^4; the scale curve (16 x
		// 64, in both modes) at 10^4 and 10^5.
		Claim: ClaimPlan{Pending: []int{10_000, 100_000}, Grid: []int{10_000},
			Configs: claimGrid([]int{1, 4}, []int{64}, false, true), Scale: claimGrid([]int{16}, []int{64}, false, true)},
		PeerMaxPend: 100_000,
		Loads:       []int{1_000, 10_000, 0},
		StormSize:   4_000,
		ProfileSize: 400_000,
		ProfileTime: time.Second,
		HTTPSize:    2_000,
		Workloads:   "abcdefg",
	}
}

// FullPlan is the run whose results are committed.
func FullPlan(dsn string) Plan {
	return Plan{
		PostgresDSN: dsn,
		// Every claimers x limit in both modes at 10^4 and 10^6; the scale
		// curve (16 x 256, in both modes) at every size.
		Claim: ClaimPlan{Pending: []int{10_000, 100_000, 1_000_000, 10_000_000}, Grid: []int{10_000, 1_000_000},
			Configs: claimGrid([]int{1, 4, 16}, []int{64, 256}, false, true), Scale: claimGrid([]int{16}, []int{256}, false, true)},
		PeerMaxPend: 1_000_000,
		Loads:       []int{1_000, 10_000, 50_000, 0},
		StormSize:   20_000,
		ProfileSize: 2_000_000,
		ProfileTime: 4 * time.Second,
		HTTPSize:    100_000,
		Workloads:   "abcdefg",
	}
}

func (p Plan) runs(w byte) bool {
	for i := range len(p.Workloads) {
		if p.Workloads[i] == w {
			return true
		}
	}
	return false
}

// Run runs the plan.
func (r *Runner) Run(ctx context.Context, p Plan) error {
	steps := []struct {
		w  byte
		fn func(context.Context, Plan) error
	}{
		{'a', r.runFloorAndAdmission},
		{'b', r.runClaims},
		{'c', r.runE2E},
		{'d', r.runStorm},
		{'f', r.runProfile},
		{'g', func(ctx context.Context, p Plan) error { return r.HTTP(ctx, p.HTTPSize) }},
	}
	for _, st := range steps {
		if st.w == 'b' && !p.runs('b') && !p.runs('e') {
			continue
		}
		if st.w != 'b' && !p.runs(st.w) {
			continue
		}
		if err := st.fn(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// peers are the contenders for (a), (b) and (e) besides execstore.
func (p Plan) peers() []Maker {
	var ms []Maker
	if p.PostgresDSN != "" {
		ms = append(ms, func() System { return &River{PostgresDSN: p.PostgresDSN} })
	}
	ms = append(ms,
		func() System { return &River{} },
		func() System { return &Yieldstar{} },
		func() System { return &Records{} },
	)
	return ms
}

func execstores() []Maker {
	return []Maker{
		func() System { return &Execstore{} },
		func() System { return &Execstore{NoSync: true} },
	}
}

func (r *Runner) runFloorAndAdmission(ctx context.Context, p Plan) error {
	dir, done, err := r.tempDir()
	if err != nil {
		return err
	}
	for range r.Cfg.Reps {
		a, _, err := Fdatasync(dir, true, r.Cfg.Duration)
		if err != nil {
			done()
			return err
		}
		o, cpu, err := Fdatasync(dir, false, r.Cfg.Duration)
		if err != nil {
			done()
			return err
		}
		r.Res.FdatasyncAppend = append(r.Res.FdatasyncAppend, a)
		r.Res.FdatasyncOverwrite = append(r.Res.FdatasyncOverwrite, o)
		r.Res.FdatasyncCPU = append(r.Res.FdatasyncCPU, cpu)
	}
	done()
	r.logf("floor: fdatasync loop, appending %.0f/s (%.0f µs each), overwriting %.0f/s (%.0f µs each, %.0f µs of them on a core)",
		r.Res.FdatasyncAppend.Median(), 1e6/r.Res.FdatasyncAppend.Median(),
		r.Res.FdatasyncOverwrite.Median(), 1e6/r.Res.FdatasyncOverwrite.Median(), r.Res.FdatasyncCPU.Median())
	for _, mk := range append(execstores(), p.peers()...) {
		if err := r.Admission(ctx, mk); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) runClaims(ctx context.Context, p Plan) error {
	for _, mk := range execstores() {
		if err := r.Claim(ctx, mk, p.Claim); err != nil {
			return err
		}
	}
	peerPlan := p.Claim
	peerPlan.Pending = nil
	for _, n := range p.Claim.Pending {
		if n <= p.PeerMaxPend {
			peerPlan.Pending = append(peerPlan.Pending, n)
		}
	}
	if len(peerPlan.Pending) < len(p.Claim.Pending) {
		r.Res.Notes = append(r.Res.Notes, fmt.Sprintf(
			"The peers' scale curve stops at %d pending: filling them further would not fit the run's time bound.", p.PeerMaxPend))
	}
	for _, mk := range p.peers() {
		if err := r.Claim(ctx, mk, peerPlan); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) e2eContenders(p Plan) []Maker {
	ms := execstores()
	if p.PostgresDSN != "" {
		ms = append(ms,
			func() System { return &River{PostgresDSN: p.PostgresDSN} },
			func() System { return &River{PostgresDSN: p.PostgresDSN, Tuned: true} })
	}
	return append(ms,
		func() System { return &River{Tuned: true} },
		func() System { return &Yieldstar{} },
		func() System { return &Records{} })
}

func (r *Runner) runE2E(ctx context.Context, p Plan) error {
	for _, mk := range r.e2eContenders(p) {
		if err := r.E2E(ctx, mk, p.Loads); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) runStorm(ctx context.Context, p Plan) error {
	ms := []Maker{func() System { return &Execstore{} }}
	if p.PostgresDSN != "" {
		ms = append(ms,
			func() System { return &River{PostgresDSN: p.PostgresDSN, Tuned: true} },
			func() System { return &River{PostgresDSN: p.PostgresDSN, Tuned: true, Unique: true} })
	}
	ms = append(ms,
		func() System { return &River{Tuned: true} },
		func() System { return &River{Tuned: true, Unique: true} },
		func() System { return &Yieldstar{} },
		func() System { return &Records{} })
	for _, mk := range ms {
		if err := r.Storm(ctx, mk, p.StormSize); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) runProfile(ctx context.Context, p Plan) error {
	for _, noSync := range []bool{true, false} {
		if err := r.ProfileClaims(ctx, noSync, p.ProfileSize, 4, 256, p.ProfileTime); err != nil {
			return err
		}
	}
	return nil
}
