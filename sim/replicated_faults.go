package sim

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// faultKinds are the faults injected while clients run.
// A crash cuts the node off before it stops; a stop closes it as an
// operator would (a leader hands its leadership over first).
var faultKinds = []string{"crash-leader", "stop-leader", "crash-follower", "isolate-leader", "isolate-follower", "delay"}

// replFault is one planned fault: its kind, a number that picks its target
// among the candidates of the moment, and, for a delay, the longest wait.
type replFault struct {
	kind  string
	pick  int
	delay time.Duration
}

func (w *replWorld) planFaults() []replFault {
	plan := make([]replFault, w.cfg.FaultsPerPhase)
	for i := range plan {
		plan[i] = replFault{
			kind:  faultKinds[w.rng.IntN(len(faultKinds))],
			pick:  w.rng.IntN(1 << 20),
			delay: []time.Duration{20 * time.Millisecond, 80 * time.Millisecond, 300 * time.Millisecond}[w.rng.IntN(3)],
		}
	}
	return plan
}

// gates pace the clients and the faults: a phase's calls are cut into
// 2F+1 segments (F faults), and a client starts its segment g only once
// gate g is open. The driver opens gate 2i+1 once it injected fault i and
// gate 2i+2 once it undid it, each as soon as the first client reaches the
// gate, while the others are still calling: a fault begins and ends with
// calls in flight, and lasts a segment of every client's calls.
type gates struct {
	open    []chan struct{} // closed by the driver
	arrived []chan struct{} // the first client to reach a gate signals it
}

func newGates(n int) *gates {
	g := &gates{open: make([]chan struct{}, n+1), arrived: make([]chan struct{}, n+1)}
	for i := range g.open {
		g.open[i] = make(chan struct{})
		g.arrived[i] = make(chan struct{}, 1)
	}
	close(g.open[0])
	return g
}

// pass waits at gate i.
func (g *gates) pass(i int) {
	select {
	case g.arrived[i] <- struct{}{}:
	default:
	}
	<-g.open[i]
}

// segment is the gate before call k of n, for 1 + the gates' count
// segments; -1 when the call starts no segment.
func (g *gates) segment(k, n int) int {
	segs := len(g.open)
	for i := 1; i < segs; i++ {
		if k == i*n/segs {
			return i
		}
	}
	return -1
}

// drive injects the plan's faults one at a time, between the clients'
// segments of calls.
func (w *replWorld) drive(plan []replFault, g *gates) {
	for i, f := range plan {
		<-g.arrived[2*i+1]
		undo := w.inject(f)
		close(g.open[2*i+1])
		<-g.arrived[2*i+2]
		w.observe()
		undo()
		close(g.open[2*i+2])
	}
}

// inject starts a fault and returns what undoes it.
func (w *replWorld) inject(f replFault) (undo func()) {
	nothing := func() {}
	switch f.kind {
	case "crash-leader", "stop-leader", "isolate-leader":
		ld := w.awaitLeader()
		if ld == nil {
			return nothing
		}
		w.faults[f.kind]++
		if f.kind == "isolate-leader" {
			w.isolate(ld, true)
			return func() {
				w.awaitStepDown(ld)
				w.isolate(ld, false)
			}
		}
		w.crash(ld, f.kind == "crash-leader")
		return func() { w.restart(ld) }
	case "crash-follower", "isolate-follower":
		ld := w.awaitLeader()
		var fs []*replNode
		for _, nd := range w.nodes {
			if nd != ld && nd.store.Load() != nil {
				fs = append(fs, nd)
			}
		}
		if ld == nil || len(fs) == 0 {
			return nothing
		}
		nd := fs[f.pick%len(fs)]
		w.faults[f.kind]++
		if f.kind == "isolate-follower" {
			w.isolate(nd, true)
			return func() { w.isolate(nd, false) }
		}
		w.crash(nd, true)
		return func() { w.restart(nd) }
	case "delay":
		w.faults[f.kind]++
		w.slowMax.Store(int64(f.delay))
		w.slow.Store(int32(f.pick%len(w.nodes)) + 1)
		return func() { w.slow.Store(0) }
	}
	panic("sim: unknown fault " + f.kind)
}

// awaitStepDown waits, within the bound, until a leader cut off from the
// others no longer believes it leads (raft's leader lease: it hears from no
// quorum); a violation if it never steps down.
func (w *replWorld) awaitStepDown(nd *replNode) {
	deadline := time.Now().Add(w.cfg.Bound)
	for {
		n := nd.node()
		if n == nil || n.State() != raft.Leader {
			return
		}
		if time.Now().After(deadline) {
			w.violate(violationf("%s, cut off from the others, still leads %v later", nd.id, w.cfg.Bound))
			return
		}
		time.Sleep(replPoll)
	}
}

func (w *replWorld) restart(nd *replNode) {
	if err := w.open(nd, nil); err != nil {
		w.violate(violationf("restarting %s from its directory: %v", nd.id, err))
	}
}

// delayFor is how long a message from node from to target waits: a seeded
// time up to the delay fault's longest when either end is the slow node.
func (w *replWorld) delayFor(from int, target raft.ServerAddress) time.Duration {
	slow := int(w.slow.Load()) - 1
	if slow < 0 || (slow != from && w.nodes[slow].addr != target) {
		return 0
	}
	w.delayMu.Lock()
	defer w.delayMu.Unlock()
	return time.Duration(w.delayRng.Int64N(max(w.slowMax.Load(), 1)))
}

// noteInstall counts a snapshot sent to target.
func (w *replWorld) noteInstall(target raft.ServerAddress) {
	for _, nd := range w.nodes {
		if nd.addr == target {
			nd.installs.Add(1)
		}
	}
}

// DescribeFaults lists fault counts by kind, in a stable order.
func DescribeFaults(m map[string]int) string {
	var parts []string
	for _, k := range append(append([]string(nil), faultKinds...), "replace-disk", "clock-behind") {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// replaceDisk stops a node of a settled cluster, empties its directory and
// starts it again under the same ID: it must catch up (from a snapshot, when
// the leader compacted its log). The cluster is settled first, every node
// following one leader: a node that lost its vote could otherwise vote twice
// in one term (in production, a replaced disk rejoins by membership change).
func (w *replWorld) replaceDisk(pick int) {
	if w.settle() == nil || !w.sameLeaderEverywhere() {
		return
	}
	nd := w.nodes[pick%len(w.nodes)]
	w.faults["replace-disk"]++
	w.crash(nd, true)
	if err := os.RemoveAll(nd.dir); err != nil {
		w.violate(violationf("replacing %s's disk: %v", nd.id, err))
		return
	}
	before := nd.installs.Load()
	if err := w.open(nd, nil); err != nil {
		w.violate(violationf("%v", err))
		return
	}
	if w.settle() == nil {
		return
	}
	if nd.installs.Load() > before {
		w.fromSnap++
	}
}

// sameLeaderEverywhere waits, within the bound, until every running node
// knows the same leader; false (and a violation) if they never do.
func (w *replWorld) sameLeaderEverywhere() bool {
	deadline := time.Now().Add(w.cfg.Bound)
	for {
		seen := map[string]bool{}
		for _, nd := range w.nodes {
			if n := nd.node(); n != nil {
				id, _ := n.Leader()
				seen[id] = true
			}
		}
		if len(seen) == 1 && !seen[""] {
			return true
		}
		if time.Now().After(deadline) {
			w.violate(violationf("the nodes know different leaders %v, %v after the faults healed", keys(seen), w.cfg.Bound))
			return false
		}
		time.Sleep(replPoll)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
