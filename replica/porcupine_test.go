package replica

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
)

// A linearizability check of a concurrent history across a leader failover: clients admit,
// claim, acknowledge and read executions through whichever node leads, while the leader is
// closed under them; porcupine then searches for an order of the operations, within their
// real-time bounds, that a single execution store would answer the same way.
//
// The model holds one execution (the history is partitioned by execution ID): admitted at
// most once; at most one current lease, whose token exceeds every earlier token of the
// execution; an outcome recorded once and never changed; a linearizable read answers what
// the state holds. Operations whose outcome is unknown (the leader was lost after the
// command was submitted) may take effect at any point after their call, or never: they are
// given an open end and a step that accepts them either way. Claims are made with a limit
// of one, so each that got a lease acts on one execution; a claim that got none, or whose
// answer was lost, is left out (an unknown lease is never acknowledged, and blocks no
// later claim the history holds, since leases outlive the test).

type linOp struct {
	Kind  string // admit, claim, ack, read
	ID    string
	Token uint64 // claim: the token granted; ack: the lease's token
}

type linOut struct {
	Unknown  bool // the outcome is unknown
	OK       bool // admit, ack: Code was CodeOK
	Admitted bool // read
	Terminal bool // read
}

type linExec struct {
	Admitted, Leased, Terminal bool
	Token                      uint64 // the highest token ever granted
}

var execModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byID := map[string][]porcupine.Operation{}
		var ids []string
		for _, op := range history {
			id := op.Input.(linOp).ID
			if _, ok := byID[id]; !ok {
				ids = append(ids, id)
			}
			byID[id] = append(byID[id], op)
		}
		var out [][]porcupine.Operation
		for _, id := range ids {
			out = append(out, byID[id])
		}
		return out
	},
	Init: func() any { return linExec{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(linExec), input.(linOp), output.(linOut)
		switch in.Kind {
		case "admit":
			if out.Unknown || out.OK {
				if out.OK && s.Admitted {
					return false, s
				}
				s.Admitted = true
				return true, s
			}
			return s.Admitted, s // refused only as a duplicate
		case "claim": // only claims that got a lease are in the history
			if !s.Admitted || s.Terminal || s.Leased || in.Token <= s.Token {
				return false, s
			}
			s.Leased, s.Token = true, in.Token
			return true, s
		case "ack":
			current := s.Leased && s.Token == in.Token && !s.Terminal
			if out.Unknown {
				if current {
					s.Leased, s.Terminal = false, true
				}
				return true, s
			}
			if out.OK != current {
				return false, s
			}
			if current {
				s.Leased, s.Terminal = false, true
			}
			return true, s
		case "read":
			return out.Admitted == s.Admitted && out.Terminal == s.Terminal, s
		}
		return false, s
	},
	Equal: func(a, b any) bool { return a.(linExec) == b.(linExec) },
	DescribeOperation: func(input, output any) string {
		return fmt.Sprintf("%+v -> %+v", input, output)
	},
}

// linHistory records operations with a logical clock: Call before the request, Return
// after the answer; unknown outcomes get an open end.
type linHistory struct {
	mu    sync.Mutex
	clock atomic.Int64
	ops   []porcupine.Operation
	done  atomic.Int64 // operations answered
}

func (h *linHistory) add(client int, call int64, in linOp, out linOut) {
	ret := h.clock.Add(1)
	if out.Unknown {
		ret = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
	h.done.Add(1)
}

// unknownOutcome reports whether err leaves the operation's effect unknown. A certain
// not-leader error means nothing was submitted.
func unknownOutcome(err error) bool {
	var nl *NotLeaderError
	return !(errors.As(err, &nl) && !nl.Uncertain)
}

// linClient runs one client's operations against the leader of the moment.
type linClient struct {
	id       int
	nodes    []*Node
	h        *linHistory
	rng      *rand.Rand
	admitted []string
	leases   []fsm.Lease
}

// leader polls for a leader, within waitBound; nil when there is none. (Clients run in
// goroutines of their own, where a test may not call Fatal.)
func (cl *linClient) leader() *Node {
	for deadline := time.Now().Add(waitBound); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, n := range cl.nodes {
			if n.State() == raft.Leader {
				return n
			}
		}
	}
	return nil
}

func (cl *linClient) step(t *testing.T, k int) {
	ctx := boundedCtx(t)
	n := cl.leader()
	if n == nil {
		t.Error("no leader for a client")
		return
	}
	call := cl.h.clock.Add(1)
	switch r := cl.rng.IntN(10); {
	case r < 3 || len(cl.admitted) == 0:
		id := fmt.Sprintf("c%d-%d", cl.id, k)
		res, err := n.Apply(ctx, &fsm.Command{Kind: fsm.KindAdmit, ExecutionID: id, WorkflowID: "wf"})
		switch {
		case err == nil:
			cl.h.add(cl.id, call, linOp{Kind: "admit", ID: id}, linOut{OK: res.Code == fsm.CodeOK})
			cl.admitted = append(cl.admitted, id)
		case unknownOutcome(err):
			cl.h.add(cl.id, call, linOp{Kind: "admit", ID: id}, linOut{Unknown: true})
		}
	case r < 5:
		res, err := n.Apply(ctx, &fsm.Command{Kind: fsm.KindClaim, Limit: 1, Duration: int64(10 * time.Minute)})
		if err == nil && len(res.Leases) == 1 {
			l := res.Leases[0]
			cl.h.add(cl.id, call, linOp{Kind: "claim", ID: l.ExecutionID, Token: l.Token}, linOut{OK: true})
			cl.leases = append(cl.leases, l)
		}
	case r < 7 && len(cl.leases) > 0:
		l := cl.leases[0]
		cl.leases = cl.leases[1:]
		in := linOp{Kind: "ack", ID: l.ExecutionID, Token: l.Token}
		res, err := n.Apply(ctx, &fsm.Command{Kind: fsm.KindAcknowledge, ExecutionID: l.ExecutionID, Token: l.Token,
			Outcome: fsm.Outcome{Status: fsm.StatusCompleted}})
		switch {
		case err == nil:
			cl.h.add(cl.id, call, in, linOut{OK: res.Code == fsm.CodeOK && !res.Unchanged})
		case unknownOutcome(err):
			cl.h.add(cl.id, call, in, linOut{Unknown: true})
		}
	default:
		id := cl.admitted[cl.rng.IntN(len(cl.admitted))]
		var out linOut
		err := n.Read(ctx, func(st *fsm.State) {
			e, ok := st.Get(id)
			out = linOut{Admitted: ok, Terminal: ok && e.Status.Terminal()}
		})
		if err == nil {
			cl.h.add(cl.id, call, linOp{Kind: "read", ID: id}, out)
		}
	}
}

func TestAConcurrentHistoryAcrossAFailoverIsLinearizable(t *testing.T) {
	c := newTCluster(t, 3)
	var nodes []*Node
	for _, tn := range c.nodes {
		nodes = append(nodes, tn.n)
	}
	h := &linHistory{}
	const clients, opsEach, failAfter = 4, 50, 60
	var wg sync.WaitGroup
	for i := range clients {
		cl := &linClient{id: i, nodes: nodes, h: h, rng: rand.New(rand.NewPCG(uint64(i), 21))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range opsEach {
				cl.step(t, k)
			}
		}()
	}
	waitFor(t, "operations before the failover", func() bool { return h.done.Load() >= failAfter })
	old := c.leader()
	failedAt := h.clock.Load()
	c.stop(old)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	kinds := map[string]int{}
	after := 0
	for _, op := range h.ops {
		if out := op.Output.(linOut); !out.Unknown && (out.OK || op.Input.(linOp).Kind == "read") {
			kinds[op.Input.(linOp).Kind]++
			if op.Call > failedAt {
				after++
			}
		}
	}
	t.Logf("%d operations, answered kinds %v, %d answered after the leader stopped", len(h.ops), kinds, after)
	for _, k := range []string{"admit", "claim", "ack", "read"} {
		if kinds[k] == 0 {
			t.Fatalf("no successful %s in the history: %v", k, kinds)
		}
	}
	if after == 0 {
		t.Fatal("no operation succeeded after the failover")
	}
	if res := porcupine.CheckOperationsTimeout(execModel, h.ops, 30*time.Second); res != porcupine.Ok {
		t.Fatalf("the history is not linearizable: %v", res)
	}
}

// TestTheLinearizabilityModelRejectsBadHistories checks the model can fail: a second lease
// while the first is live, a token that does not grow, an outcome changed, a stale read.
func TestTheLinearizabilityModelRejectsBadHistories(t *testing.T) {
	op := func(call, ret int64, in linOp, out linOut) porcupine.Operation {
		return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
	}
	admit := op(1, 2, linOp{Kind: "admit", ID: "a"}, linOut{OK: true})
	claim := func(call int64, tok uint64) porcupine.Operation {
		return op(call, call+1, linOp{Kind: "claim", ID: "a", Token: tok}, linOut{OK: true})
	}
	ack := func(call int64, tok uint64, ok bool) porcupine.Operation {
		return op(call, call+1, linOp{Kind: "ack", ID: "a", Token: tok}, linOut{OK: ok})
	}
	read := func(call int64, admitted, terminal bool) porcupine.Operation {
		return op(call, call+1, linOp{Kind: "read", ID: "a"}, linOut{Admitted: admitted, Terminal: terminal})
	}
	for _, tc := range []struct {
		name    string
		history []porcupine.Operation
		ok      bool
	}{
		{"admit, claim, ack, read", []porcupine.Operation{admit, claim(3, 1), ack(5, 1, true), read(7, true, true)}, true},
		{"two live leases", []porcupine.Operation{admit, claim(3, 1), claim(5, 2)}, false},
		{"a token that does not grow", []porcupine.Operation{admit, claim(3, 2), ack(5, 2, false), claim(7, 1)}, false},
		{"an outcome acknowledged twice", []porcupine.Operation{admit, claim(3, 1), ack(5, 1, true), ack(7, 1, true)}, false},
		{"a read that misses an acknowledgement", []porcupine.Operation{admit, claim(3, 1), ack(5, 1, true), read(7, true, false)}, false},
		{"an admission read before it happened", []porcupine.Operation{read(1, true, false), op(3, 4, linOp{Kind: "admit", ID: "a"}, linOut{OK: true})}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(execModel, tc.history); got != tc.ok {
				t.Fatalf("CheckOperations = %v, want %v", got, tc.ok)
			}
		})
	}
}
