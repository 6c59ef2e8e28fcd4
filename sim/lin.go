package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/execstore/execstore"
)

// Linearizability: concurrent clients call a real store (group commit
// batches their commands) and porcupine checks that the history has a
// sequential order, consistent with real time, that the per-execution model
// accepts. The history is partitioned by execution ID; a claim, which
// touches many executions, is split into one operation per execution. That
// split is exact because every claim asks for more executions than exist, so
// whether it leases an execution depends on that execution alone.
//
// Time: the clock stands still while clients run, so every command of a
// phase is stamped with the phase's time; between phases, with no call in
// flight, it jumps ahead (far enough, at times, for leases to expire).

// LinConfig sets up a linearizability check.
type LinConfig struct {
	Seed        uint64
	Clients     int // concurrent clients; default 4
	Executions  int // execution IDs the clients share; default 8
	Phases      int // default 5
	OpsPerPhase int // per client; default 40
	Dir         string
	Timeout     time.Duration // for porcupine; default 60 s
}

func (c LinConfig) withDefaults() LinConfig {
	if c.Clients <= 0 {
		c.Clients = 4
	}
	if c.Executions <= 0 {
		c.Executions = 8
	}
	if c.Phases <= 0 {
		c.Phases = 5
	}
	if c.OpsPerPhase <= 0 {
		c.OpsPerPhase = 40
	}
	if c.Timeout <= 0 {
		c.Timeout = 60 * time.Second
	}
	return c
}

// LinReport is a check's outcome.
type LinReport struct {
	Operations int // after splitting claims
	Result     porcupine.CheckResult
	History    []porcupine.Operation
	Info       porcupine.LinearizationInfo
}

// linIn is an operation's input: what was called, on which execution, at
// which store time.
type linIn struct {
	Kind  string // admit, wake, claim, renew, release, ack, save, step, get, cancel
	ID    string
	Now   int64
	At    int64 // wake
	Dur   int64 // claim, renew: lease duration; release: retry delay
	Token uint64
	Done  bool   // ack: completed (else suspended)
	Fail  bool   // ack: failed (else as Done says)
	Value string // save
}

// linOut is an operation's output.
type linOut struct {
	Code     string
	Wake     execstore.WakeResult
	Token    uint64 // claim: 0 when not leased; get: the current lease's token
	Expires  int64
	Status   execstore.Status
	Due      int64
	Attempts int
	Value    string
	Found    bool
	// Unknown: the call's outcome is unknown (the replicated world's
	// clients: the leader was lost after the command was submitted, or the
	// call's time ran out). The operation has no return (porcupine may
	// place it after every other) and any output is accepted: it took
	// effect at some point after its call, or never.
	Unknown bool
}

// linState is one execution, as the sequential model sees it. It is a value:
// porcupine compares states with ==.
type linState struct {
	Exists    bool
	Status    execstore.Status
	Due       int64
	Covered   int64
	Token     uint64
	Expires   int64
	LastToken uint64
	Step      string
	HasStep   bool
	// SuspendedBy is the token whose acknowledgement last suspended the
	// execution: a suspension repeated under it, with no lease current and
	// no claim since, answers as the first did.
	SuspendedBy uint64
}

// linModel is the per-execution sequential specification, from API.md.
var linModel = porcupine.Model{
	Init: func() any { return linState{} },
	Step: func(state, input, output any) (bool, any) {
		next, out := linStep(state.(linState), input.(linIn))
		got := output.(linOut)
		return got.Unknown || out == got, next
	},
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("%+v -> %+v", input, output)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%+v", state) },
}

// linStep applies one input to an execution and returns its output.
func linStep(s linState, in linIn) (linState, linOut) {
	current := func() string {
		switch {
		case !s.Exists:
			return codeNotFound
		case s.Token == 0 || s.Token != in.Token:
			return codeLeaseLost
		}
		return ""
	}
	terminal := s.Status.Terminal()
	switch in.Kind {
	case "admit":
		if s.Exists {
			return s, linOut{Code: codeConflict}
		}
		return linState{Exists: true, Status: execstore.StatusAdmitted, Due: in.Now}, linOut{}
	case "wake":
		switch {
		case !s.Exists:
			return s, linOut{Code: codeNotFound}
		case terminal:
			return s, linOut{Wake: execstore.WakeIgnored}
		}
		if s.Due == 0 || in.At < s.Due {
			s.Due = in.At
		}
		return s, linOut{Wake: execstore.WakeRequested}
	case "claim":
		claimable := s.Exists && !terminal &&
			((s.Token != 0 && s.Expires <= in.Now) || (s.Token == 0 && s.Due != 0 && s.Due <= in.Now))
		if !claimable {
			return s, linOut{}
		}
		s.Covered, s.Due = earliest(s.Covered, s.Due), 0
		s.LastToken++
		s.Token, s.Expires = s.LastToken, in.Now+in.Dur
		return s, linOut{Token: s.Token, Expires: s.Expires}
	case "renew":
		if code := current(); code != "" {
			return s, linOut{Code: code}
		}
		s.Expires = in.Now + in.Dur
		return s, linOut{Token: s.Token, Expires: s.Expires}
	case "release":
		if code := current(); code != "" {
			return s, linOut{Code: code}
		}
		s.Due = max(earliest(s.Covered, s.Due), in.Now+in.Dur)
		s.Covered, s.Token, s.Expires = 0, 0, 0
		return s, linOut{}
	case "ack":
		if code := current(); code != "" {
			switch {
			case s.Exists && terminal:
				return s, linOut{Status: s.Status}
			case s.Exists && !in.Fail && !in.Done && s.Token == 0 && s.SuspendedBy == in.Token && s.LastToken == in.Token:
				return s, linOut{Status: s.Status, Due: s.Due} // a repeated suspension: a replay
			}
			return s, linOut{Code: code}
		}
		s.Covered, s.Token, s.Expires = 0, 0, 0
		s.Status = execstore.StatusSuspended
		s.SuspendedBy = in.Token
		switch {
		case in.Fail:
			s.Status, s.Due = execstore.StatusFailed, 0
		case in.Done:
			s.Status, s.Due = execstore.StatusCompleted, 0
		}
		return s, linOut{Status: s.Status, Due: s.Due}
	case "save":
		if code := current(); code != "" {
			return s, linOut{Code: code}
		}
		if !s.HasStep {
			s.Step, s.HasStep = in.Value, true
		}
		return s, linOut{}
	case "step":
		if !s.Exists {
			return s, linOut{Code: codeNotFound}
		}
		return s, linOut{Value: s.Step, Found: s.HasStep}
	case "get":
		if !s.Exists {
			return s, linOut{Code: codeNotFound}
		}
		return s, linOut{Status: s.Status, Due: s.Due, Token: s.Token, Expires: s.Expires, Attempts: int(s.LastToken)}
	case "cancel":
		// The clients start no children, so a cancel is about one execution.
		switch {
		case !s.Exists:
			return s, linOut{Code: codeNotFound}
		case !terminal:
			s.Status = execstore.StatusCancelled
			s.Due, s.Covered, s.Token, s.Expires = 0, 0, 0, 0
		}
		return s, linOut{Status: s.Status}
	}
	panic("sim: unknown linearizability operation " + in.Kind)
}

// CheckLinearizable runs concurrent clients against a real store and checks
// the history with porcupine.
func CheckLinearizable(cfg LinConfig) (LinReport, error) {
	cfg = cfg.withDefaults()
	dir, cleanup, err := workDir(cfg.Dir)
	if err != nil {
		return LinReport{}, err
	}
	defer cleanup()
	var clk clock
	clk.set(simEpoch.UnixNano())
	storeDir := filepath.Join(dir, fmt.Sprintf("lin-%d", cfg.Seed))
	defer os.RemoveAll(storeDir)
	opts := execstore.Options{Now: clk.Now, SegmentSize: 4096}
	small(&opts)
	s, err := execstore.Open(storeDir, opts)
	if err != nil {
		return LinReport{}, err
	}
	defer s.Close()

	ids := make([]string, cfg.Executions)
	for i := range ids {
		ids[i] = fmt.Sprintf("lin-%d", i)
	}
	var (
		seq     atomic.Int64 // orders calls and returns
		mu      sync.Mutex
		history []porcupine.Operation
	)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x11))
	for phase := range cfg.Phases {
		if phase > 0 {
			jump := []time.Duration{time.Millisecond, time.Second, 2 * time.Hour}[rng.IntN(3)]
			clk.set(clk.nanos() + int64(jump))
		}
		now := clk.nanos()
		var wg sync.WaitGroup
		for c := range cfg.Clients {
			crng := rand.New(rand.NewPCG(cfg.Seed, uint64(phase*1000+c+1)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := &linClient{s: s, rng: crng, ids: ids, now: now, id: c, seq: &seq}
				ops := cl.run(cfg.OpsPerPhase)
				mu.Lock()
				history = append(history, ops...)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	model := linModel
	model.Partition = func(h []porcupine.Operation) [][]porcupine.Operation {
		byID := map[string][]porcupine.Operation{}
		for _, op := range h {
			id := op.Input.(linIn).ID
			byID[id] = append(byID[id], op)
		}
		out := make([][]porcupine.Operation, 0, len(ids))
		for _, id := range ids {
			out = append(out, byID[id])
		}
		return out
	}
	res, info := porcupine.CheckOperationsVerbose(model, history, cfg.Timeout)
	return LinReport{Operations: len(history), Result: res, History: history, Info: info}, nil
}

// Recheck checks a (possibly altered) history again, for tests that prove
// the checker can fail.
func Recheck(history []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	model := linModel
	model.Partition = partitionByID
	return porcupine.CheckOperationsTimeout(model, history, timeout)
}

// partitionByID splits a history by execution ID, in order of appearance.
func partitionByID(h []porcupine.Operation) [][]porcupine.Operation {
	byID := map[string][]porcupine.Operation{}
	var order []string
	for _, op := range h {
		id := op.Input.(linIn).ID
		if _, ok := byID[id]; !ok {
			order = append(order, id)
		}
		byID[id] = append(byID[id], op)
	}
	out := make([][]porcupine.Operation, 0, len(order))
	for _, id := range order {
		out = append(out, byID[id])
	}
	return out
}

// linClient is one concurrent client: it remembers the leases its claims
// returned and uses them, current or stale.
type linClient struct {
	s      *execstore.Store
	rng    *rand.Rand
	ids    []string
	now    int64
	id     int
	seq    *atomic.Int64
	leases []execstore.Lease
}

func (c *linClient) run(n int) []porcupine.Operation {
	var out []porcupine.Operation
	for range n {
		out = append(out, c.one()...)
	}
	return out
}

// lease picks a lease for a lease operation: mostly one of the client's
// latest claims (current or superseded since), else a made-up token for id.
func (c *linClient) lease(id string) execstore.Lease {
	if n := len(c.leases); n > 0 && c.rng.IntN(4) != 0 {
		return c.leases[n-1-c.rng.IntN(min(3, n))]
	}
	return execstore.Lease{ExecutionID: id, Token: uint64(1 + c.rng.IntN(3))}
}

// one performs one call and returns its operations (a claim gives one per
// execution).
func (c *linClient) one() []porcupine.Operation {
	id := c.ids[c.rng.IntN(len(c.ids))]
	in := linIn{ID: id, Now: c.now}
	call := c.seq.Add(1)
	withLease := func() {
		l := c.lease(id)
		in.ID, in.Token = l.ExecutionID, l.Token
	}
	switch r := c.rng.IntN(100); {
	case r < 6:
		in.Kind = "admit"
	case r < 26:
		in.Kind = "wake"
		in.At = c.now + int64([]time.Duration{-time.Second, 0, 0, time.Second, time.Hour}[c.rng.IntN(5)])
	case r < 40:
		return c.claim(call)
	case r < 48:
		in.Kind, in.Dur = "renew", int64([]time.Duration{time.Minute, time.Hour}[c.rng.IntN(2)])
		withLease()
	case r < 60:
		in.Kind, in.Dur = "release", int64([]time.Duration{0, 0, time.Second, 3 * time.Hour}[c.rng.IntN(4)])
		withLease()
	case r < 75:
		in.Kind, in.Done = "ack", c.rng.IntN(12) == 0
		withLease()
	case r < 84:
		in.Kind, in.Value = "save", []string{`1`, `2`}[c.rng.IntN(2)]
		withLease()
	case r < 90:
		in.Kind = "step"
	case r < 92:
		in.Kind = "cancel"
	default:
		in.Kind = "get"
	}
	out, err := callStore(context.Background(), c.s, in)
	out.Code = execstore.ErrorCode(err)
	ret := c.seq.Add(1)
	return []porcupine.Operation{{ClientId: c.id, Input: in, Call: call, Output: out, Return: ret}}
}

// callStore makes the call in describes (any kind but claim) and returns
// its output, without Code: the caller reads the error.
func callStore(ctx context.Context, s *execstore.Store, in linIn) (linOut, error) {
	var out linOut
	l := execstore.Lease{ExecutionID: in.ID, Token: in.Token}
	switch in.Kind {
	case "admit":
		_, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: in.ID, WorkflowID: "wf"})
		return out, err
	case "wake":
		w, err := s.RequestWake(ctx, in.ID, time.Unix(0, in.At))
		out.Wake = w
		return out, err
	case "renew":
		got, err := s.Renew(ctx, l, time.Duration(in.Dur))
		if err == nil {
			out.Token, out.Expires = got.Token, got.ExpiresAt.UnixNano()
		}
		return out, err
	case "release":
		return out, s.Release(ctx, l, time.Duration(in.Dur))
	case "ack":
		o := execstore.Suspended()
		switch {
		case in.Fail:
			o = execstore.Failed(errors.New("failed"))
		case in.Done:
			o = execstore.Completed(nil)
		}
		rec, err := s.Acknowledge(ctx, l, o)
		if err == nil {
			out.Status, out.Due = rec.Status, nanosOf(rec.DueAt)
		}
		return out, err
	case "save":
		return out, s.SaveStep(ctx, l, "s", []byte(in.Value))
	case "step":
		v, found, err := s.Step(ctx, in.ID, "s")
		out.Value, out.Found = string(v), found
		return out, err
	case "cancel":
		rec, err := s.Cancel(ctx, in.ID, "")
		if err == nil {
			out.Status = rec.Status
		}
		return out, err
	case "get":
		rec, err := s.Get(ctx, in.ID)
		if err == nil {
			out.Status, out.Due, out.Attempts = rec.Status, nanosOf(rec.DueAt), rec.Attempts
			if rec.Lease != nil {
				out.Token, out.Expires = rec.Lease.Token, rec.Lease.ExpiresAt.UnixNano()
			}
		}
		return out, err
	}
	panic("sim: no store call for " + in.Kind)
}

// claim claims more executions than exist and splits the answer into one
// operation per execution.
func (c *linClient) claim(call int64) []porcupine.Operation {
	dur := []time.Duration{time.Minute, time.Hour}[c.rng.IntN(2)]
	leases, err := c.s.ClaimDue(context.Background(), len(c.ids)+5, dur)
	ret := c.seq.Add(1)
	got := map[string]execstore.Lease{}
	for _, l := range leases {
		got[l.ExecutionID] = l
		c.leases = append(c.leases, l)
	}
	ops := make([]porcupine.Operation, 0, len(c.ids))
	for _, id := range c.ids {
		out := linOut{Code: execstore.ErrorCode(err)}
		if l, ok := got[id]; ok {
			out = linOut{Token: l.Token, Expires: l.ExpiresAt.UnixNano()}
		}
		in := linIn{Kind: "claim", ID: id, Now: c.now, Dur: int64(dur)}
		ops = append(ops, porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: ret})
	}
	return ops
}

func nanosOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Visualize writes a check's history as porcupine's HTML visualization.
func Visualize(rep LinReport, path string) error {
	return porcupine.VisualizePath(linModel, rep.Info, path)
}
