package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/wal"
)

// The cluster tests run real Nodes (stamping, the catch-up barrier, NotLeaderError and all),
// each on a temporary directory of its own, with one harness: cluster. By default its
// members talk over raft's in-memory transport with short timeouts, and a test cuts and heals
// single links to make partitions; with clusterOptions.tcp they talk over TCP on 127.0.0.1
// (the node tests and the benchmarks). Assertions are about states, never about timing:
// waiting is polling a state with a bound (waitFor) or waiting on a context with a deadline,
// and a leader change in the middle of a workload is part of the workload (a command that
// fails is not retried: its outcome is unknown, as a client's would be; only the acknowledged
// ones are checked).

// waitBound bounds every wait for raft to reach a state.
const waitBound = 20 * time.Second

// stepDownBound bounds how long a leader cut off from the majority may take to step down on
// the in-memory clusters: 50 of their leader lease timeouts (100ms), a liveness bound, not a
// measurement.
const stepDownBound = 5 * time.Second

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

func boundedCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	t.Cleanup(cancel)
	return ctx
}

// testClock is a member's injected clock: it returns its time and moves on by a
// millisecond, so that stamps differ; set moves it anywhere, backwards included.
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

// clusterOptions says how a cluster's members run.
type clusterOptions struct {
	// tcp runs raft over TCP on 127.0.0.1, ports chosen by the system (a restarted member
	// binds the port it had, which its peers know). Otherwise raft's in-memory transport,
	// whose links a test cuts and heals (disconnect, isolate, heal).
	tcp bool
	// defaults keeps NodeOptions' default timeouts and wal options (the benchmarks) instead
	// of the tests' shorter ones.
	defaults bool
	// tune, when non-nil, adjusts every member's options last.
	tune func(*NodeOptions, *FSMOptions)
	// quiet leaves the FSM's Applied hook unset: no record of applied commands (appliedLog),
	// for runs too large to keep one.
	quiet bool
}

// member is one node of a cluster, running or stopped, with what outlives its restarts: its
// ID, directory, address and clock.
type member struct {
	id    string
	dir   string
	addr  string // in memory: fixed; over TCP: empty until the first start
	clock *testClock
	n     *Node                // nil while stopped
	trans *raft.InmemTransport // in memory, while running

	// restores counts the states the FSM's Restored hook was given beyond each start's first
	// (an empty state): snapshots restored at a start from the member's own directory, and
	// snapshots installed from a leader. restoresAtOpen is the count when Open returned.
	restores       atomic.Int64
	restoresAtOpen int64
	// applied records what the FSM applied since the member's last start.
	applied *appliedLog
}

// installed returns how many snapshots the member restored since Open returned: those a
// leader sent it.
func (m *member) installed() int64 { return m.restores.Load() - m.restoresAtOpen }

type cluster struct {
	t     testing.TB
	opts  clusterOptions
	nodes []*member
	cut   map[[2]string]bool // in memory: the links cut, by the two members' IDs in order
}

// newCluster starts n members on raft's in-memory transport, bootstrapped as one cluster.
func newCluster(t testing.TB, n int) *cluster { return newClusterWith(t, n, clusterOptions{}) }

// newTCluster starts n members over TCP on 127.0.0.1, bootstrapped as one cluster.
func newTCluster(t testing.TB, n int) *cluster {
	return newClusterWith(t, n, clusterOptions{tcp: true})
}

func newClusterWith(t testing.TB, n int, opts clusterOptions) *cluster {
	c := newEmptyCluster(t, opts)
	for range n {
		c.start(c.add())
	}
	var peers []Server
	for _, m := range c.nodes {
		peers = append(peers, Server{ID: m.id, Addr: m.addr, Voter: true})
	}
	for _, m := range c.nodes {
		if err := m.n.Bootstrap(peers); err != nil {
			t.Fatalf("bootstrap %s: %v", m.id, err)
		}
	}
	c.leader()
	return c
}

// newEmptyCluster returns a cluster without members, which closes its running members when
// the test ends.
func newEmptyCluster(t testing.TB, opts clusterOptions) *cluster {
	c := &cluster{t: t, opts: opts, cut: map[[2]string]bool{}}
	// The first TempDir registers the removal of every member's directory; registered
	// before the closing, it runs after it (cleanups run last first), so that no node
	// still runs on a removed directory.
	t.TempDir()
	t.Cleanup(func() {
		for _, m := range c.nodes {
			if m.n != nil {
				_ = m.n.Close()
			}
		}
	})
	return c
}

// add makes a member with an empty directory, not started.
func (c *cluster) add() *member {
	i := len(c.nodes)
	m := &member{id: fmt.Sprintf("n%d", i), dir: c.t.TempDir(), clock: newTestClock(epoch)}
	if !c.opts.tcp {
		m.addr = fmt.Sprintf("mem-%d", i)
	}
	c.nodes = append(c.nodes, m)
	return m
}

func (c *cluster) nodeOptions(m *member) (NodeOptions, FSMOptions) {
	o := NodeOptions{ID: m.id, Clock: m.clock.Now}
	if c.opts.tcp {
		o.BindAddr = m.addr
		if o.BindAddr == "" {
			o.BindAddr = "127.0.0.1:0"
		}
		o.Meta = "http://api-of-" + m.id // told over the raft port (not with a Transport)
	}
	switch {
	case c.opts.defaults:
		o.SnapshotInterval, o.RaftTimeout = time.Hour, 5*time.Second
	case c.opts.tcp:
		o.HeartbeatTimeout, o.ElectionTimeout = 200*time.Millisecond, 200*time.Millisecond
		o.LeaderLeaseTimeout, o.CommitTimeout = 150*time.Millisecond, 5*time.Millisecond
		o.SnapshotInterval, o.RaftTimeout = time.Hour, 5*time.Second
		o.WAL = wal.Options{SegmentSize: 64 << 10}
	default:
		o.HeartbeatTimeout, o.ElectionTimeout = 150*time.Millisecond, 150*time.Millisecond
		o.LeaderLeaseTimeout, o.CommitTimeout = 100*time.Millisecond, 5*time.Millisecond
		o.SnapshotThreshold, o.SnapshotInterval = 1<<40, time.Hour // snapshots only when a test takes one
		o.TrailingLogs = 16                                        // and then they compact nearly the whole log
		o.WAL = wal.Options{SegmentSize: 64 << 10}
	}
	hooks := FSMOptions{Restored: func(*fsm.State) { m.restores.Add(1) }}
	if !c.opts.quiet {
		hooks.Applied = m.applied.record
	}
	if c.opts.tune != nil {
		c.opts.tune(&o, &hooks)
	}
	return o, hooks
}

// start opens the member from its directory; in memory, it is linked to every running
// member whose link is not cut.
func (c *cluster) start(m *member) {
	c.t.Helper()
	m.applied = &appliedLog{}
	opts, hooks := c.nodeOptions(m)
	if !c.opts.tcp {
		_, m.trans = raft.NewInmemTransport(raft.ServerAddress(m.addr))
		opts.Transport = m.trans
		for _, o := range c.running() {
			c.link(m, o)
		}
	}
	m.restores.Add(-1) // Open gives the Restored hook the first, empty state
	n, err := Open(m.dir, opts, hooks)
	if err != nil {
		c.t.Fatalf("open %s: %v", m.id, err)
	}
	m.n, m.addr, m.restoresAtOpen = n, n.Addr(), m.restores.Load()
}

// stop closes the member's node; its directory stays.
func (c *cluster) stop(m *member) {
	c.t.Helper()
	if err := m.n.Close(); err != nil {
		c.t.Fatalf("close %s: %v", m.id, err)
	}
	m.n = nil
	if m.trans != nil {
		for _, o := range c.running() {
			o.trans.Disconnect(raft.ServerAddress(m.addr))
		}
		m.trans = nil
	}
}

// kill stops m as a crash would, on the in-memory transport: its links are cut first, so
// that Close's leadership transfer fails and nothing more leaves it, then the node closes.
// The links are not kept cut: a restart links m again.
func (c *cluster) kill(m *member) {
	c.t.Helper()
	if c.opts.tcp {
		c.t.Fatal("a member is killed only on the in-memory transport")
	}
	for _, o := range c.running() {
		if o != m {
			o.trans.Disconnect(raft.ServerAddress(m.addr))
			m.trans.Disconnect(raft.ServerAddress(o.addr))
		}
	}
	c.stop(m)
}

func (c *cluster) running() []*member {
	var out []*member
	for _, m := range c.nodes {
		if m.n != nil {
			out = append(out, m)
		}
	}
	return out
}

func linkKey(a, b *member) [2]string {
	if a.id > b.id {
		a, b = b, a
	}
	return [2]string{a.id, b.id}
}

// link connects two running members' transports both ways, unless their link is cut.
func (c *cluster) link(a, b *member) {
	if a == b || a.trans == nil || b.trans == nil || c.cut[linkKey(a, b)] {
		return
	}
	a.trans.Connect(raft.ServerAddress(b.addr), b.trans)
	b.trans.Connect(raft.ServerAddress(a.addr), a.trans)
}

// disconnect cuts the link between two members, both ways, until connect or heal; a restart
// does not restore it.
func (c *cluster) disconnect(a, b *member) {
	c.t.Helper()
	if c.opts.tcp {
		c.t.Fatal("links are cut only on the in-memory transport")
	}
	c.cut[linkKey(a, b)] = true
	if a.trans != nil {
		a.trans.Disconnect(raft.ServerAddress(b.addr))
	}
	if b.trans != nil {
		b.trans.Disconnect(raft.ServerAddress(a.addr))
	}
}

func (c *cluster) connect(a, b *member) {
	delete(c.cut, linkKey(a, b))
	c.link(a, b)
}

// isolate cuts every link of m.
func (c *cluster) isolate(m *member) {
	c.t.Helper()
	for _, o := range c.nodes {
		if o != m {
			c.disconnect(m, o)
		}
	}
}

// heal restores every cut link.
func (c *cluster) heal() {
	for _, a := range c.nodes {
		for _, b := range c.nodes {
			if a.id < b.id {
				c.connect(a, b)
			}
		}
	}
}

// leader waits until exactly one running member is leader, and returns it.
func (c *cluster) leader() *member {
	c.t.Helper()
	var found *member
	waitFor(c.t, "one leader", func() bool {
		found = nil
		for _, m := range c.running() {
			if m.n.State() == raft.Leader {
				if found != nil {
					return false
				}
				found = m
			}
		}
		return found != nil
	})
	return found
}

// leaderAmong waits until one of the given running members is leader, and returns it.
func (c *cluster) leaderAmong(ms ...*member) *member {
	c.t.Helper()
	var found *member
	waitFor(c.t, "a leader among "+memberIDs(ms), func() bool {
		for _, m := range ms {
			if m.n.State() == raft.Leader {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

func memberIDs(ms []*member) string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.id)
	}
	return fmt.Sprint(ids)
}

// follower returns a running member that is not the leader and knows the leader.
func (c *cluster) follower() *member {
	c.t.Helper()
	var found *member
	waitFor(c.t, "a follower that knows the leader", func() bool {
		for _, m := range c.running() {
			if id, _ := m.n.Leader(); m.n.State() == raft.Follower && id != "" && id != m.id {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// settle waits until every running member applied all that a leader committed (a barrier on
// the leader, then each member's FSM reaching the leader's applied index), and returns the
// leader.
func (c *cluster) settle() *member {
	c.t.Helper()
	var ld *member
	waitFor(c.t, "a barrier on a leader", func() bool {
		ld = c.leader()
		return ld.n.raft.Barrier(waitBound).Error() == nil
	})
	// raft's AppliedIndex moves when it hands logs to the FSM's goroutine, before the FSM
	// applied them: the FSM's own index says what the state holds. After the barrier, the
	// leader's FSM has applied every log before it.
	want := ld.n.fsm.Applied()
	for _, m := range c.running() {
		if err := m.n.fsm.WaitApplied(boundedCtx(c.t), want); err != nil {
			c.t.Fatalf("%s: %v", m.id, err)
		}
	}
	return ld
}

// identicalStates fails unless every running member's state encodes to the same bytes, and
// returns them.
func (c *cluster) identicalStates() []byte {
	c.t.Helper()
	var want []byte
	var from string
	for _, m := range c.running() {
		st, _ := m.n.fsm.Copy()
		got := stateBytes(c.t, st)
		if want == nil {
			want, from = got, m.id
			continue
		}
		if !bytes.Equal(got, want) {
			c.t.Fatalf("%s's state (%d bytes) differs from %s's (%d bytes)", m.id, len(got), from, len(want))
		}
	}
	return want
}

// appliedLog records, through the FSM's Applied hook, every command a member's FSM applied
// since its last start, in order, with what its result did to leases (leaseEvent).
type appliedLog struct {
	mu     sync.Mutex
	events []leaseEvent
}

func (a *appliedLog) record(cmds []fsm.Command, results []fsm.Result) {
	evs := make([]leaseEvent, len(cmds))
	for i := range cmds {
		evs[i] = newLeaseEvent(&cmds[i], &results[i])
	}
	a.mu.Lock()
	a.events = append(a.events, evs...)
	a.mu.Unlock()
}

// waitRecorded waits until the log recorded n commands: the hook runs after the FSM's
// applied index moved, so a member settled on an index may not have recorded its last
// batch yet.
func (a *appliedLog) waitRecorded(t testing.TB, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d commands recorded", n), func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.events) >= n
	})
}

func (a *appliedLog) all() []leaseEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.events)
}

// leaseEvent is what one applied command did to leases, in the order of the log: the
// leases it granted (a claim) or renewed, and the leases it ended (an acknowledgement or a
// release of the current lease). data is the command's encoding, so that two members'
// records compare whole.
type leaseEvent struct {
	data    []byte
	kind    fsm.Kind
	now     int64
	granted []fsm.Lease
	renewed bool
	ended   []fsm.Lease // ExecutionID and Token
}

// newLeaseEvent copies what a leaseEvent needs from an applied command and its result (the
// FSM's Applied hook must not keep them).
func newLeaseEvent(c *fsm.Command, r *fsm.Result) leaseEvent {
	ev := leaseEvent{data: fsm.AppendEncode(nil, c), kind: c.Kind, now: c.Now}
	end := func(id string, token uint64, r *fsm.Result) {
		if r.Code == fsm.CodeOK && !r.Unchanged {
			ev.ended = append(ev.ended, fsm.Lease{ExecutionID: id, Token: token})
		}
	}
	switch c.Kind {
	case fsm.KindClaim:
		ev.granted = slices.Clone(r.Leases)
	case fsm.KindRenew:
		if r.Code == fsm.CodeOK {
			ev.granted, ev.renewed = []fsm.Lease{r.Lease}, true
		}
	case fsm.KindRelease, fsm.KindAcknowledge:
		end(c.ExecutionID, c.Token, r)
	case fsm.KindAcknowledgeBatch:
		for i := range r.Acks {
			end(c.Acks[i].ExecutionID, c.Acks[i].Token, &r.Acks[i])
		}
	}
	return ev
}

// ackedCmd is a command a node answered without an error: its log index, the command as
// submitted (the log holds it stamped) and its result.
type ackedCmd struct {
	index  uint64
	cmd    fsm.Command
	result fsm.Result
}

// driver sends a workload through the leader of the moment with Node.ApplyBatch and checks
// what it can as it goes: a lease token of an execution is always above every token that
// execution had before.
type driver struct {
	c        *cluster
	w        *workload
	acked    []ackedCmd
	tries    int
	maxToken map[string]uint64
}

func newDriver(c *cluster, seed uint64) *driver {
	return &driver{c: c, w: newWorkload(seed), maxToken: map[string]uint64{}}
}

// next is the workload's next command, or now and then an acknowledge-batch of two leases.
func (d *driver) next() fsm.Command {
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

// run sends n commands one at a time, each through the leader of the moment. A command that
// fails is not retried.
func (d *driver) run(n int) {
	d.c.t.Helper()
	for range n {
		d.apply(d.c.leader(), d.next())
	}
}

// apply sends one command through m and records it if it is acknowledged; it returns the
// command's outcome, or the error of a command not submitted.
func (d *driver) apply(m *member, cmd fsm.Command) (Applied, error) {
	t := d.c.t
	t.Helper()
	d.tries++
	out, err := m.n.ApplyBatch(boundedCtx(t), []*fsm.Command{&cmd})
	if errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("the workload made an invalid %v: %v", cmd.Kind, err)
	}
	if err != nil {
		return Applied{}, err
	}
	if out[0].Err == nil {
		d.record(cmd, out[0])
	}
	return out[0], nil
}

// claimAll claims every claimable execution for duration (in stamped time) through the
// leader of the moment (trying up to five times), and returns the leases.
func (d *driver) claimAll(duration time.Duration) []fsm.Lease {
	t := d.c.t
	t.Helper()
	for range 5 {
		a, err := d.apply(d.c.leader(), fsm.Command{Kind: fsm.KindClaim, Limit: 1000, Duration: int64(duration)})
		if err == nil && a.Err == nil {
			return a.Result.Leases
		}
	}
	t.Fatal("five claims in a row failed")
	return nil
}

// leaseOf returns id's lease among leases, or fails the test.
func leaseOf(t testing.TB, leases []fsm.Lease, id string) fsm.Lease {
	t.Helper()
	for _, l := range leases {
		if l.ExecutionID == id {
			return l
		}
	}
	t.Fatalf("%s is not among the %d leases granted", id, len(leases))
	return fsm.Lease{}
}

// record notes an acknowledged command; concurrent callers' commands must be recorded in
// log order (of their indexes).
func (d *driver) record(cmd fsm.Command, a Applied) {
	t := d.c.t
	t.Helper()
	if a.Index == 0 {
		t.Fatalf("the acknowledged %v has no log index", cmd.Kind)
	}
	for _, l := range a.Result.Leases {
		if l.Token <= d.maxToken[l.ExecutionID] {
			t.Fatalf("%s was leased with token %d after token %d", l.ExecutionID, l.Token, d.maxToken[l.ExecutionID])
		}
		d.maxToken[l.ExecutionID] = l.Token
	}
	d.w.observe(a.Result)
	d.acked = append(d.acked, ackedCmd{index: a.Index, cmd: cmd, result: a.Result})
}

// checkAcknowledgedPresent fails unless every acknowledged command is on every running
// member: applied, in its log at its index (unless compacted since) as submitted but for its
// stamped time, and its effect in the state (an admission's record exists; an
// acknowledgement that left its record terminal left it so everywhere).
func (d *driver) checkAcknowledgedPresent() {
	t := d.c.t
	t.Helper()
	for _, m := range d.c.running() {
		first, _ := m.n.logs.FirstIndex()
		m.n.fsm.View(func(st *fsm.State, applied uint64) {
			for _, a := range d.acked {
				if applied < a.index {
					t.Fatalf("%s applied up to %d, before acknowledged log %d", m.id, applied, a.index)
				}
				if a.index >= first {
					checkLogged(t, m, a)
				}
				checkEffect(t, m, st, a)
			}
		})
	}
}

// checkLogged fails unless m's log holds a's command, stamped, at a's index.
func checkLogged(t testing.TB, m *member, a ackedCmd) {
	t.Helper()
	var l raft.Log
	if err := m.n.logs.GetLog(a.index, &l); err != nil {
		t.Fatalf("%s: the acknowledged %v command's log %d: %v", m.id, a.cmd.Kind, a.index, err)
	}
	var logged fsm.Command
	if err := fsm.DecodeInto(&logged, l.Data); err != nil {
		t.Fatalf("%s: log %d: %v", m.id, a.index, err)
	}
	want := a.cmd
	want.Now = logged.Now
	if logged.Now <= 0 || !bytes.Equal(l.Data, fsm.AppendEncode(nil, &want)) {
		t.Fatalf("%s: log %d holds a %v command stamped %d; want the acknowledged %v command", m.id, a.index,
			logged.Kind, logged.Now, a.cmd.Kind)
	}
}

// checkEffect fails unless st shows a's effect: an admitted record, a terminal outcome.
func checkEffect(t testing.TB, m *member, st *fsm.State, a ackedCmd) {
	t.Helper()
	terminal := func(id string, want fsm.Status) {
		if e, _ := st.Get(id); e.Status != want {
			t.Fatalf("%s: %s was acknowledged %v, its status is %v", m.id, id, want, e.Status)
		}
	}
	switch a.cmd.Kind {
	case fsm.KindAdmit:
		if _, ok := st.Get(a.cmd.ExecutionID); !ok {
			t.Fatalf("%s: the acknowledged admission of %s is missing", m.id, a.cmd.ExecutionID)
		}
	case fsm.KindAcknowledge:
		// A terminal status never changes again.
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

// checkWorkloadDidSomething fails unless the acknowledged commands include each kind's
// successes, and most commands were acknowledged: a test whose claims all came back empty
// would prove little.
func (d *driver) checkWorkloadDidSomething() {
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

// checkStampsNeverGoBack fails unless the command logs of a member's log have stamped times
// that never decrease, and returns how many it read.
func checkStampsNeverGoBack(t testing.TB, m *member) int {
	t.Helper()
	first, _ := m.n.logs.FirstIndex()
	last, _ := m.n.logs.LastIndex()
	var prev int64
	n := 0
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		if err := m.n.logs.GetLog(i, &l); err != nil {
			t.Fatalf("%s: log %d: %v", m.id, i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		var c fsm.Command
		if err := fsm.DecodeInto(&c, l.Data); err != nil {
			t.Fatalf("%s: log %d: %v", m.id, i, err)
		}
		if c.Now < prev {
			t.Fatalf("%s: log %d (%v) is stamped %d, before the previous command's %d", m.id, i, c.Kind, c.Now, prev)
		}
		prev = c.Now
		n++
	}
	return n
}

// The in-memory cluster tests.

func TestThreeReplicasEndInIdenticalStates(t *testing.T) {
	c := newCluster(t, 3)
	d := newDriver(c, 1)
	d.run(300)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
	d.checkWorkloadDidSomething()
}

func TestLeaderKilledMidWorkloadLosesNoAcknowledgedCommand(t *testing.T) {
	c := newCluster(t, 3)
	d := newDriver(c, 2)
	d.run(150)

	// Commands in flight when the leader dies: admissions and wakes, which need no result
	// of another. Those answered without an error were committed, and must survive.
	old := c.leader()
	var cmds []*fsm.Command
	for i := range 40 {
		cmd := d.w.admit()
		if i%2 == 1 {
			cmd = fsm.Command{Kind: fsm.KindWake, ExecutionID: cmds[i-1].ExecutionID, At: d.w.now + 1}
		}
		cmds = append(cmds, &cmd)
	}
	d.tries += len(cmds)
	ctx, n, base := boundedCtx(t), old.n, old.n.raft.LastIndex()
	var out []Applied
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, err = n.ApplyBatch(ctx, cmds)
	}()
	waitFor(t, "the commands in the leader's log", func() bool {
		select {
		case <-done:
			return true
		default:
			return n.raft.LastIndex() >= base+uint64(len(cmds))
		}
	})
	c.kill(old)
	<-done
	inFlightAcked := 0
	if err == nil {
		for i, a := range out {
			if a.Err == nil {
				d.record(*cmds[i], a)
				inFlightAcked++
			}
		}
	}
	t.Logf("%d of %d commands in flight were acknowledged before the leader was killed (%v)", inFlightAcked, len(cmds), err)

	if nw := c.leader(); nw == old {
		t.Fatal("the killed leader is still leader")
	}
	d.run(150)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
	d.checkWorkloadDidSomething()

	// The old leader comes back from its directory and catches up.
	c.start(old)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
}

func TestEveryReplicaRestartedFromItsDirectoryHasTheSameState(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(testing.TB, int) *cluster
		seed  uint64
	}{{"in memory", newCluster, 3}, {"over TCP", newTCluster, 14}} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.start(t, 3)
			d := newDriver(c, tc.seed)
			d.run(200)
			// A snapshot on every node, then more commands: a restart restores the
			// snapshot and replays the log after it.
			for _, m := range c.running() {
				if err := m.n.raft.Snapshot().Error(); err != nil {
					t.Fatalf("snapshot on %s: %v", m.id, err)
				}
			}
			d.run(60)
			c.settle()
			before := c.identicalStates()

			for _, m := range c.running() {
				c.stop(m)
			}
			for _, m := range c.nodes {
				c.start(m)
				if err := m.n.Bootstrap([]Server{{ID: m.id, Addr: m.addr, Voter: true}}); !errors.Is(err, ErrBootstrapped) {
					t.Fatalf("Bootstrap on a reopened %s = %v, want ErrBootstrapped", m.id, err)
				}
			}
			c.settle()
			if after := c.identicalStates(); !bytes.Equal(after, before) {
				t.Fatalf("after restarting every node the state (%d bytes) differs from before (%d bytes)", len(after), len(before))
			}
			d.checkAcknowledgedPresent()
			d.run(30) // and the cluster goes on
			c.settle()
			c.identicalStates()
		})
	}
}

func TestANodeWithAnEmptyDirectoryCatchesUpFromASnapshot(t *testing.T) {
	c := newCluster(t, 3)
	d := newDriver(c, 4)
	d.run(250)
	ld := c.settle()
	if err := ld.n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if first, _ := ld.n.logs.FirstIndex(); first <= 1 {
		t.Fatalf("the leader's log starts at %d after its snapshot: nothing was compacted", first)
	}

	m := c.add()
	c.start(m)
	if err := c.leader().n.AddVoter(boundedCtx(t), m.id, m.addr); err != nil {
		t.Fatalf("AddVoter: %v", err)
	}
	d.run(40) // logs after the snapshot, stored after the new node's log restarted
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()

	// It had to install a snapshot: the log's first entries never reached it.
	if first, _ := m.n.logs.FirstIndex(); first <= 1 {
		t.Fatalf("the new node's log starts at %d: it did not catch up from a snapshot", first)
	}
	if snaps, err := m.n.snaps.List(); err != nil || len(snaps) == 0 {
		t.Fatalf("the new node holds no snapshot (%v)", err)
	}
	if m.installed() == 0 {
		t.Fatal("the new node's FSM restored no snapshot")
	}

	// Restarted from its directory, it has the same state.
	c.stop(m)
	c.start(m)
	c.settle()
	c.identicalStates()
}

func TestALeaderCutOffFromTheMajorityStepsDownAndDropsItsUncommittedLogs(t *testing.T) {
	c := newCluster(t, 3)
	d := newDriver(c, 5)
	d.run(80)
	// One execution leased before the partition, for an hour, and never ended: the claim
	// that takes every claimable execution once the clocks passed that hour must lease it
	// again, with a higher token.
	held := fsm.Command{Kind: fsm.KindAdmit, ExecutionID: "held", WorkflowID: "wf"}
	if a, err := d.apply(c.leader(), held); err != nil || a.Err != nil {
		t.Fatalf("admission of %s: %v, %v", held.ExecutionID, err, a.Err)
	}
	heldToken := leaseOf(t, d.claimAll(time.Hour), held.ExecutionID).Token
	d.w.leases = slices.DeleteFunc(d.w.leases, func(l fsm.Lease) bool { return l.ExecutionID == held.ExecutionID })
	c.settle()

	// Cut the leader off: a write it takes now cannot commit, and its outcome is uncertain
	// to the caller. The leader must still be leader when the write reaches it; when it
	// stepped down first (a slow test machine), the partition heals and is made again.
	var old *member
	var cmd fsm.Command
	var lost Applied
	for round := 0; ; round++ {
		old = c.leader()
		c.isolate(old)
		cmd = d.w.admit()
		d.tries++
		ctx, cancel := context.WithTimeout(context.Background(), stepDownBound)
		out, err := old.n.ApplyBatch(ctx, []*fsm.Command{&cmd})
		cancel()
		var nl *NotLeaderError
		if err == nil && (!errors.As(out[0].Err, &nl) || nl.Uncertain) {
			lost = out[0]
			break
		}
		// Refused, or taken but stepped down on before it was appended (raft answers the
		// commands in its queue ErrNotLeader): certain, nothing logged.
		if err == nil {
			err = out[0].Err
		}
		if !errors.As(err, &nl) || nl.Uncertain {
			t.Fatalf("a write on a leader that stepped down = %v, want a certain *NotLeaderError", err)
		}
		if round == 4 {
			t.Fatal("five times the cut-off leader stepped down before a write reached it")
		}
		c.heal()
		c.settle()
	}
	// Within the bound of its context, the write failed: the leader stepped down.
	if errors.Is(lost.Err, context.DeadlineExceeded) {
		t.Fatalf("the cut-off leader did not step down within %v", stepDownBound)
	}
	var nl *NotLeaderError
	if !errors.As(lost.Err, &nl) || !errors.Is(lost.Err, ErrNotLeader) || !nl.Uncertain {
		t.Fatalf("a write on a leader cut off from the majority = %v, want an uncertain *NotLeaderError", lost.Err)
	}
	if st := old.n.State(); st == raft.Leader {
		t.Fatal("the cut-off leader still leads after its write failed")
	}
	if lost.Index == 0 {
		t.Fatal("the cut-off leader never appended the command: nothing to truncate")
	}
	var orphan raft.Log
	if err := old.n.logs.GetLog(lost.Index, &orphan); err != nil {
		t.Fatalf("the uncommitted log is not in the old leader's log: %v", err)
	}
	// Now it refuses writes before submitting them, and linearizable reads.
	last := old.n.raft.LastIndex()
	refused := d.w.admit()
	if _, err := old.n.Apply(boundedCtx(t), &refused); !errors.As(err, &nl) || nl.Uncertain {
		t.Fatalf("a write on the deposed leader = %v, want a certain *NotLeaderError", err)
	}
	if err := old.n.Read(boundedCtx(t), func(*fsm.State) {}); !errors.As(err, &nl) {
		t.Fatalf("a read on the deposed leader = %v, want a *NotLeaderError", err)
	}
	if got := old.n.raft.LastIndex(); got != last {
		t.Fatalf("the refused write reached the deposed leader's log: last index %d, was %d", got, last)
	}

	// The others elect a leader whose clock is an hour behind the state's time, and commit
	// past that index: time and tokens go forward.
	var majority []*member
	for _, m := range c.running() {
		if m != old {
			majority = append(majority, m)
			m.clock.set(epoch.Add(-time.Hour))
		}
	}
	nw := c.leaderAmong(majority...)
	var stamped int64
	nw.n.ReadStale(func(st *fsm.State) { stamped = st.Meta().Now })
	if behind := nw.clock.Now().UnixNano(); behind >= stamped {
		t.Fatalf("the new leader's clock (%d) is not behind the state's time (%d): the test proves nothing", behind, stamped)
	}
	d.run(30)
	for _, m := range c.nodes {
		m.clock.set(epoch.Add(2 * time.Hour)) // leases granted before expire, and are granted again
	}
	if again := leaseOf(t, d.claimAll(time.Millisecond), held.ExecutionID); again.Token <= heldToken {
		t.Fatalf("%s was leased with token %d after the partition, %d before it", held.ExecutionID, again.Token, heldToken)
	}
	d.run(30)

	// The partition heals: the old leader follows, and drops its uncommitted log.
	c.heal()
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
	for _, m := range c.running() {
		checkStampsNeverGoBack(t, m)
	}
	if id, _ := old.n.Leader(); old.n.State() != raft.Follower || id == "" || id == old.id {
		t.Fatalf("after the heal the old leader is %v and knows leader %q, want a follower of another", old.n.State(), id)
	}
	var now raft.Log
	if err := old.n.logs.GetLog(lost.Index, &now); err != nil {
		t.Fatal(err)
	}
	if now.Term == orphan.Term && bytes.Equal(now.Data, orphan.Data) {
		t.Fatalf("the old leader still holds its uncommitted log %d (term %d)", lost.Index, orphan.Term)
	}
	old.n.ReadStale(func(st *fsm.State) {
		for _, id := range []string{cmd.ExecutionID, refused.ExecutionID} {
			if _, ok := st.Get(id); ok {
				t.Fatalf("the admission of %s, never committed, was applied", id)
			}
		}
	})
}

func TestALaggingNodeReplacesItsLogWithASnapshot(t *testing.T) {
	c := newCluster(t, 3)
	d := newDriver(c, 6)
	d.run(60)
	c.settle()

	// A follower stops; the others go on and compact their logs past its end.
	lagging := c.follower()
	oldLast, _ := lagging.n.logs.LastIndex()
	c.stop(lagging)
	d.run(150)
	for _, m := range c.running() {
		if err := m.n.raft.Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	ld := c.settle()
	ldFirst, _ := ld.n.logs.FirstIndex()

	// Restarted, it holds logs the leader no longer has after them: it installs the
	// leader's snapshot, removes its whole log, and starts it again after the snapshot.
	if oldLast+1 >= ldFirst {
		t.Fatalf("the lagging node's log ends at %d and the leader's starts at %d: no snapshot needed", oldLast, ldFirst)
	}
	c.start(lagging)
	d.run(20)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
	if first, _ := lagging.n.logs.FirstIndex(); first <= oldLast {
		t.Fatalf("the lagging node's log starts at %d, at or before its old end %d: it was not replaced", first, oldLast)
	}
	if lagging.installed() == 0 {
		t.Fatal("the lagging node's FSM restored no snapshot from the leader")
	}
	c.stop(lagging)
	c.start(lagging)
	c.settle()
	c.identicalStates()
}
