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

// The replicated world's clients call the public API of a replicated
// execstore.Store (the same calls as CheckLinearizable's clients), each on
// a node that believes it leads. A refusal that submitted nothing (a
// *NotLeaderError without Uncertain) is tried again on the leader of the
// moment, within the call's bound. A call whose command may have been
// submitted and whose answer was lost (the leadership lost meanwhile, the
// node closed under it, the bound run out) has an unknown outcome: it
// enters the history with no return and an output the model accepts
// whatever it is, so porcupine may have it take effect at any point after
// its call, or never. A call that found no leader in time submitted
// nothing, and a read that failed changed nothing: both are left out.

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
	leases []execstore.Lease
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
func (c *replClient) lease(id string) execstore.Lease {
	mine, back, token := c.rng.IntN(4) != 0, c.rng.IntN(3), uint64(1+c.rng.IntN(3))
	if n := len(c.leases); n > 0 && mine {
		return c.leases[n-1-min(back, n-1)]
	}
	return execstore.Lease{ExecutionID: id, Token: token}
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
	var out linOut
	how := c.do(func(ctx context.Context, s *execstore.Store) error {
		var err error
		out, err = callStore(ctx, s, in)
		return err
	}, func(err error) { out.Code = execstore.ErrorCode(err) })
	switch {
	case how == answered:
		c.w.hist.add(porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: c.w.hist.seq.Add(1)})
	case how == unknownOutcome && (in.Kind == "step" || in.Kind == "get"):
		c.w.hist.dropped.Add(1) // a read changes nothing: left out
	case how == unknownOutcome:
		c.w.hist.unknown.Add(1)
		c.w.hist.add(porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: linOut{Unknown: true}, Return: math.MaxInt64})
	}
}

// claim asks for more executions than exist, and splits the answer into one
// operation per execution (see lin.go).
func (c *replClient) claim(dur time.Duration) {
	call := c.w.hist.seq.Add(1)
	var leases []execstore.Lease
	code := ""
	how := c.do(func(ctx context.Context, s *execstore.Store) error {
		var err error
		leases, err = s.ClaimDue(ctx, len(c.all)+5, dur)
		return err
	}, func(err error) { code = execstore.ErrorCode(err) })
	if how == dropped {
		return
	}
	ret := int64(math.MaxInt64)
	if how == answered {
		ret = c.w.hist.seq.Add(1)
	} else {
		c.w.hist.unknown.Add(1)
	}
	got := map[string]execstore.Lease{}
	for _, l := range leases {
		got[l.ExecutionID] = l
		c.leases = append(c.leases, l)
	}
	ops := make([]porcupine.Operation, 0, len(c.all))
	for _, id := range c.all {
		out := linOut{Unknown: how == unknownOutcome, Code: code}
		if l, ok := got[id]; ok {
			out = linOut{Token: l.Token, Expires: l.ExpiresAt.UnixNano()}
		}
		in := linIn{Kind: "claim", ID: id, Now: c.now, Dur: int64(dur)}
		ops = append(ops, porcupine.Operation{ClientId: c.id, Input: in, Call: call, Output: out, Return: ret})
	}
	c.w.hist.add(ops...)
}

// leader polls, until ctx ends, for a running node that believes it leads.
func (c *replClient) leader(ctx context.Context) *execstore.Store {
	for {
		ls := c.w.leaders()
		if len(ls) > 0 {
			c.turn++
			if s := ls[c.turn%len(ls)].store.Load(); s != nil {
				return s
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(replPoll):
		}
	}
}

// do makes a call through the leader of the moment, within the call's
// bound: a refusal that submitted nothing is tried again; an answer the
// contract allows (nil, or an error whose code the model knows) is passed
// to answer; an error that leaves the outcome unknown makes the call's
// outcome unknown; any other error is a violation.
func (c *replClient) do(call func(context.Context, *execstore.Store) error, answer func(error)) callOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), replCallBound)
	defer cancel()
	for {
		s := c.leader(ctx)
		if s == nil {
			c.w.hist.dropped.Add(1)
			return dropped
		}
		err := call(ctx, s)
		switch code := execstore.ErrorCode(err); {
		case err == nil, code == codeConflict, code == codeNotFound, code == codeLeaseLost:
			answer(err)
			return answered
		case refused(err):
			c.w.hist.retries.Add(1)
			continue
		case uncertain(err):
			return unknownOutcome
		default:
			c.w.violate(violationf("a client's call got an error the contract does not give here: %v", err))
			return dropped
		}
	}
}

// refused reports an error that says nothing was submitted: the node does
// not lead.
func refused(err error) bool {
	var nl *execstore.NotLeaderError
	return errors.As(err, &nl) && !nl.Uncertain
}

// uncertain reports an error after which the call may or may not have taken
// effect: the leadership lost after the command was submitted, the node
// closed under the call, the call's time out.
func uncertain(err error) bool {
	return errors.Is(err, execstore.ErrNotLeader) || errors.Is(err, execstore.ErrClosed) ||
		errors.Is(err, replica.ErrNodeClosed) || errors.Is(err, context.DeadlineExceeded)
}

var statusNames = [...]execstore.Status{
	fsm.StatusAdmitted:  execstore.StatusAdmitted,
	fsm.StatusSuspended: execstore.StatusSuspended,
	fsm.StatusCompleted: execstore.StatusCompleted,
	fsm.StatusFailed:    execstore.StatusFailed,
	fsm.StatusCancelled: execstore.StatusCancelled,
}

func statusName(s fsm.Status) execstore.Status { return statusNames[s] }
