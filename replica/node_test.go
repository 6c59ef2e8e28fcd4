package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/vfs"
)

// The node tests run Nodes over TCP on 127.0.0.1 (the cluster harness of cluster_test.go with
// clusterOptions.tcp), and test what a Node refuses and how it answers its callers; a test
// that blocks raft's log writes runs one node in memory.

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
			n, err := Open(dir, tc.opts, FSMOptions{})
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
	d := newDriver(c, 11)
	d.run(250)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
	d.checkWorkloadDidSomething()
	for _, m := range c.running() {
		if n := checkStampsNeverGoBack(t, m); n < len(d.acked) {
			t.Fatalf("%s holds %d command logs, fewer than the %d acknowledged", m.id, n, len(d.acked))
		}
		// A running cluster's node is never bootstrapped again.
		if err := m.n.Bootstrap([]Server{{ID: m.id, Addr: m.addr, Voter: true}}); !errors.Is(err, ErrBootstrapped) {
			t.Fatalf("Bootstrap on %s = %v, want ErrBootstrapped", m.id, err)
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
	for _, m := range c.nodes {
		named = named || (m != f && m.id == nl.LeaderID && m.addr == nl.LeaderAddr)
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
	for _, m := range c.running() {
		m.n.ReadStale(func(st *fsm.State) {
			if st.Len() != len(cmds) {
				t.Fatalf("%s holds %d executions, want %d", m.id, st.Len(), len(cmds))
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
	d := newDriver(c, 12)
	old := c.leader()
	// The first leader's clock runs an hour ahead of the others.
	old.clock.set(epoch.Add(time.Hour))
	d.run(120)
	// One execution leased for a minute before the failover and never ended: once the
	// clocks pass that minute, the claim that takes every claimable execution must lease it
	// again, with a higher token.
	held := fsm.Command{Kind: fsm.KindAdmit, ExecutionID: "held", WorkflowID: "wf"}
	if a, err := d.apply(c.leader(), held); err != nil || a.Err != nil {
		t.Fatalf("admission of %s: %v, %v", held.ExecutionID, err, a.Err)
	}
	heldToken := leaseOf(t, d.claimAll(time.Minute), held.ExecutionID).Token
	d.w.leases = slices.DeleteFunc(d.w.leases, func(l fsm.Lease) bool { return l.ExecutionID == held.ExecutionID })

	// Commands in flight when the leader stops, each from a caller of its own; those
	// answered are recorded afterwards, in log order.
	var wg sync.WaitGroup
	oldNode, ctx := old.n, boundedCtx(t)
	cmds := make([]fsm.Command, 30)
	outs := make([]Applied, len(cmds))
	for i := range cmds {
		cmds[i] = d.w.admit()
		if i%3 == 2 {
			cmds[i] = fsm.Command{Kind: fsm.KindClaim, Limit: 2, Duration: 30_000}
		}
		d.tries++
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := oldNode.ApplyBatch(ctx, []*fsm.Command{&cmds[i]})
			if err == nil {
				outs[i] = out[0]
			} else {
				outs[i].Err = err
			}
		}()
	}
	c.stop(old)
	wg.Wait()
	var order []int
	for i, a := range outs {
		if a.Err == nil {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(outs[a].Index, outs[b].Index) })
	for _, i := range order {
		d.record(cmds[i], outs[i])
	}
	var stamped int64
	for _, m := range c.running() {
		m.n.ReadStale(func(st *fsm.State) { stamped = max(stamped, st.Meta().Now) })
	}

	nw := c.leader()
	if nw == old {
		t.Fatal("the stopped leader is still leader")
	}
	if behind := nw.clock.Now().UnixNano(); behind >= stamped {
		t.Fatalf("the new leader's clock (%d) is not behind the state's time (%d): the test proves nothing", behind, stamped)
	}
	d.run(60)
	// Time stands still while the leader's clock is behind the state's; once the clocks
	// pass it, leases granted before the failover expire and are granted again.
	for _, m := range c.running() {
		m.clock.set(epoch.Add(2 * time.Hour))
	}
	if again := leaseOf(t, d.claimAll(time.Millisecond), held.ExecutionID); again.Token <= heldToken {
		t.Fatalf("%s was leased with token %d after the failover, %d before it", held.ExecutionID, again.Token, heldToken)
	}
	d.run(60)
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()
	d.checkWorkloadDidSomething()
	for _, m := range c.running() {
		checkStampsNeverGoBack(t, m)
	}

	// The old leader resumes from its directory, catches up, and agrees.
	c.start(old)
	c.settle()
	c.identicalStates()
	checkStampsNeverGoBack(t, old)
}

func TestMembershipAddsAFourthNodeAndRemovesOne(t *testing.T) {
	c := newTCluster(t, 3)
	d := newDriver(c, 13)
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
	var gone *member
	for _, m := range c.running() {
		if m != nw && m.n.State() != raft.Leader {
			gone = m
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

func TestAClosedNodeRefusesEverything(t *testing.T) {
	c := newTCluster(t, 1)
	m := c.nodes[0]
	n := m.n
	c.stop(m)
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
	c := newEmptyCluster(t, clusterOptions{tcp: true})
	m := c.add()
	c.start(m)
	for _, tc := range []struct {
		name  string
		peers []Server
	}{
		{"no peers", nil},
		{"peers without this node", []Server{{ID: "other", Addr: "127.0.0.1:1", Voter: true}}},
		{"a peer without an address", []Server{{ID: m.id, Voter: true}}},
	} {
		if err := m.n.Bootstrap(tc.peers); !errors.Is(err, ErrNodeOptions) {
			t.Fatalf("%s: Bootstrap = %v, want ErrNodeOptions", tc.name, err)
		}
	}
	if err := m.n.Bootstrap([]Server{{ID: m.id, Addr: m.addr, Voter: true}}); err != nil {
		t.Fatalf("Bootstrap after the refused ones: %v", err)
	}
	if id, addr, err := m.n.WaitLeader(boundedCtx(t)); err != nil || id != m.id || addr != m.addr {
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

func TestCallersWaitingWhenTheNodeClosesGetErrNodeClosed(t *testing.T) {
	// The leader's log write blocks while armed, holding raft's leader loop: commands
	// submitted meanwhile wait in raft's apply queue, which raft does not answer when it
	// shuts down.
	var armed atomic.Bool
	entered, release := make(chan struct{}, 1), make(chan struct{})
	c := newClusterWith(t, 1, clusterOptions{tune: func(o *NodeOptions, _ *FSMOptions) {
		o.WAL.FS = vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
			if armed.Load() && op.Kind == vfs.OpWrite && filepath.Base(filepath.Dir(op.Path)) == "wal" {
				select {
				case entered <- struct{}{}:
				default:
				}
				<-release
			}
			return nil
		})
	}})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	m := c.leader()
	n := m.n
	w := newWorkload(1)
	first := w.admit()
	if _, err := n.Apply(boundedCtx(t), &first); err != nil { // this term's barrier, before the write blocks
		t.Fatal(err)
	}
	armed.Store(true)

	// Callers without a deadline: one whose command is in the blocked write, then a batch
	// queued behind it.
	blockedErr, batchErr := make(chan error, 1), make(chan error, 1)
	blocked := w.admit()
	go func() {
		_, err := n.Apply(context.Background(), &blocked)
		blockedErr <- err
	}()
	select {
	case <-entered:
	case <-time.After(waitBound):
		t.Fatal("the leader's log write never started")
	}
	var queued []*fsm.Command
	for range 10 {
		cmd := w.admit()
		queued = append(queued, &cmd)
	}
	n.stampMu.Lock()
	stamp := n.lastStamp
	n.stampMu.Unlock()
	var outs []Applied
	go func() {
		var err error
		outs, err = n.ApplyBatch(context.Background(), queued)
		batchErr <- err
	}()
	waitFor(t, "the batch submitted", func() bool {
		n.stampMu.Lock()
		defer n.stampMu.Unlock()
		return n.lastStamp > stamp // set under the lock that covers the submission
	})

	closed := make(chan error, 1)
	go func() { closed <- n.Close() }()
	for _, tc := range []struct {
		name string
		errc chan error
		want error
	}{
		{"the caller of the blocked write", blockedErr, ErrNodeClosed},
		{"the caller of the queued batch", batchErr, nil}, // each command's outcome below
	} {
		select {
		case err := <-tc.errc:
			if !errors.Is(err, tc.want) {
				t.Fatalf("%s got %v, want %v", tc.name, err, tc.want)
			}
		case <-time.After(waitBound):
			t.Fatalf("%s still waits %v after Close", tc.name, waitBound)
		}
	}
	for i, a := range outs {
		if !errors.Is(a.Err, ErrNodeClosed) || a.Index != 0 {
			t.Fatalf("queued command %d: %+v, want ErrNodeClosed with no index", i, a)
		}
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	m.n = nil
}

func TestEveryNodeTellsItsMetaOnItsRaftPortAndFollowersFindTheLeaders(t *testing.T) {
	c := newTCluster(t, 3)
	ld := c.leader()
	ctx := boundedCtx(t)
	for _, m := range c.nodes {
		meta, err := PeerMeta(ctx, m.addr)
		if err != nil || meta != "http://api-of-"+m.id {
			t.Fatalf("PeerMeta(%s) = %q, %v", m.id, meta, err)
		}
		var id string
		for {
			if id, meta, err = m.n.LeaderMeta(ctx); err == nil {
				break
			}
			if !errors.Is(err, ErrNotLeader) {
				t.Fatalf("LeaderMeta on %s: %v", m.id, err)
			}
			select {
			case <-m.n.Changed():
			case <-ctx.Done():
				t.Fatalf("%s never learnt the leader", m.id)
			}
		}
		if id != ld.id || meta != "http://api-of-"+ld.id {
			t.Fatalf("LeaderMeta on %s = %q, %q; want %s's", m.id, id, meta, ld.id)
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
	d := newDriver(c, 21)
	d.run(20)
	d.checkWorkloadDidSomething()
}

func TestOpenRefusesMetaPastItsLimit(t *testing.T) {
	_, err := Open(t.TempDir(), NodeOptions{ID: "a", BindAddr: "127.0.0.1:0", Meta: strings.Repeat("m", MaxMetaBytes+1)}, FSMOptions{})
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
	// Nothing to propose submits nothing. Asked of the leader of the moment:
	// on a loaded machine the two envelopes above can cost the first one its
	// leadership (a missed heartbeat), which is no failure of Propose.
	for try := 0; ; try++ {
		ld = c.leader()
		out, err := ld.n.Propose(boundedCtx(t), func(int64) [][]byte { return nil })
		if errors.Is(err, ErrNotLeader) && try < 5 {
			continue
		}
		if out != nil || err != nil {
			t.Fatalf("an empty proposal = %v, %v", out, err)
		}
		break
	}
	// A follower calls nothing and refuses.
	for _, m := range c.running() {
		if m == ld {
			continue
		}
		called := false
		_, err := m.n.Propose(boundedCtx(t), func(int64) [][]byte { called = true; return nil })
		if m.n.State() == raft.Leader {
			continue // elected meanwhile: not a follower any more
		}
		if !errors.Is(err, ErrNotLeader) || called {
			t.Fatalf("Propose on a follower = %v (prepare called %v), want ErrNotLeader", err, called)
		}
	}
}

func TestAFloodOfIdleConnectionsNeitherStopsRaftNorTheMetaService(t *testing.T) {
	c := newTCluster(t, 3)
	ld := c.leader()
	var idle []net.Conn
	for range 2 * maxPending {
		conn, err := net.Dial("tcp", ld.addr)
		if err != nil {
			break // the system's own limit; what was opened is flood enough
		}
		idle = append(idle, conn)
	}
	defer func() {
		for _, conn := range idle {
			conn.Close()
		}
	}()
	ctx := boundedCtx(t)
	var meta string
	var err error
	// Connections past maxPending are closed at once, and the idle ones
	// within firstByteTimeout: the service answers within a bound.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if meta, err = PeerMeta(ctx, ld.addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // poll, within the bound above
	}
	if err != nil || meta != "http://api-of-"+ld.id {
		t.Fatalf("PeerMeta during a flood of %d idle connections = %q, %v", len(idle), meta, err)
	}
	d := newDriver(c, 22)
	d.run(20)
	d.checkWorkloadDidSomething()
}

// failingListener fails its first Accepts as a process out of file
// descriptors does.
type failingListener struct {
	net.Listener
	failures atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.failures.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

func TestThePortKeepsAcceptingAfterAcceptFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &failingListener{Listener: ln}
	fl.failures.Store(5)
	m, err := newMuxLayerOn(fl, nil, "still here")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if meta, err := PeerMeta(boundedCtx(t), ln.Addr().String()); err != nil || meta != "still here" {
		t.Fatalf("PeerMeta after five failed accepts = %q, %v", meta, err)
	}
	if fl.failures.Load() >= 0 {
		t.Fatal("the failing accepts were never tried: the test proves nothing")
	}
}

// TransferLeadership moves the leadership to the voter named, which then
// takes writes and answers linearizable reads; it refuses itself, a
// stranger, and a node that does not lead.
func TestTransferLeadershipMovesTheLeadershipToTheVoterNamed(t *testing.T) {
	c := newTCluster(t, 3)
	d := newDriver(c, 17)
	d.run(20)
	for round := range 3 {
		ld := c.leader()
		var to *member
		for _, m := range c.running() {
			if m != ld {
				to = m
				break
			}
		}
		if err := ld.n.TransferLeadership(boundedCtx(t), to.id); err != nil {
			t.Fatalf("round %d: TransferLeadership(%s): %v", round, to.id, err)
		}
		if id, _, err := ld.n.WaitLeader(boundedCtx(t)); err != nil || id != to.id {
			t.Fatalf("round %d: the old leader knows %q as the leader (%v), want %s", round, id, err, to.id)
		}
		if err := to.n.Read(boundedCtx(t), func(*fsm.State) {}); err != nil {
			t.Fatalf("round %d: a linearizable read on the new leader: %v", round, err)
		}
		d.run(10)
	}
	c.settle()
	c.identicalStates()
	d.checkAcknowledgedPresent()

	ld := c.leader()
	var follower *member
	for _, m := range c.running() {
		if m != ld {
			follower = m
		}
	}
	var nl *NotLeaderError
	if err := follower.n.TransferLeadership(boundedCtx(t), ld.id); !errors.As(err, &nl) {
		t.Fatalf("TransferLeadership on a follower = %v, want a *NotLeaderError", err)
	}
	for _, id := range []string{ld.id, "stranger"} {
		if err := ld.n.TransferLeadership(boundedCtx(t), id); !errors.Is(err, ErrNodeOptions) {
			t.Fatalf("TransferLeadership(%q) = %v, want ErrNodeOptions", id, err)
		}
	}
	if c.leader() != ld {
		t.Fatal("a refused transfer moved the leadership")
	}
}
