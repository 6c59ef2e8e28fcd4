package replica

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/wal"
)

// The cluster tests run raft with its in-memory transport and this package's stores on
// temporary directories. Their assertions are about states, never about timing: waiting
// is polling raft's state with a bound (waitFor), and a leader change in the middle of a
// workload is part of the workload (a command whose future fails is retried on the next
// leader, or dropped; only the acknowledged ones are checked).

// waitBound bounds every wait for raft to reach a state.
const waitBound = 20 * time.Second

// waitFor polls cond until it holds, or fails the test after waitBound.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %v: %s", waitBound, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 150 * time.Millisecond
	c.ElectionTimeout = 150 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.SnapshotThreshold = 1 << 40 // snapshots only when a test takes one
	c.SnapshotInterval = time.Hour
	c.TrailingLogs = 16
	c.LogOutput = io.Discard
	c.LogLevel = "ERROR"
	return c
}

// node is one replica: its directory, stores, FSM, transport and raft, while it runs.
type node struct {
	id     raft.ServerID
	addr   raft.ServerAddress
	dir    string
	fsm    *FSM
	logs   *LogStore
	stable *StableStore
	snaps  *raft.FileSnapshotStore
	trans  *raft.InmemTransport
	raft   *raft.Raft
}

type cluster struct {
	t     *testing.T
	nodes []*node
}

// newCluster starts n nodes bootstrapped as one configuration.
func newCluster(t *testing.T, n int) *cluster {
	c := &cluster{t: t}
	var conf raft.Configuration
	for range n {
		nd := c.add()
		conf.Servers = append(conf.Servers, raft.Server{ID: nd.id, Address: nd.addr, Suffrage: raft.Voter})
	}
	for _, nd := range c.nodes {
		c.start(nd, &conf)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd.raft != nil {
				c.stop(nd)
			}
		}
	})
	return c
}

// add makes a node with an empty directory, not started.
func (c *cluster) add() *node {
	i := len(c.nodes)
	nd := &node{id: raft.ServerID(fmt.Sprintf("node-%d", i)), addr: raft.ServerAddress(fmt.Sprintf("mem-%d", i)),
		dir: c.t.TempDir()}
	c.nodes = append(c.nodes, nd)
	return nd
}

// start opens the node's stores from its directory and starts raft; with conf, it first
// bootstraps the cluster's configuration.
func (c *cluster) start(nd *node, conf *raft.Configuration) {
	t := c.t
	t.Helper()
	var err error
	if nd.logs, err = OpenLogStore(filepath.Join(nd.dir, "wal"), wal.Options{SegmentSize: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	if nd.stable, err = OpenStableStore(filepath.Join(nd.dir, "raft"), StableOptions{}); err != nil {
		t.Fatal(err)
	}
	if nd.snaps, err = raft.NewFileSnapshotStore(filepath.Join(nd.dir, "snapshots"), 2, io.Discard); err != nil {
		t.Fatal(err)
	}
	_, nd.trans = raft.NewInmemTransport(nd.addr)
	cfg := testConfig(nd.id)
	if conf != nil {
		if err := raft.BootstrapCluster(cfg, nd.logs, nd.stable, nd.snaps, nd.trans, *conf); err != nil {
			t.Fatal(err)
		}
	}
	nd.fsm = NewFSM(fsm.New(), 0, FSMOptions{})
	if nd.raft, err = raft.NewRaft(cfg, nd.fsm, nd.logs, nd.stable, nd.snaps, nd.trans); err != nil {
		t.Fatal(err)
	}
	for _, other := range c.nodes {
		if other != nd && other.raft != nil {
			c.connect(nd, other)
		}
	}
}

func (c *cluster) connect(a, b *node) {
	a.trans.Connect(b.addr, b.trans)
	b.trans.Connect(a.addr, a.trans)
}

func (c *cluster) disconnect(a, b *node) {
	a.trans.Disconnect(b.addr)
	b.trans.Disconnect(a.addr)
}

// stop shuts raft down and closes the node's stores; its directory stays.
func (c *cluster) stop(nd *node) {
	c.t.Helper()
	if err := nd.raft.Shutdown().Error(); err != nil {
		c.t.Fatalf("shutdown %s: %v", nd.id, err)
	}
	for _, other := range c.nodes {
		if other != nd && other.raft != nil {
			c.disconnect(nd, other)
		}
	}
	nd.raft = nil
	if err := nd.logs.Close(); err != nil {
		c.t.Fatalf("close the log store of %s: %v", nd.id, err)
	}
	if err := nd.stable.Close(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) running() []*node {
	var out []*node
	for _, nd := range c.nodes {
		if nd.raft != nil {
			out = append(out, nd)
		}
	}
	return out
}

// leader waits until exactly one running node is leader, and returns it.
func (c *cluster) leader() *node {
	c.t.Helper()
	var found *node
	waitFor(c.t, "one leader", func() bool {
		found = nil
		for _, nd := range c.running() {
			if nd.raft.State() == raft.Leader {
				if found != nil {
					return false
				}
				found = nd
			}
		}
		return found != nil
	})
	return found
}

// settle waits until every running node applied all the leader committed (a barrier on the
// leader, then each node's applied index reaching the leader's), and returns the leader.
func (c *cluster) settle() *node {
	c.t.Helper()
	var ld *node
	waitFor(c.t, "a barrier on a leader", func() bool {
		ld = c.leader()
		return ld.raft.Barrier(waitBound).Error() == nil
	})
	// raft's AppliedIndex moves when it hands logs to the FSM's goroutine, before the FSM
	// applied them: the FSM's own index says what the state holds. After the barrier, the
	// leader's FSM has applied every log before it.
	want := ld.fsm.Applied()
	for _, nd := range c.running() {
		waitFor(c.t, fmt.Sprintf("%s to apply up to %d", nd.id, want), func() bool {
			return nd.fsm.Applied() >= want
		})
	}
	return ld
}

// identicalStates fails unless every running node's state encodes to the same bytes, and
// returns them.
func (c *cluster) identicalStates() []byte {
	c.t.Helper()
	var want []byte
	var from raft.ServerID
	for _, nd := range c.running() {
		st, _ := nd.fsm.Copy()
		got := stateBytes(c.t, st)
		if want == nil {
			want, from = got, nd.id
			continue
		}
		if !bytes.Equal(got, want) {
			c.t.Fatalf("%s's state (%d bytes) differs from %s's (%d bytes)", nd.id, len(got), from, len(want))
		}
	}
	return want
}

// acked is a command whose Apply future returned nil: raft committed it at index.
type acked struct {
	index  uint64
	data   []byte
	cmd    fsm.Command
	result fsm.Result
}

// driver sends a workload's commands through the current leader and records the
// acknowledged ones.
type driver struct {
	c     *cluster
	w     *workload
	acked []acked
	tries int
}

// run sends n commands, one at a time, each through the leader of the moment. A command
// whose future fails is not retried: its outcome is unknown, as a client's would be.
func (d *driver) run(n int) {
	t := d.c.t
	t.Helper()
	for range n {
		cmd := d.w.next()
		data := encodeCommand(t, &cmd)
		d.tries++
		f := d.c.leader().raft.Apply(data, waitBound)
		if err := f.Error(); err != nil {
			continue
		}
		d.record(f, cmd, data)
	}
}

func (d *driver) record(f raft.ApplyFuture, cmd fsm.Command, data []byte) {
	t := d.c.t
	t.Helper()
	r, ok := f.Response().(fsm.Result)
	if !ok {
		t.Fatalf("log %d (%v): response %#v, want an fsm.Result", f.Index(), cmd.Kind, f.Response())
	}
	d.w.observe(r)
	d.acked = append(d.acked, acked{index: f.Index(), data: data, cmd: cmd, result: r})
}

// checkAcknowledgedPresent fails unless every acknowledged command is on every running node:
// applied, in its log at its index (unless compacted since), and its effect in the state
// (an admission's record exists; an acknowledgement that left its record terminal left it
// so everywhere).
func (d *driver) checkAcknowledgedPresent() {
	t := d.c.t
	t.Helper()
	for _, nd := range d.c.running() {
		first, _ := nd.logs.FirstIndex()
		nd.fsm.View(func(st *fsm.State, applied uint64) {
			for _, a := range d.acked {
				if applied < a.index {
					t.Fatalf("%s applied up to %d, before acknowledged log %d", nd.id, applied, a.index)
				}
				if a.index >= first {
					var l raft.Log
					if err := nd.logs.GetLog(a.index, &l); err != nil || !bytes.Equal(l.Data, a.data) {
						t.Fatalf("%s: log %d = %q, %v; want the acknowledged %v command", nd.id, a.index, l.Data, err, a.cmd.Kind)
					}
				}
				switch {
				case a.cmd.Kind == fsm.KindAdmit:
					if _, ok := st.Get(a.cmd.ExecutionID); !ok {
						t.Fatalf("%s: the acknowledged admission of %s is missing", nd.id, a.cmd.ExecutionID)
					}
				case a.cmd.Kind == fsm.KindAcknowledge && a.result.Code == fsm.CodeOK && a.result.Exec.Status.Terminal():
					// A terminal status never changes again.
					if e, _ := st.Get(a.cmd.ExecutionID); e.Status != a.result.Exec.Status {
						t.Fatalf("%s: %s was acknowledged %v, its status is %v", nd.id, a.cmd.ExecutionID, a.result.Exec.Status, e.Status)
					}
				}
			}
		})
	}
}

// checkWorkloadDidSomething fails unless the acknowledged commands include each kind's
// successes: a test whose claims all came back empty would prove little.
func (d *driver) checkWorkloadDidSomething() {
	t := d.c.t
	t.Helper()
	ok := map[fsm.Kind]int{}
	for _, a := range d.acked {
		if a.result.Code == fsm.CodeOK && (a.cmd.Kind != fsm.KindClaim || len(a.result.Leases) > 0) {
			ok[a.cmd.Kind]++
		}
	}
	for _, k := range []fsm.Kind{fsm.KindAdmit, fsm.KindClaim, fsm.KindAcknowledge, fsm.KindSaveStep, fsm.KindWake, fsm.KindCancel} {
		if ok[k] == 0 {
			t.Fatalf("no acknowledged %v succeeded (of %d acknowledged commands): %v", k, len(d.acked), ok)
		}
	}
	if len(d.acked) < d.tries*3/4 {
		t.Fatalf("only %d of %d commands were acknowledged", len(d.acked), d.tries)
	}
}

func TestThreeReplicasEndInIdenticalStates(t *testing.T) {
	c := newCluster(t, 3)
	d := &driver{c: c, w: newWorkload(1)}
	d.run(300)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
	d.checkWorkloadDidSomething()
}

func TestLeaderKilledMidWorkloadLosesNoAcknowledgedCommand(t *testing.T) {
	c := newCluster(t, 3)
	d := &driver{c: c, w: newWorkload(2)}
	d.run(150)

	// Commands in flight when the leader dies: admissions and wakes, which need no result
	// of another. Those whose future returns nil were committed, and must survive.
	old := c.leader()
	var futures []raft.ApplyFuture
	var cmds []fsm.Command
	for i := range 40 {
		cmd := d.w.admit()
		if i%2 == 1 {
			cmd = fsm.Command{Kind: fsm.KindWake, Now: d.w.now, ExecutionID: cmds[i-1].ExecutionID, At: d.w.now + 1}
		}
		cmds = append(cmds, cmd)
		futures = append(futures, old.raft.Apply(encodeCommand(t, &cmd), waitBound))
		d.tries++
	}
	c.stop(old)
	inFlightAcked := 0
	for i, f := range futures {
		if f.Error() == nil {
			d.record(f, cmds[i], encodeCommand(t, &cmds[i]))
			inFlightAcked++
		}
	}
	t.Logf("%d of %d commands in flight were acknowledged before the leader stopped", inFlightAcked, len(futures))

	if nw := c.leader(); nw == old {
		t.Fatal("the stopped leader is still leader")
	}
	d.run(150)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
	d.checkWorkloadDidSomething()

	// The old leader comes back from its directory and catches up.
	c.start(old, nil)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
}

func TestEveryReplicaRestartedFromItsDirectoryHasTheSameState(t *testing.T) {
	c := newCluster(t, 3)
	d := &driver{c: c, w: newWorkload(3)}
	d.run(200)
	// A snapshot on every node, then more commands: a restart restores the snapshot and
	// replays the log after it.
	for _, nd := range c.running() {
		if err := nd.raft.Snapshot().Error(); err != nil {
			t.Fatalf("snapshot on %s: %v", nd.id, err)
		}
	}
	d.run(60)
	c.settle()
	before := c.identicalStates()

	for _, nd := range c.running() {
		c.stop(nd)
	}
	for _, nd := range c.nodes {
		c.start(nd, nil)
	}
	c.settle()
	if after := c.identicalStates(); !bytes.Equal(after, before) {
		t.Fatalf("after restarting every node the state (%d bytes) differs from before (%d bytes)", len(after), len(before))
	}
	d.checkAcknowledgedPresent()
	d.run(30) // and the cluster goes on
	c.settle()
	c.identicalStates()
}

func TestANodeWithAnEmptyDirectoryCatchesUpFromASnapshot(t *testing.T) {
	c := newCluster(t, 3)
	d := &driver{c: c, w: newWorkload(4)}
	d.run(250)
	ld := c.settle()
	if err := ld.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if first, _ := ld.logs.FirstIndex(); first <= 1 {
		t.Fatalf("the leader's log starts at %d after its snapshot: nothing was compacted", first)
	}

	nd := c.add()
	c.start(nd, nil)
	ld = c.leader()
	if err := ld.raft.AddVoter(nd.id, nd.addr, 0, waitBound).Error(); err != nil {
		t.Fatalf("AddVoter: %v", err)
	}
	d.run(40) // logs after the snapshot, stored after the new node's log restarted
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()

	// It had to install a snapshot: the log's first entries never reached it.
	if first, _ := nd.logs.FirstIndex(); first <= 1 {
		t.Fatalf("the new node's log starts at %d: it did not catch up from a snapshot", first)
	}
	if snaps, err := nd.snaps.List(); err != nil || len(snaps) == 0 {
		t.Fatalf("the new node holds no snapshot (%v)", err)
	}

	// Restarted from its directory, it has the same state.
	c.stop(nd)
	c.start(nd, nil)
	c.settle()
	c.identicalStates()
}

func TestAPartitionedLeaderDropsItsUncommittedLogs(t *testing.T) {
	c := newCluster(t, 3)
	d := &driver{c: c, w: newWorkload(5)}
	d.run(80)
	c.settle()

	// Cut the leader off: what it appends now cannot commit.
	old := c.leader()
	for _, other := range c.running() {
		if other != old {
			c.disconnect(old, other)
		}
	}
	cmd := d.w.admit()
	lost := old.raft.Apply(encodeCommand(t, &cmd), waitBound)
	if err := lost.Error(); err == nil {
		t.Fatal("a partitioned leader committed a command")
	}
	if lost.Index() == 0 {
		t.Fatal("the partitioned leader never appended the command: nothing to truncate")
	}
	var orphan raft.Log
	if err := old.logs.GetLog(lost.Index(), &orphan); err != nil {
		t.Fatalf("the uncommitted log is not in the old leader's log: %v", err)
	}

	// The others elect a leader and commit past that index; then the partition heals.
	var nw *node
	waitFor(t, "a leader among the majority", func() bool {
		for _, nd := range c.running() {
			if nd != old && nd.raft.State() == raft.Leader {
				nw = nd
				return true
			}
		}
		return false
	})
	for range 20 {
		cmd := d.w.next()
		data := encodeCommand(t, &cmd)
		d.tries++
		if f := nw.raft.Apply(data, waitBound); f.Error() == nil {
			d.record(f, cmd, data)
		}
	}
	for _, other := range c.running() {
		if other != old {
			c.connect(old, other)
		}
	}
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()

	var now raft.Log
	if err := old.logs.GetLog(lost.Index(), &now); err != nil {
		t.Fatal(err)
	}
	if now.Term == orphan.Term && bytes.Equal(now.Data, orphan.Data) {
		t.Fatalf("the old leader still holds its uncommitted log %d (term %d)", lost.Index(), orphan.Term)
	}
	old.fsm.View(func(st *fsm.State, _ uint64) {
		if _, ok := st.Get(cmd.ExecutionID); ok {
			t.Fatalf("the uncommitted admission of %s was applied", cmd.ExecutionID)
		}
	})
}

func TestALaggingNodeReplacesItsLogWithASnapshot(t *testing.T) {
	c := newCluster(t, 3)
	d := &driver{c: c, w: newWorkload(6)}
	d.run(60)
	c.settle()

	// A follower stops; the others go on and compact their logs past its end.
	var lagging *node
	for _, nd := range c.running() {
		if nd.raft.State() != raft.Leader {
			lagging = nd
			break
		}
	}
	oldLast, _ := lagging.logs.LastIndex()
	c.stop(lagging)
	d.run(150)
	for _, nd := range c.running() {
		if err := nd.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	ld := c.settle()
	ldFirst, _ := ld.logs.FirstIndex()

	// Restarted, it holds logs the leader no longer has after them: it installs the
	// leader's snapshot, removes its whole log, and starts it again after the snapshot.
	if oldLast+1 >= ldFirst {
		t.Fatalf("the lagging node's log ends at %d and the leader's starts at %d: no snapshot needed", oldLast, ldFirst)
	}
	c.start(lagging, nil)
	d.run(20)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
	if first, _ := lagging.logs.FirstIndex(); first <= oldLast {
		t.Fatalf("the lagging node's log starts at %d, at or before its old end %d: it was not replaced", first, oldLast)
	}
	c.stop(lagging)
	c.start(lagging, nil)
	c.settle()
	c.identicalStates()
}
