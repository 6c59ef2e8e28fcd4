package replica

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
)

// Faults on in-memory clusters of Nodes: a follower partitioned and healed, a disk replaced,
// a leader killed under concurrent claimers. (A leader cut off from the majority, a leader
// killed under a sequential workload, a lagging node and restarts are in cluster_test.go.)

func TestAPartitionedFollowerCatchesUpAfterTheHeal(t *testing.T) {
	for i, tc := range []struct {
		name    string
		compact bool // the majority snapshots and compacts its log past the follower's end
	}{
		{"from the log", false},
		{"from a snapshot", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3)
			d := newDriver(c, 40+uint64(i))
			d.run(60)
			f := c.follower()
			c.isolate(f)
			fLast, _ := f.n.logs.LastIndex()
			acked := len(d.acked)

			// The majority goes on committing; the follower refuses writes and gets nothing.
			d.run(120)
			if got := len(d.acked) - acked; got < 90 {
				t.Fatalf("the majority acknowledged %d of 120 commands while a follower was cut off", got)
			}
			cmd := d.w.admit()
			var nl *NotLeaderError
			if _, err := f.n.Apply(boundedCtx(t), &cmd); !errors.As(err, &nl) || nl.Uncertain {
				t.Fatalf("a write on the cut-off follower = %v, want a certain *NotLeaderError", err)
			}
			if applied, want := f.n.fsm.Applied(), d.acked[len(d.acked)-1].index; applied >= want {
				t.Fatalf("the cut-off follower applied up to %d, the last acknowledged log is %d: the partition let logs through", applied, want)
			}
			if tc.compact {
				for _, m := range c.running() {
					if m != f {
						if err := m.n.raft.Snapshot().Error(); err != nil {
							t.Fatalf("snapshot on %s: %v", m.id, err)
						}
						if first, _ := m.n.logs.FirstIndex(); first <= fLast+1 {
							t.Fatalf("%s's log starts at %d after its snapshot, the follower's ends at %d: no snapshot needed", m.id, first, fLast)
						}
					}
				}
			}

			c.heal()
			d.run(20)
			c.settle()
			c.identicalStates()
			d.checkAcknowledgedPresent()
			d.checkWorkloadDidSomething()
			first, _ := f.n.logs.FirstIndex()
			switch {
			case tc.compact && (f.installed() == 0 || first <= fLast):
				t.Fatalf("the follower restored %d snapshots and its log starts at %d (it ended at %d): want it caught up from a snapshot",
					f.installed(), first, fLast)
			case !tc.compact && (f.installed() != 0 || first != 1):
				t.Fatalf("the follower restored %d snapshots and its log starts at %d: want it caught up from the log", f.installed(), first)
			}
			f.n.ReadStale(func(st *fsm.State) {
				if _, ok := st.Get(cmd.ExecutionID); ok {
					t.Fatal("the admission the cut-off follower refused was applied")
				}
			})
		})
	}
}

func TestAReplacedDiskCatchesUpFromTheLogOrFromASnapshot(t *testing.T) {
	for i, tc := range []struct {
		name    string
		compact bool // the others snapshot and compact their logs while the disk is replaced
	}{
		{"from the log", false},
		{"from a snapshot", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 3)
			d := newDriver(c, 50+uint64(i))
			d.run(80)

			// A follower stops and comes back with an empty directory, under the same ID
			// and address, without Bootstrap: the leader still counts it as a member.
			f := c.follower()
			c.stop(f)
			if err := os.RemoveAll(f.dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(f.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			d.run(80)
			if tc.compact {
				for _, m := range c.running() {
					if err := m.n.raft.Snapshot().Error(); err != nil {
						t.Fatalf("snapshot on %s: %v", m.id, err)
					}
					if first, _ := m.n.logs.FirstIndex(); first <= 1 {
						t.Fatalf("%s's log starts at %d after its snapshot: nothing was compacted", m.id, first)
					}
				}
			}
			c.start(f)
			d.run(20)
			c.settle()
			c.identicalStates()
			d.checkAcknowledgedPresent()
			d.checkWorkloadDidSomething()

			first, _ := f.n.logs.FirstIndex()
			switch {
			case tc.compact && (f.installed() == 0 || first <= 1):
				t.Fatalf("the replaced disk restored %d snapshots and its log starts at %d: want it caught up from a snapshot",
					f.installed(), first)
			case !tc.compact && (f.installed() != 0 || first != 1):
				t.Fatalf("the replaced disk restored %d snapshots and its log starts at %d: want it caught up from the log",
					f.installed(), first)
			}
			servers, err := f.n.Servers()
			if err != nil || len(servers) != 3 {
				t.Fatalf("the replaced disk knows the members %+v (%v), want three", servers, err)
			}
			// Its new directory holds all of it: restarted, the same state again.
			c.stop(f)
			c.start(f)
			c.settle()
			c.identicalStates()
		})
	}
}

// checkLeaseHistory checks a committed history of lease events (every command a member
// applied, in log order) and the leases clients were answered:
//
//   - no execution is delivered under two live leases: a lease granted at time t (the
//     claim's stamped time) while the execution's previous lease is neither expired at t
//     (its [claim time, expiry) holds t) nor ended before, by an acknowledgement or release
//     earlier in the log, is an error;
//   - an execution's tokens grow with every lease;
//   - every lease a client was answered is one the history granted, with the same expiry:
//     no node answered a claim that did not commit.
//
// It does not follow cancellations (which end leases too): a history with one is refused.
func checkLeaseHistory(events []leaseEvent, answered []fsm.Lease) error {
	type held struct {
		lease fsm.Lease
		ended bool
	}
	type key struct {
		id    string
		token uint64
	}
	latest := map[string]*held{}
	granted := map[key]fsm.Lease{}
	for i, ev := range events {
		if ev.kind == fsm.KindCancel {
			return fmt.Errorf("event %d: a cancellation, which this check does not follow", i)
		}
		for _, l := range ev.ended {
			h := latest[l.ExecutionID]
			if h == nil || h.ended || h.lease.Token != l.Token {
				return fmt.Errorf("event %d (%v): ended lease %d of %s, which is not its current lease", i, ev.kind, l.Token, l.ExecutionID)
			}
			h.ended = true
		}
		for _, l := range ev.granted {
			h := latest[l.ExecutionID]
			if ev.renewed {
				if h == nil || h.ended || h.lease.Token != l.Token {
					return fmt.Errorf("event %d: renewed lease %d of %s, which is not its current lease", i, l.Token, l.ExecutionID)
				}
				h.lease.ExpiresAt = l.ExpiresAt
				continue
			}
			if h != nil {
				if l.Token <= h.lease.Token {
					return fmt.Errorf("event %d: %s leased with token %d after token %d", i, l.ExecutionID, l.Token, h.lease.Token)
				}
				if !h.ended && ev.now < h.lease.ExpiresAt {
					return fmt.Errorf("event %d: %s leased with token %d at %d, while its lease %d was live until %d",
						i, l.ExecutionID, l.Token, ev.now, h.lease.Token, h.lease.ExpiresAt)
				}
			}
			latest[l.ExecutionID] = &held{lease: l}
			granted[key{l.ExecutionID, l.Token}] = l
		}
	}
	for _, l := range answered {
		if g, ok := granted[key{l.ExecutionID, l.Token}]; !ok || g != l {
			return fmt.Errorf("a client was answered lease %+v, which the history never granted", l)
		}
	}
	return nil
}

// TestTheLeaseHistoryCheckRejectsBadHistories checks the check can fail.
func TestTheLeaseHistoryCheckRejectsBadHistories(t *testing.T) {
	lease := func(id string, token uint64, expires int64) fsm.Lease {
		return fsm.Lease{ExecutionID: id, Token: token, ExpiresAt: expires}
	}
	claim := func(now int64, ls ...fsm.Lease) leaseEvent {
		return leaseEvent{kind: fsm.KindClaim, now: now, granted: ls}
	}
	release := func(now int64, id string, token uint64) leaseEvent {
		return leaseEvent{kind: fsm.KindRelease, now: now, ended: []fsm.Lease{{ExecutionID: id, Token: token}}}
	}
	renew := func(now int64, l fsm.Lease) leaseEvent {
		return leaseEvent{kind: fsm.KindRenew, now: now, granted: []fsm.Lease{l}, renewed: true}
	}
	for _, tc := range []struct {
		name     string
		events   []leaseEvent
		answered []fsm.Lease
		ok       bool
	}{
		{"a lease after the previous expired", []leaseEvent{claim(0, lease("a", 1, 10)), claim(10, lease("a", 2, 20))},
			[]fsm.Lease{lease("a", 1, 10), lease("a", 2, 20)}, true},
		{"a lease after the previous was released", []leaseEvent{claim(0, lease("a", 1, 10)), release(2, "a", 1),
			claim(3, lease("a", 2, 13))}, nil, true},
		{"a lease while the previous is live", []leaseEvent{claim(0, lease("a", 1, 10)), claim(9, lease("a", 2, 19))}, nil, false},
		{"a lease while the renewed previous is live", []leaseEvent{claim(0, lease("a", 1, 10)), renew(5, lease("a", 1, 15)),
			claim(12, lease("a", 2, 22))}, nil, false},
		{"a token that does not grow", []leaseEvent{claim(0, lease("a", 2, 10)), claim(20, lease("a", 1, 30))}, nil, false},
		{"a release of a lease that is not current", []leaseEvent{claim(0, lease("a", 2, 10)), release(2, "a", 1)}, nil, false},
		{"an answered lease never granted", []leaseEvent{claim(0, lease("a", 1, 10))}, []fsm.Lease{lease("a", 2, 10)}, false},
		{"an answered lease with another expiry", []leaseEvent{claim(0, lease("a", 1, 10))}, []fsm.Lease{lease("a", 1, 11)}, false},
		{"a cancellation", []leaseEvent{{kind: fsm.KindCancel}}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkLeaseHistory(tc.events, tc.answered); (err == nil) != tc.ok {
				t.Fatalf("checkLeaseHistory = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// claimer is one worker of TestNoExecutionIsDeliveredUnderTwoLiveLeasesAcrossALeaderKill: it
// claims through the leader of the moment and ends each lease one way or another. It runs in
// a goroutine of its own, so it reports with Error, never Fatal.
type claimer struct {
	id       int
	t        *testing.T
	nodes    []*Node
	rng      *rand.Rand
	admitted int
	ops      *atomic.Int64
	killed   *atomic.Bool
	mu       *sync.Mutex
	answered *[]fsm.Lease // leases clients were answered
	after    *atomic.Int64
}

// claimLeaseNanos is the claimers' lease duration, in stamped time: about 15 commands of a
// leader whose test clock moves a millisecond per stamp.
const claimLeaseNanos = int64(15 * time.Millisecond)

func (cl *claimer) leader() *Node {
	for deadline := time.Now().Add(waitBound); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, n := range cl.nodes {
			if n.State() == raft.Leader {
				return n
			}
		}
	}
	cl.t.Error("no leader for a claimer")
	return nil
}

// errNoLeader is a claimer's answer when no member became leader within waitBound.
var errNoLeader = errors.New("no leader")

// apply sends cmd through the leader of the moment.
func (cl *claimer) apply(cmd fsm.Command) (fsm.Result, error) {
	n := cl.leader()
	if n == nil {
		return fsm.Result{}, errNoLeader
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	r, err := n.Apply(ctx, &cmd)
	cl.ops.Add(1)
	if errors.Is(err, ErrInvalidCommand) {
		cl.t.Errorf("claimer %d made an invalid %v: %v", cl.id, cmd.Kind, err)
	}
	return r, err
}

// round claims up to two executions and ends each lease: abandoned (left to expire),
// released, a step saved then released, or completed. With nothing to claim it admits one.
// It returns false when there was no leader to ask.
func (cl *claimer) round() bool {
	r, err := cl.apply(fsm.Command{Kind: fsm.KindClaim, Limit: 2, Duration: claimLeaseNanos})
	if err != nil {
		return !errors.Is(err, errNoLeader)
	}
	if len(r.Leases) == 0 {
		_, err := cl.apply(fsm.Command{Kind: fsm.KindAdmit, ExecutionID: fmt.Sprintf("c%d-%d", cl.id, cl.admitted), WorkflowID: "wf"})
		cl.admitted++
		return !errors.Is(err, errNoLeader)
	}
	cl.mu.Lock()
	*cl.answered = append(*cl.answered, r.Leases...)
	cl.mu.Unlock()
	if cl.killed.Load() {
		cl.after.Add(1)
	}
	for _, l := range r.Leases {
		var cmd fsm.Command
		switch k := cl.rng.IntN(8); {
		case k < 2: // abandoned
			continue
		case k < 4:
			cmd = fsm.Command{Kind: fsm.KindRelease, ExecutionID: l.ExecutionID, Token: l.Token}
		case k < 7:
			step := fsm.Command{Kind: fsm.KindSaveStep, ExecutionID: l.ExecutionID, Token: l.Token, Key: "s", Value: `"v"`}
			if _, err := cl.apply(step); errors.Is(err, errNoLeader) {
				return false
			}
			cmd = fsm.Command{Kind: fsm.KindRelease, ExecutionID: l.ExecutionID, Token: l.Token}
		default:
			cmd = fsm.Command{Kind: fsm.KindAcknowledge, ExecutionID: l.ExecutionID, Token: l.Token,
				Outcome: fsm.Outcome{Status: fsm.StatusCompleted}}
		}
		if _, err := cl.apply(cmd); errors.Is(err, errNoLeader) {
			return false
		}
	}
	return true
}

func TestNoExecutionIsDeliveredUnderTwoLiveLeasesAcrossALeaderKill(t *testing.T) {
	c := newCluster(t, 3)
	w := newWorkload(31)
	for range 30 {
		cmd := w.admit()
		if _, err := c.leader().n.Apply(boundedCtx(t), &cmd); err != nil {
			t.Logf("admission of %s: %v", cmd.ExecutionID, err)
		}
	}
	var nodes []*Node
	for _, m := range c.nodes {
		nodes = append(nodes, m.n)
	}
	var ops, after atomic.Int64
	var killed atomic.Bool
	var mu sync.Mutex
	var answered []fsm.Lease
	const claimers, rounds, killAfter = 3, 60, 150
	var wg sync.WaitGroup
	for i := range claimers {
		cl := &claimer{id: i, t: t, nodes: nodes, rng: rand.New(rand.NewPCG(uint64(i), 31)), ops: &ops, killed: &killed,
			mu: &mu, answered: &answered, after: &after}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if !cl.round() {
					return
				}
			}
		}()
	}
	waitFor(t, "commands before the kill", func() bool { return ops.Load() >= killAfter })
	old := c.leader()
	var survivor *member
	for _, m := range c.running() {
		if m != old {
			survivor = m
		}
	}
	killed.Store(true)
	c.kill(old)
	tokensAtKill := map[string]uint64{}
	survivor.n.ReadStale(func(st *fsm.State) {
		for _, id := range leasedIDs(survivor.applied.all()) {
			e, _ := st.Get(id)
			tokensAtKill[id] = e.LastToken
		}
	})
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// The old leader resumes from its directory; every member applies the same history.
	c.start(old)
	ld := c.settle()
	c.identicalStates()
	commands := commandLogsUpTo(t, survivor, ld.n.fsm.Applied())
	survivor.applied.waitRecorded(t, commands)
	history := survivor.applied.all()
	if len(history) != commands {
		t.Fatalf("%s recorded %d commands, its log holds %d", survivor.id, len(history), commands)
	}
	for _, m := range c.running() {
		m.applied.waitRecorded(t, commands)
		if got := m.applied.all(); !reflect.DeepEqual(got, history) {
			t.Fatalf("%s applied %d commands since its start, %s %d: not the same history", m.id, len(got), survivor.id, len(history))
		}
	}
	if err := checkLeaseHistory(history, answered); err != nil {
		t.Fatal(err)
	}

	// The check had something to check: leases granted on both sides of the kill, ended
	// every way, and executions leased again with a higher token after it.
	granted, ended, abandoned := 0, 0, 0
	for _, ev := range history {
		granted += len(ev.granted)
		ended += len(ev.ended)
	}
	abandoned = granted - ended
	continued := 0
	survivor.n.ReadStale(func(st *fsm.State) {
		for id, tok := range tokensAtKill {
			if e, _ := st.Get(id); tok > 0 && e.LastToken > tok {
				continued++
			}
		}
	})
	t.Logf("%d commands, %d leases granted (%d answered to claimers, %d after the kill), %d ended, %d left to expire or superseded; %d executions leased again after the kill",
		len(history), granted, len(answered), after.Load(), ended, abandoned, continued)
	if after.Load() == 0 || continued == 0 || ended == 0 || abandoned == 0 {
		t.Fatal("the history lacks leases after the kill, leases leased again, or leases ended or left: it proves little")
	}
}

// commandLogsUpTo counts the command logs of m's log up to index (m's log must start at 1).
func commandLogsUpTo(t testing.TB, m *member, index uint64) int {
	t.Helper()
	if first, _ := m.n.logs.FirstIndex(); first != 1 {
		t.Fatalf("%s's log starts at %d: it was compacted", m.id, first)
	}
	n := 0
	for i := uint64(1); i <= index; i++ {
		var l raft.Log
		if err := m.n.logs.GetLog(i, &l); err != nil {
			t.Fatalf("%s: log %d: %v", m.id, i, err)
		}
		if l.Type == raft.LogCommand {
			n++
		}
	}
	return n
}

// leasedIDs returns the executions the history leased, each once.
func leasedIDs(events []leaseEvent) []string {
	seen := map[string]bool{}
	var out []string
	for _, ev := range events {
		for _, l := range ev.granted {
			if !seen[l.ExecutionID] {
				seen[l.ExecutionID] = true
				out = append(out, l.ExecutionID)
			}
		}
	}
	return out
}
