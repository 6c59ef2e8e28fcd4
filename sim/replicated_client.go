package sim

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/replica"
)

// The replicated world's clients. Each call goes to a node that believes it
// leads; a refusal that submitted nothing (a *NotLeaderError without
// Uncertain) is tried again on the leader of the moment, within the call's
// bound. A call whose command may have been submitted and whose answer was
// lost (the leadership was lost meanwhile, the node was closed, the bound
// ran out) has an unknown outcome: it enters the history with no return and
// an output the model accepts whatever it is, so porcupine may have it take
// effect at any point after its call, or never. A call that found no leader
// in time submitted nothing and is left out.

// replHistory is the clients' history, on a logical clock: a call takes the
// next tick before its first attempt, its answer the next after it.
type replHistory struct {
	seq  atomic.Int64
	done atomic.Int64 // calls finished, whatever their outcome

	calls, unknown, dropped, retries atomic.Int64

	mu  sync.Mutex
	ops []porcupine.Operation
}

func (h *replHistory) add(ops ...porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, ops...)
	h.mu.Unlock()
}

// callOutcome is what became of a call.
type callOutcome int

const (
	answered callOutcome = iota
	unknownOutcome
	dropped
)

// replClient is one client of a phase. Its calls' kinds, IDs and arguments
// are drawn from its seed; which of its leases a call uses depends on what
// its earlier claims got.
type replClient struct {
	w      *replWorld
	id     int
	rng    *rand.Rand
	ids    []string // the phase's IDs
	all    []string // every ID so far: a claim may lease any
	now    int64    // the phase's time: every command of the phase is stamped with it
	leases []fsm.Lease
	turn   int // rotates among nodes that believe they lead
}

func (c *replClient) run(n int, g *gates) {
	for k := range n {
		if i := g.segment(k, n); i > 0 {
			g.pass(i)
		}
		c.one()
		c.w.hist.done.Add(1)
	}
}

// lease picks a lease for a lease operation: mostly one of the client's
// latest claims (current or superseded since), else a made-up token for id.
// It draws the same numbers whatever the client holds.
func (c *replClient) lease(id string) fsm.Lease {
	mine, back, token := c.rng.IntN(4) != 0, c.rng.IntN(3), uint64(1+c.rng.IntN(3))
	if n := len(c.leases); n > 0 && mine {
		return c.leases[n-1-min(back, n-1)]
	}
	return fsm.Lease{ExecutionID: id, Token: token}
}

// one draws and makes one call.
func (c *replClient) one() {
	c.w.hist.calls.Add(1)
	id := c.ids[c.rng.IntN(len(c.ids))]
	in := linIn{ID: id, Now: c.now}
	withLease := func() {
		l := c.lease(id)
		in.ID, in.Token = l.ExecutionID, l.Token
	}
	switch r := c.rng.IntN(100); {
	case r < 8:
		in.Kind = "admit"
	case r < 24:
		in.Kind = "wake"
		in.At = c.now + int64([]time.Duration{-time.Second, 0, 0, time.Second, time.Hour}[c.rng.IntN(5)])
	case r < 40:
		c.claim([]time.Duration{time.Minute, time.Hour}[c.rng.IntN(2)])
		return
	case r < 46:
		in.Kind, in.Dur = "renew", int64([]time.Duration{time.Minute, time.Hour}[c.rng.IntN(2)])
		withLease()
	case r < 56:
		in.Kind, in.Dur = "release", int64([]time.Duration{0, 0, time.Second, 3 * time.Hour}[c.rng.IntN(4)])
		withLease()
	case r < 72:
		end := c.rng.IntN(16)
		in.Kind, in.Done, in.Fail = "ack", end == 0, end == 1
		withLease()
	case r < 80:
		in.Kind, in.Value = "save", []string{`1`, `2`}[c.rng.IntN(2)]
		withLease()
	case r < 86:
		in.Kind = "step"
	case r < 88:
		in.Kind = "cancel"
	default:
		in.Kind = "get"
	}
	call := c.w.hist.seq.Add(1)
	if in.Kind == "step" || in.Kind == "get" {
		c.read(call, in)
		return
	}
	cmd := replCommand(in)
	res, how := c.apply(&cmd)
	switch how {
	case answered:
		c.w.hist.add(porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: replOutput(in, res), Return: c.w.hist.seq.Add(1)})
	case unknownOutcome:
		c.w.hist.add(porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: linOut{Unknown: true}, Return: math.MaxInt64})
	}
}

// claim asks for more executions than exist, and splits the answer into one
// operation per execution (see lin.go).
func (c *replClient) claim(dur time.Duration) {
	call := c.w.hist.seq.Add(1)
	cmd := fsm.Command{Kind: fsm.KindClaim, Limit: len(c.all) + 5, Duration: int64(dur)}
	res, how := c.apply(&cmd)
	if how == dropped {
		return
	}
	ret := int64(math.MaxInt64)
	if how == answered {
		ret = c.w.hist.seq.Add(1)
	}
	got := map[string]fsm.Lease{}
	for _, l := range res.Leases {
		got[l.ExecutionID] = l
		c.leases = append(c.leases, l)
	}
	ops := make([]porcupine.Operation, 0, len(c.all))
	for _, id := range c.all {
		out := linOut{Unknown: how == unknownOutcome}
		if l, ok := got[id]; ok {
			out = linOut{Token: l.Token, Expires: l.ExpiresAt}
		}
		in := linIn{Kind: "claim", ID: id, Now: c.now, Dur: int64(dur)}
		ops = append(ops, porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: ret})
	}
	c.w.hist.add(ops...)
}

// leader polls, until ctx ends, for a running node that believes it leads.
func (c *replClient) leader(ctx context.Context) *replica.Node {
	for {
		ls := c.w.leaders()
		if len(ls) > 0 {
			c.turn++
			if n := ls[c.turn%len(ls)].node.Load(); n != nil {
				return n
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(replPoll):
		}
	}
}

// apply submits cmd through the leader of the moment, within the call's
// bound.
func (c *replClient) apply(cmd *fsm.Command) (fsm.Result, callOutcome) {
	ctx, cancel := context.WithTimeout(context.Background(), replCallBound)
	defer cancel()
	for {
		n := c.leader(ctx)
		if n == nil {
			c.w.hist.dropped.Add(1)
			return fsm.Result{}, dropped
		}
		res, err := n.Apply(ctx, cmd)
		switch {
		case err == nil:
			return res, answered
		case refused(err):
			c.w.hist.retries.Add(1)
			continue
		case errors.Is(err, replica.ErrInvalidCommand):
			c.w.violate(violationf("a node refused a client's %v command as invalid: %v", cmd.Kind, err))
			return fsm.Result{}, dropped
		}
		c.w.hist.unknown.Add(1)
		return fsm.Result{}, unknownOutcome
	}
}

// refused reports an error that says nothing was submitted: the node does
// not lead. Any other error (the leadership lost after submitting, the node
// closed, time out) leaves the outcome unknown.
func refused(err error) bool {
	var nl *replica.NotLeaderError
	return errors.As(err, &nl) && !nl.Uncertain
}

// read makes a linearizable read on the leader of the moment; a read that
// fails changed nothing and is left out.
func (c *replClient) read(call int64, in linIn) {
	ctx, cancel := context.WithTimeout(context.Background(), replCallBound)
	defer cancel()
	for {
		n := c.leader(ctx)
		if n == nil {
			c.w.hist.dropped.Add(1)
			return
		}
		var out linOut
		err := n.Read(ctx, func(st *fsm.State) { out = readOutput(st, in) })
		switch {
		case err == nil:
			c.w.hist.add(porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: c.w.hist.seq.Add(1)})
			return
		case refused(err):
			c.w.hist.retries.Add(1)
			continue
		}
		c.w.hist.dropped.Add(1)
		return
	}
}

// applyWithin applies one command on n within d.
func applyWithin(n *replica.Node, cmd *fsm.Command, d time.Duration) (fsm.Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return n.Apply(ctx, cmd)
}

// replCommand is the state machine's command for a call, as the store would
// build it (the node stamps it).
func replCommand(in linIn) fsm.Command {
	c := fsm.Command{ExecutionID: in.ID, Token: in.Token, Duration: in.Dur}
	switch in.Kind {
	case "admit":
		c.Kind, c.WorkflowID = fsm.KindAdmit, "wf"
	case "wake":
		c.Kind, c.At = fsm.KindWake, in.At
	case "renew":
		c.Kind = fsm.KindRenew
	case "release":
		c.Kind = fsm.KindRelease
	case "ack":
		c.Kind, c.Outcome = fsm.KindAcknowledge, fsm.Outcome{Status: fsm.StatusSuspended}
		switch {
		case in.Fail:
			c.Outcome = fsm.Outcome{Status: fsm.StatusFailed, Error: &fsm.ErrorInfo{Name: "Error", Message: "failed"}}
		case in.Done:
			c.Outcome.Status = fsm.StatusCompleted
		}
	case "save":
		c.Kind, c.Key, c.Value = fsm.KindSaveStep, "s", in.Value
	case "cancel":
		c.Kind = fsm.KindCancel
	default:
		panic("sim: no command for " + in.Kind)
	}
	return c
}

// replOutput is a command's result as the store's API would answer it.
func replOutput(in linIn, res fsm.Result) linOut {
	var out linOut
	switch res.Code {
	case fsm.CodeOK:
	case fsm.CodeConflict:
		return linOut{Code: codeConflict}
	case fsm.CodeNotFound:
		return linOut{Code: codeNotFound}
	case fsm.CodeLeaseLost, fsm.CodeLeaseCancelled:
		return linOut{Code: codeLeaseLost}
	default:
		return linOut{Code: "code " + res.Code.String()}
	}
	switch in.Kind {
	case "wake":
		out.Wake = execstore.WakeRequested
		if res.Wake == fsm.WakeIgnored {
			out.Wake = execstore.WakeIgnored
		}
	case "renew":
		out.Token, out.Expires = res.Lease.Token, res.Lease.ExpiresAt
	case "ack":
		out.Status, out.Due = statusName(res.Exec.Status), res.Exec.DueAt
	case "cancel":
		out.Status = statusName(res.Exec.Status)
	}
	return out
}

// readOutput answers a get or a step read from the state.
func readOutput(st *fsm.State, in linIn) linOut {
	e, ok := st.Get(in.ID)
	if !ok {
		return linOut{Code: codeNotFound}
	}
	if in.Kind == "step" {
		v, found := st.Step(in.ID, "s")
		return linOut{Value: v, Found: found}
	}
	return linOut{Status: statusName(e.Status), Due: e.DueAt, Token: e.LeaseToken, Expires: e.LeaseExpiresAt,
		Attempts: int(e.LastToken)}
}

var statusNames = [...]execstore.Status{
	fsm.StatusAdmitted:  execstore.StatusAdmitted,
	fsm.StatusSuspended: execstore.StatusSuspended,
	fsm.StatusCompleted: execstore.StatusCompleted,
	fsm.StatusFailed:    execstore.StatusFailed,
	fsm.StatusCancelled: execstore.StatusCancelled,
}

func statusName(s fsm.Status) execstore.Status { return statusNames[s] }
