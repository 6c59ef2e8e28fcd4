package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/wal"
)

// The node tests run real Nodes: raft over TCP on 127.0.0.1, ports chosen by the system
// (BindAddr "127.0.0.1:0"; a restarted node binds the port it had, which its peers know).
// As in the cluster tests, every wait is a bounded poll of a state (waitFor) or a wait on a
// context with a deadline, and a leader change during a workload is part of the workload.

// testClock is a node's injected clock: it returns its time and moves on by a millisecond,
// so that stamps differ; set moves it anywhere, backwards included.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock(at time.Time) *testClock { return &testClock{now: at} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}

func (c *testClock) set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = at
}

// epoch is the test clocks' starting time.
var epoch = time.Unix(1_800_000_000, 0)

type tnode struct {
	id    string
	dir   string
	addr  string // empty until the first Open
	clock *testClock
	n     *Node // nil while stopped
}

type tcluster struct {
	t     testing.TB
	nodes []*tnode
	// defaults runs the nodes with NodeOptions' default timeouts (the benchmarks'
	// failover) instead of the tests' shorter ones.
	defaults bool
}

func testNodeOptions(tn *tnode) NodeOptions {
	bind := tn.addr
	if bind == "" {
		bind = "127.0.0.1:0"
	}
	return NodeOptions{
		ID: tn.id, BindAddr: bind, Clock: tn.clock.Now, Meta: "http://api-of-" + tn.id,
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		LeaderLeaseTimeout: 150 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		SnapshotInterval: time.Hour, RaftTimeout: 5 * time.Second,
		WAL: wal.Options{SegmentSize: 64 << 10},
	}
}

// newTCluster opens n nodes and bootstraps them as one cluster.
func newTCluster(t testing.TB, n int) *tcluster { return newTClusterWith(t, n, false) }

func newTClusterWith(t testing.TB, n int, defaults bool) *tcluster {
	c := &tcluster{t: t, defaults: defaults}
	for range n {
		c.start(c.add())
	}
	var peers []Server
	for _, tn := range c.nodes {
		peers = append(peers, Server{ID: tn.id, Addr: tn.addr, Voter: true})
	}
	for _, tn := range c.nodes {
		if err := tn.n.Bootstrap(peers); err != nil {
			t.Fatalf("bootstrap %s: %v", tn.id, err)
		}
	}
	c.leader()
	return c
}

func (c *tcluster) add() *tnode {
	tn := &tnode{id: fmt.Sprintf("n%d", len(c.nodes)), dir: c.t.TempDir(), clock: newTestClock(epoch)}
	c.nodes = append(c.nodes, tn)
	// Registered after TempDir, so it runs before the directory is removed.
	c.t.Cleanup(func() {
		if tn.n != nil {
			_ = tn.n.Close()
		}
	})
	return tn
}

// start opens the node from its directory.
func (c *tcluster) start(tn *tnode) {
	c.t.Helper()
	opts := testNodeOptions(tn)
	if c.defaults {
		opts.HeartbeatTimeout, opts.ElectionTimeout, opts.LeaderLeaseTimeout, opts.CommitTimeout = 0, 0, 0, 0
		opts.WAL = wal.Options{}
	}
	n, err := Open(tn.dir, opts)
	if err != nil {
		c.t.Fatalf("open %s: %v", tn.id, err)
	}
	tn.n, tn.addr = n, n.Addr()
}

func (c *tcluster) stop(tn *tnode) {
	c.t.Helper()
	if err := tn.n.Close(); err != nil {
		c.t.Fatalf("close %s: %v", tn.id, err)
	}
	tn.n = nil
}

func (c *tcluster) running() []*tnode {
	var out []*tnode
	for _, tn := range c.nodes {
		if tn.n != nil {
			out = append(out, tn)
		}
	}
	return out
}

// leader waits until exactly one running node is leader, and returns it.
func (c *tcluster) leader() *tnode {
	c.t.Helper()
	var found *tnode
	waitFor(c.t, "one leader", func() bool {
		found = nil
		for _, tn := range c.running() {
			if tn.n.State() == raft.Leader {
				if found != nil {
					return false
				}
				found = tn
			}
		}
		return found != nil
	})
	return found
}

// follower returns a running node that is not the leader and knows the leader.
func (c *tcluster) follower() *tnode {
	c.t.Helper()
	var found *tnode
	waitFor(c.t, "a follower that knows the leader", func() bool {
		for _, tn := range c.running() {
			if id, _ := tn.n.Leader(); tn.n.State() == raft.Follower && id != "" && id != tn.id {
				found = tn
				return true
			}
		}
		return false
	})
	return found
}

func boundedCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	t.Cleanup(cancel)
	return ctx
}

// settle waits until every running node applied all that a leader committed.
func (c *tcluster) settle() *tnode {
	c.t.Helper()
	var ld *tnode
	waitFor(c.t, "a barrier on a leader", func() bool {
		ld = c.leader()
		return ld.n.raft.Barrier(waitBound).Error() == nil
	})
	want := ld.n.fsm.Applied()
	for _, tn := range c.running() {
		if err := tn.n.fsm.WaitApplied(boundedCtx(c.t), want); err != nil {
			c.t.Fatalf("%s: %v", tn.id, err)
		}
	}
	return ld
}

// identicalStates fails unless every running node's state encodes to the same bytes, and
// returns them.
func (c *tcluster) identicalStates() []byte {
	c.t.Helper()
	var want []byte
	var from string
	for _, tn := range c.running() {
		st, _ := tn.n.fsm.Copy()
		got := stateBytes(c.t, st)
		if want == nil {
			want, from = got, tn.id
			continue
		}
		if !bytes.Equal(got, want) {
			c.t.Fatalf("%s's state (%d bytes) differs from %s's (%d bytes)", tn.id, len(got), from, len(want))
		}
	}
	return want
}

// nodeAcked is a command Apply answered without an error.
type nodeAcked struct {
	cmd    fsm.Command
	result fsm.Result
}

// ndriver sends a workload through the leader of the moment with Node.Apply and checks
// what it can as it goes: a lease token of an execution is always above every token that
// execution had before.
type ndriver struct {
	c        *tcluster
	w        *workload
	acked    []nodeAcked
	tries    int
	maxToken map[string]uint64
}

func newNDriver(c *tcluster, seed uint64) *ndriver {
	return &ndriver{c: c, w: newWorkload(seed), maxToken: map[string]uint64{}}
}

// next is the workload's next command, or now and then an acknowledge-batch of two leases.
func (d *ndriver) next() fsm.Command {
	if len(d.w.leases) >= 2 && d.w.rng.IntN(8) == 0 {
		var acks []fsm.Ack
		for range 2 {
			l, _ := d.w.lease()
			acks = append(acks, fsm.Ack{ExecutionID: l.ExecutionID, Token: l.Token,
				Outcome: fsm.Outcome{Status: fsm.StatusCompleted}})
		}
		return fsm.Command{Kind: fsm.KindAcknowledgeBatch, Acks: acks}
	}
	return d.w.next()
}

// run sends n commands one at a time; a command that fails is not retried.
func (d *ndriver) run(n int) {
	t := d.c.t
	t.Helper()
	for range n {
		cmd := d.next()
		d.tries++
		r, err := d.c.leader().n.Apply(boundedCtx(t), &cmd)
		if errors.Is(err, ErrInvalidCommand) {
			t.Fatalf("the workload made an invalid %v: %v", cmd.Kind, err)
		}
		if err != nil {
			continue
		}
		d.record(cmd, r)
	}
}

func (d *ndriver) record(cmd fsm.Command, r fsm.Result) {
	t := d.c.t
	t.Helper()
	for _, l := range r.Leases {
		if l.Token <= d.maxToken[l.ExecutionID] {
			t.Fatalf("%s was leased with token %d after token %d", l.ExecutionID, l.Token, d.maxToken[l.ExecutionID])
		}
		d.maxToken[l.ExecutionID] = l.Token
	}
	d.w.observe(r)
	d.acked = append(d.acked, nodeAcked{cmd: cmd, result: r})
}

// checkAcknowledgedPresent fails unless every running node's state holds the effect of every
// acknowledged admission and terminal acknowledgement.
func (d *ndriver) checkAcknowledgedPresent() {
	t := d.c.t
	t.Helper()
	for _, tn := range d.c.running() {
		tn.n.ReadStale(func(st *fsm.State) {
			terminal := func(id string, want fsm.Status) {
				if e, _ := st.Get(id); e.Status != want {
					t.Fatalf("%s: %s was acknowledged %v, its status is %v", tn.id, id, want, e.Status)
				}
			}
			for _, a := range d.acked {
				switch a.cmd.Kind {
				case fsm.KindAdmit:
					if _, ok := st.Get(a.cmd.ExecutionID); !ok {
						t.Fatalf("%s: the acknowledged admission of %s is missing", tn.id, a.cmd.ExecutionID)
					}
				case fsm.KindAcknowledge:
					if a.result.Code == fsm.CodeOK && a.result.Exec.Status.Terminal() {
						terminal(a.cmd.ExecutionID, a.result.Exec.Status)
					}
				case fsm.KindAcknowledgeBatch:
					for i, r := range a.result.Acks {
						if r.Code == fsm.CodeOK && r.Exec.Status.Terminal() {
							terminal(a.cmd.Acks[i].ExecutionID, r.Exec.Status)
						}
					}
				}
			}
		})
	}
}

func (d *ndriver) checkWorkloadDidSomething() {
	t := d.c.t
	t.Helper()
	ok := map[fsm.Kind]int{}
	for _, a := range d.acked {
		if a.result.Code == fsm.CodeOK && (a.cmd.Kind != fsm.KindClaim || len(a.result.Leases) > 0) {
			ok[a.cmd.Kind]++
		}
	}
	for _, k := range []fsm.Kind{fsm.KindAdmit, fsm.KindClaim, fsm.KindAcknowledge, fsm.KindAcknowledgeBatch,
		fsm.KindSaveStep, fsm.KindWake, fsm.KindCancel} {
		if ok[k] == 0 {
			t.Fatalf("no acknowledged %v succeeded (of %d acknowledged commands): %v", k, len(d.acked), ok)
		}
	}
	if len(d.acked) < d.tries*3/4 {
		t.Fatalf("only %d of %d commands were acknowledged", len(d.acked), d.tries)
	}
}

// checkStampsNeverGoBack fails unless the command logs of a node's log have stamped times
// that never decrease, and returns how many it read.
func checkStampsNeverGoBack(t testing.TB, tn *tnode) int {
	t.Helper()
	first, _ := tn.n.logs.FirstIndex()
	last, _ := tn.n.logs.LastIndex()
	var prev int64
	n := 0
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		if err := tn.n.logs.GetLog(i, &l); err != nil {
			t.Fatalf("%s: log %d: %v", tn.id, i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		var c fsm.Command
		if err := fsm.DecodeInto(&c, l.Data); err != nil {
			t.Fatalf("%s: log %d: %v", tn.id, i, err)
		}
		if c.Now < prev {
			t.Fatalf("%s: log %d (%v) is stamped %d, before the previous command's %d", tn.id, i, c.Kind, c.Now, prev)
		}
		prev = c.Now
		n++
	}
	return n
}

func TestOpenRefusesBadOptionsAndCreatesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts NodeOptions
	}{
		{"no ID", NodeOptions{BindAddr: "127.0.0.1:0"}},
		{"no bind address", NodeOptions{ID: "a"}},
		{"a negative timeout", NodeOptions{ID: "a", BindAddr: "127.0.0.1:0", HeartbeatTimeout: -time.Second}},
		{"a lease longer than the heartbeat", NodeOptions{ID: "a", BindAddr: "127.0.0.1:0",
			HeartbeatTimeout: 100 * time.Millisecond, LeaderLeaseTimeout: time.Second}},
		{"an unresolvable advertised address", NodeOptions{ID: "a", BindAddr: "127.0.0.1:0", AdvertiseAddr: "no port"}},
		{"too many entries per append", NodeOptions{ID: "a", BindAddr: "127.0.0.1:0", MaxAppendEntries: 5000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir() + "/node"
			n, err := Open(dir, tc.opts)
			if !errors.Is(err, ErrNodeOptions) {
				if n != nil {
					n.Close()
				}
				t.Fatalf("Open = %v, want ErrNodeOptions", err)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Fatal("Open created the directory of a refused node")
			}
		})
	}
}

func TestThreeNodesOverTCPApplyAWorkloadAndEndIdentical(t *testing.T) {
	c := newTCluster(t, 3)
	d := newNDriver(c, 11)
	d.run(250)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
	d.checkWorkloadDidSomething()
	for _, tn := range c.running() {
		if n := checkStampsNeverGoBack(t, tn); n < len(d.acked) {
			t.Fatalf("%s holds %d command logs, fewer than the %d acknowledged", tn.id, n, len(d.acked))
		}
		// A running cluster's node is never bootstrapped again.
		if err := tn.n.Bootstrap([]Server{{ID: tn.id, Addr: tn.addr, Voter: true}}); !errors.Is(err, ErrBootstrapped) {
			t.Fatalf("Bootstrap on %s = %v, want ErrBootstrapped", tn.id, err)
		}
	}
}

func TestAFollowerRefusesWritesNamingTheLeader(t *testing.T) {
	c := newTCluster(t, 3)
	f := c.follower()
	before := f.n.fsm.Applied()
	cmd := newWorkload(1).admit()
	_, err := f.n.Apply(boundedCtx(t), &cmd)
	var nl *NotLeaderError
	if !errors.As(err, &nl) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Apply on a follower = %v, want a *NotLeaderError", err)
	}
	// The leader it names is another member, at that member's address (a leader change
	// meanwhile may name a different one than before the call).
	named := false
	for _, tn := range c.nodes {
		named = named || (tn != f && tn.id == nl.LeaderID && tn.addr == nl.LeaderAddr)
	}
	if !named || nl.Uncertain {
		t.Fatalf("NotLeaderError %+v: want another member's ID and address, certain", nl)
	}
	if err := f.n.Read(boundedCtx(t), func(*fsm.State) {}); !errors.As(err, &nl) {
		t.Fatalf("Read on a follower = %v, want a *NotLeaderError", err)
	}
	c.settle()
	f.n.ReadStale(func(st *fsm.State) {
		if _, ok := st.Get(cmd.ExecutionID); ok {
			t.Fatal("the admission refused by a follower was applied")
		}
	})
	if f.n.fsm.Applied() < before {
		t.Fatal("the follower's applied index went backwards")
	}
}

func TestApplyRefusesInvalidCommandsAndEndedContextsAndSubmitsNothing(t *testing.T) {
	c := newTCluster(t, 3)
	ld := c.settle()
	last := ld.n.raft.LastIndex()
	for _, tc := range []struct {
		name string
		cmds []*fsm.Command
	}{
		{"no commands", nil},
		{"a nil command", []*fsm.Command{nil}},
		{"an admission without an ID", []*fsm.Command{{Kind: fsm.KindAdmit, WorkflowID: "wf"}}},
		{"a valid command beside an invalid one", []*fsm.Command{
			{Kind: fsm.KindAdmit, ExecutionID: "ok", WorkflowID: "wf"}, {Kind: fsm.Kind(200)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ld.n.ApplyBatch(boundedCtx(t), tc.cmds); !errors.Is(err, ErrInvalidCommand) {
				t.Fatalf("ApplyBatch = %v, want ErrInvalidCommand", err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cmd := newWorkload(1).admit()
	if _, err := ld.n.Apply(ctx, &cmd); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with an ended context = %v, want context.Canceled", err)
	}
	if got := ld.n.raft.LastIndex(); got != last {
		t.Fatalf("refused commands reached the log: last index %d, was %d", got, last)
	}
}

func TestApplyBatchCommitsEachCommandInOrder(t *testing.T) {
	c := newTCluster(t, 3)
	w := newWorkload(7)
	var cmds []*fsm.Command
	for range 100 {
		cmd := w.admit()
		cmds = append(cmds, &cmd)
	}
	out, err := c.leader().n.ApplyBatch(boundedCtx(t), cmds)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range out {
		if a.Err != nil || a.Result.Code != fsm.CodeOK || a.Result.ID != cmds[i].ExecutionID {
			t.Fatalf("command %d: %+v, want the admission of %s", i, a, cmds[i].ExecutionID)
		}
	}
	c.settle()
	c.identicalStates()
	for _, tn := range c.running() {
		tn.n.ReadStale(func(st *fsm.State) {
			if st.Len() != len(cmds) {
				t.Fatalf("%s holds %d executions, want %d", tn.id, st.Len(), len(cmds))
			}
		})
	}
}

func TestALinearizableReadOnTheLeaderSeesTheWriteBeforeIt(t *testing.T) {
	c := newTCluster(t, 3)
	w := newWorkload(8)
	for range 20 {
		ld := c.leader()
		cmd := w.admit()
		if _, err := ld.n.Apply(boundedCtx(t), &cmd); err != nil {
			continue // a leader change: the next admission goes to the next leader
		}
		seen := false
		err := ld.n.Read(boundedCtx(t), func(st *fsm.State) { _, seen = st.Get(cmd.ExecutionID) })
		if errors.Is(err, ErrNotLeader) {
			continue
		}
		if err != nil || !seen {
			t.Fatalf("Read after the admission of %s: err %v, seen %v", cmd.ExecutionID, err, seen)
		}
	}
	// A follower's stale read sees the last admission eventually.
	f := c.follower()
	last := fmt.Sprintf("e%d", w.admitted-1)
	waitFor(t, "the follower to apply the last admission", func() bool {
		seen := false
		f.n.ReadStale(func(st *fsm.State) { _, seen = st.Get(last) })
		return seen
	})
}

func TestANewLeaderWithAClockBehindKeepsTimeAndTokensGoingForward(t *testing.T) {
	c := newTCluster(t, 3)
	d := newNDriver(c, 12)
	old := c.leader()
	// The first leader's clock runs an hour ahead of the others.
	old.clock.set(epoch.Add(time.Hour))
	d.run(120)

	// Commands in flight when the leader stops.
	var wg sync.WaitGroup
	var mu sync.Mutex
	oldNode := old.n
	for i := range 30 {
		cmd := d.w.admit()
		if i%3 == 2 {
			cmd = fsm.Command{Kind: fsm.KindClaim, Limit: 2, Duration: 30_000}
		}
		d.tries++
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := oldNode.Apply(boundedCtx(t), &cmd)
			if err == nil {
				mu.Lock()
				d.record(cmd, r)
				mu.Unlock()
			}
		}()
	}
	c.stop(old)
	wg.Wait()
	var stamped int64
	for _, tn := range c.running() {
		tn.n.ReadStale(func(st *fsm.State) { stamped = max(stamped, st.Meta().Now) })
	}

	nw := c.leader()
	if nw == old {
		t.Fatal("the stopped leader is still leader")
	}
	if behind := nw.clock.Now().UnixNano(); behind >= stamped {
		t.Fatalf("the new leader's clock (%d) is not behind the state's time (%d): the test proves nothing", behind, stamped)
	}
	tokensBefore := maps.Clone(d.maxToken)
	d.run(60)
	// Time stands still while the leader's clock is behind the state's; once the clocks
	// pass it, leases granted before the failover expire and are granted again.
	for _, tn := range c.running() {
		tn.clock.set(epoch.Add(2 * time.Hour))
	}
	d.run(60)
	continued := 0
	for id, tok := range d.maxToken {
		if before := tokensBefore[id]; before > 0 && tok > before {
			continued++
		}
	}
	if continued == 0 {
		t.Fatal("no execution leased before the failover was leased again after it: the token check checked nothing")
	}
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
	d.checkWorkloadDidSomething()
	for _, tn := range c.running() {
		checkStampsNeverGoBack(t, tn)
	}

	// The old leader resumes from its directory, catches up, and agrees.
	c.start(old)
	c.settle()
	c.identicalStates()
	checkStampsNeverGoBack(t, old)
}

func TestMembershipAddsAFourthNodeAndRemovesOne(t *testing.T) {
	c := newTCluster(t, 3)
	d := newNDriver(c, 13)
	d.run(60)

	nw := c.add()
	c.start(nw)
	if err := c.leader().n.AddVoter(boundedCtx(t), nw.id, nw.addr); err != nil {
		t.Fatalf("AddVoter: %v", err)
	}
	if _, _, err := nw.n.WaitLeader(boundedCtx(t)); err != nil {
		t.Fatal(err)
	}
	d.run(30)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()

	// Remove a follower other than the new node; it stops, the rest go on.
	var gone *tnode
	for _, tn := range c.running() {
		if tn != nw && tn.n.State() != raft.Leader {
			gone = tn
			break
		}
	}
	if err := c.leader().n.RemoveServer(boundedCtx(t), gone.id); err != nil {
		t.Fatalf("RemoveServer: %v", err)
	}
	c.stop(gone)
	d.run(30)
	c.settle()
	c.identicalStates()
	servers, err := c.leader().n.Servers()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range servers {
		ids = append(ids, s.ID)
		if s.ID == gone.id {
			t.Fatalf("the removed %s is still a member: %+v", gone.id, servers)
		}
	}
	if len(servers) != 3 {
		t.Fatalf("members %v, want three", ids)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"AddVoter without an address", c.leader().n.AddVoter(boundedCtx(t), "x", "")},
		{"RemoveServer without an ID", c.leader().n.RemoveServer(boundedCtx(t), "")},
	} {
		if !errors.Is(tc.err, ErrNodeOptions) {
			t.Fatalf("%s = %v, want ErrNodeOptions", tc.name, tc.err)
		}
	}
}

func TestEveryNodeRestartedFromItsDirectoryHasTheSameState(t *testing.T) {
	c := newTCluster(t, 3)
	d := newNDriver(c, 14)
	d.run(150)
	for _, tn := range c.running() {
		if err := tn.n.raft.Snapshot().Error(); err != nil {
			t.Fatalf("snapshot on %s: %v", tn.id, err)
		}
	}
	d.run(50)
	c.settle()
	before := c.identicalStates()
	for _, tn := range c.running() {
		c.stop(tn)
	}
	for _, tn := range c.nodes {
		c.start(tn)
		if err := tn.n.Bootstrap([]Server{{ID: tn.id, Addr: tn.addr, Voter: true}}); !errors.Is(err, ErrBootstrapped) {
			t.Fatalf("Bootstrap on a reopened %s = %v, want ErrBootstrapped", tn.id, err)
		}
	}
	c.settle()
	if after := c.identicalStates(); !bytes.Equal(after, before) {
		t.Fatalf("after restarting every node the state (%d bytes) differs from before (%d bytes)", len(after), len(before))
	}
	d.checkAcknowledgedPresent()
	d.run(30)
	c.settle()
	c.identicalStates()
}

func TestAClosedNodeRefusesEverything(t *testing.T) {
	c := newTCluster(t, 1)
	tn := c.nodes[0]
	n := tn.n
	c.stop(tn)
	if err := n.Close(); err != nil {
		t.Fatalf("a second Close = %v", err)
	}
	cmd := newWorkload(1).admit()
	if _, err := n.Apply(boundedCtx(t), &cmd); !errors.Is(err, ErrNodeClosed) {
		t.Fatalf("Apply = %v, want ErrNodeClosed", err)
	}
	if err := n.Read(boundedCtx(t), func(*fsm.State) {}); !errors.Is(err, ErrNodeClosed) {
		t.Fatalf("Read = %v, want ErrNodeClosed", err)
	}
	if _, _, err := n.WaitLeader(boundedCtx(t)); !errors.Is(err, ErrNodeClosed) {
		t.Fatalf("WaitLeader = %v, want ErrNodeClosed", err)
	}
}

func TestBootstrapRefusesPeersWithoutThisNodeAndChangesNothing(t *testing.T) {
	c := &tcluster{t: t}
	t.Cleanup(func() {
		for _, tn := range c.nodes {
			if tn.n != nil {
				_ = tn.n.Close()
			}
		}
	})
	tn := c.add()
	c.start(tn)
	for _, tc := range []struct {
		name  string
		peers []Server
	}{
		{"no peers", nil},
		{"peers without this node", []Server{{ID: "other", Addr: "127.0.0.1:1", Voter: true}}},
		{"a peer without an address", []Server{{ID: tn.id, Voter: true}}},
	} {
		if err := tn.n.Bootstrap(tc.peers); !errors.Is(err, ErrNodeOptions) {
			t.Fatalf("%s: Bootstrap = %v, want ErrNodeOptions", tc.name, err)
		}
	}
	if err := tn.n.Bootstrap([]Server{{ID: tn.id, Addr: tn.addr, Voter: true}}); err != nil {
		t.Fatalf("Bootstrap after the refused ones: %v", err)
	}
	if id, addr, err := tn.n.WaitLeader(boundedCtx(t)); err != nil || id != tn.id || addr != tn.addr {
		t.Fatalf("WaitLeader = %s %s %v, want this node", id, addr, err)
	}
}

func TestWaitAppliedWakesWhenTheFSMAdvancesAndStopsWithItsContext(t *testing.T) {
	f := NewFSM(fsm.New(), 0, FSMOptions{})
	cmd := newWorkload(1).admit()
	data := encodeCommand(t, &cmd)
	done := make(chan error, 1)
	go func() { done <- f.WaitApplied(boundedCtx(t), 2) }()
	f.ApplyBatch([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: data}})
	select {
	case err := <-done:
		t.Fatalf("WaitApplied(2) returned %v with log 1 applied", err)
	default:
	}
	f.Apply(&raft.Log{Index: 2, Type: raft.LogConfiguration})
	if err := <-done; err != nil {
		t.Fatalf("WaitApplied(2) = %v after log 2", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.WaitApplied(ctx, 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitApplied with an ended context = %v", err)
	}
	if err := f.WaitApplied(ctx, 2); err != nil {
		t.Fatalf("WaitApplied of an applied index = %v, want nil even with an ended context", err)
	}
}

func TestEveryNodeTellsItsMetaOnItsRaftPortAndFollowersFindTheLeaders(t *testing.T) {
	c := newTCluster(t, 3)
	ld := c.leader()
	ctx := boundedCtx(t)
	for _, tn := range c.nodes {
		meta, err := PeerMeta(ctx, tn.addr)
		if err != nil || meta != "http://api-of-"+tn.id {
			t.Fatalf("PeerMeta(%s) = %q, %v", tn.id, meta, err)
		}
		var id string
		for {
			if id, meta, err = tn.n.LeaderMeta(ctx); err == nil {
				break
			}
			if !errors.Is(err, ErrNotLeader) {
				t.Fatalf("LeaderMeta on %s: %v", tn.id, err)
			}
			select {
			case <-tn.n.Changed():
			case <-ctx.Done():
				t.Fatalf("%s never learnt the leader", tn.id)
			}
		}
		if id != ld.id || meta != "http://api-of-"+ld.id {
			t.Fatalf("LeaderMeta on %s = %q, %q; want %s's", tn.id, id, meta, ld.id)
		}
	}
	// A connection that names no service is closed, and raft goes on.
	conn, err := net.Dial("tcp", ld.addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte{'X'})
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("an unknown service got %d bytes, %v; want the connection closed", n, err)
	}
	conn.Close()
	d := newNDriver(c, 21)
	d.run(20)
	d.checkWorkloadDidSomething()
}

func TestOpenRefusesMetaPastItsLimit(t *testing.T) {
	_, err := Open(t.TempDir(), NodeOptions{ID: "a", BindAddr: "127.0.0.1:0", Meta: strings.Repeat("m", MaxMetaBytes+1)})
	if !errors.Is(err, ErrNodeOptions) {
		t.Fatalf("Open with a %d-byte Meta = %v, want ErrNodeOptions", MaxMetaBytes+1, err)
	}
}

func TestProposeAnswersEachCommandInOrderAcrossEnvelopes(t *testing.T) {
	c := newTCluster(t, 3)
	ld := c.leader()
	n := MaxEnvelopeCommands + 904 // two envelopes
	var stamped int64
	out, err := ld.n.Propose(boundedCtx(t), func(now int64) [][]byte {
		stamped = now
		datas := make([][]byte, n)
		for i := range datas {
			c := fsm.Command{Kind: fsm.KindAdmit, Now: now, ExecutionID: fmt.Sprint("e", i), WorkflowID: "w"}
			if i == 7 {
				c.ExecutionID = "e0" // a conflict, the command's own answer
			}
			datas[i] = fsm.AppendEncode(nil, &c)
		}
		return datas
	})
	if err != nil || len(out) != n {
		t.Fatalf("Propose = %d outcomes, %v; want %d", len(out), err, n)
	}
	for i, a := range out {
		want := fsm.CodeOK
		if i == 7 {
			want = fsm.CodeConflict
		}
		if a.Err != nil || a.Result.Code != want {
			t.Fatalf("outcome %d = %+v, want code %v", i, a, want)
		}
	}
	ld.n.ReadStale(func(st *fsm.State) {
		if st.Len() != n-1 || st.Meta().Now != stamped {
			t.Fatalf("%d records at time %d, want %d at the stamp %d", st.Len(), st.Meta().Now, n-1, stamped)
		}
	})
	// Nothing to propose submits nothing.
	if out, err := ld.n.Propose(boundedCtx(t), func(int64) [][]byte { return nil }); out != nil || err != nil {
		t.Fatalf("an empty proposal = %v, %v", out, err)
	}
	// A follower calls nothing and refuses.
	for _, tn := range c.running() {
		if tn == ld {
			continue
		}
		called := false
		_, err := tn.n.Propose(boundedCtx(t), func(int64) [][]byte { called = true; return nil })
		if !errors.Is(err, ErrNotLeader) || called {
			t.Fatalf("Propose on a follower = %v (prepare called %v), want ErrNotLeader", err, called)
		}
	}
}
