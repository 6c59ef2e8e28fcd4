package execstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/untimed"
	"github.com/execstore/execstore/replica"
	"github.com/execstore/execstore/snapshot"
)

// replicas is a cluster of replicated stores on raft's in-memory transport,
// each on a directory of its own, sharing one injected clock unless a test
// gives a node its own.
type replicas struct {
	t     *testing.T
	clock *clock
	stale bool
	opts  func(*execstore.Options) // changes each node's options, when set
	nodes []*replicaNode
	peers []execstore.Peer
}

type replicaNode struct {
	id    string
	addr  raft.ServerAddress
	dir   string
	now   func() time.Time
	trans *raft.InmemTransport
	s     *execstore.Store // nil while stopped
}

func newReplicas(t *testing.T, n int, stale bool) *replicas {
	return newReplicasWith(t, n, stale, nil)
}

func newReplicasWith(t *testing.T, n int, stale bool, opts func(*execstore.Options)) *replicas {
	t.Helper()
	c := &replicas{t: t, clock: newClock(), stale: stale, opts: opts}
	for i := range n {
		nd := &replicaNode{id: fmt.Sprintf("node-%d", i), addr: raft.ServerAddress(fmt.Sprintf("mem-%d", i)),
			dir: t.TempDir(), now: c.clock.Now}
		c.nodes = append(c.nodes, nd)
		c.peers = append(c.peers, execstore.Peer{ID: nd.id, Addr: string(nd.addr), Voter: true})
	}
	for _, nd := range c.nodes {
		c.start(nd)
	}
	t.Cleanup(c.closeAll)
	return c
}

// start opens a node's store on its directory with a fresh transport,
// connected both ways to every running node.
func (c *replicas) start(nd *replicaNode) {
	c.t.Helper()
	_, nd.trans = raft.NewInmemTransport(nd.addr)
	for _, o := range c.nodes {
		if o != nd && o.s != nil {
			nd.trans.Connect(o.addr, o.trans)
			o.trans.Connect(nd.addr, nd.trans)
		}
	}
	o := execstore.Options{Now: nd.now, NoSync: true}
	if c.opts != nil {
		c.opts(&o)
	}
	s, err := execstore.OpenReplicated(nd.dir, execstore.ReplicaOptions{
		Options: o,
		Node: replica.NodeOptions{ID: nd.id, Transport: nd.trans,
			HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
			LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond},
		Peers:      c.peers,
		StaleReads: c.stale,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	nd.s = s
}

// stop closes a node's store; its directory stays.
func (c *replicas) stop(nd *replicaNode) {
	c.t.Helper()
	if err := nd.s.Close(); err != nil {
		c.t.Fatalf("close %s: %v", nd.id, err)
	}
	nd.s = nil
	for _, o := range c.nodes {
		if o != nd && o.s != nil {
			o.trans.Disconnect(nd.addr)
		}
	}
}

func (c *replicas) closeAll() {
	for _, nd := range c.nodes {
		if nd.s != nil {
			nd.s.Close()
			nd.s = nil
		}
	}
}

// leader waits until exactly one running node leads, and returns it.
func (c *replicas) leader() *replicaNode {
	c.t.Helper()
	var found *replicaNode
	eventually(c.t, "one running node leads", func() bool {
		found = nil
		for _, nd := range c.nodes {
			if nd.s != nil && nd.s.Node().State() == raft.Leader {
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

func (c *replicas) followers() []*replicaNode {
	ld := c.leader()
	var out []*replicaNode
	for _, nd := range c.nodes {
		if nd != ld && nd.s != nil {
			out = append(out, nd)
		}
	}
	return out
}

// settled waits until every running node applied what the leader applied.
func (c *replicas) settled() {
	c.t.Helper()
	ld := c.leader()
	// A read index on the leader: its state then includes every committed
	// log, also those of earlier terms a new leader has yet to apply.
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := ld.s.Node().Read(ctx, func(*fsm.State) {}); err != nil {
		c.t.Fatalf("read index on the leader: %v", err)
	}
	eventually(c.t, "every node applied the leader's log", func() bool {
		want := ld.s.Node().Stats().Applied
		for _, nd := range c.nodes {
			if nd.s != nil && nd.s.Node().Stats().Applied < want {
				return false
			}
		}
		return true
	})
}

// identical fails unless every running node's state encodes to the same
// bytes (after settled).
func (c *replicas) identical() {
	c.t.Helper()
	var first []byte
	for _, nd := range c.nodes {
		if nd.s == nil {
			continue
		}
		st, _ := nd.s.Node().FSM().Copy()
		var b bytes.Buffer
		if err := snapshot.Encode(&b, st, snapshot.Header{}); err != nil {
			c.t.Fatal(err)
		}
		if first == nil {
			first = b.Bytes()
		} else if !bytes.Equal(first, b.Bytes()) {
			c.t.Fatalf("%s's state differs from the first running node's", nd.id)
		}
	}
}

func TestAReplicatedStoreWritesOnTheLeaderAndFollowersRefuseNamingIt(t *testing.T) {
	ctx := context.Background()
	c := newReplicas(t, 3, false)
	ld := c.leader()
	id, err := ld.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-1", WorkflowID: "wf"})
	if err != nil || id != "order-1" {
		t.Fatalf("Admit on the leader = %q, %v", id, err)
	}
	if _, err := ld.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-1", WorkflowID: "wf"}); !errors.Is(err, execstore.ErrExecutionIDConflict) {
		t.Fatalf("a repeated admission = %v, want ErrExecutionIDConflict", err)
	}
	leases, err := ld.s.ClaimDue(ctx, 10, time.Minute)
	if err != nil || len(leases) != 1 || leases[0].ExecutionID != "order-1" {
		t.Fatalf("ClaimDue = %v, %v", leases, err)
	}
	rec, err := ld.s.Acknowledge(ctx, leases[0], execstore.Completed(raw(`{"ok":true}`)))
	if err != nil || rec.Status != execstore.StatusCompleted {
		t.Fatalf("Acknowledge = %+v, %v", rec, err)
	}
	if rec, err := ld.s.Get(ctx, "order-1"); err != nil || rec.Status != execstore.StatusCompleted {
		t.Fatalf("a linearizable Get on the leader = %+v, %v", rec, err)
	}

	for _, f := range c.followers() {
		wctx, cancel := context.WithTimeout(ctx, patience)
		if id, _, err := f.s.Node().WaitLeader(wctx); err != nil || id != ld.id {
			t.Fatalf("follower %s knows leader %q (%v), want %s", f.id, id, err, ld.id)
		}
		cancel()
		_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-2", WorkflowID: "wf"})
		var nl *execstore.NotLeaderError
		if !errors.Is(err, execstore.ErrNotLeader) || !errors.As(err, &nl) || nl.LeaderID != ld.id || nl.Uncertain {
			t.Fatalf("Admit on follower %s = %v, want a certain ErrNotLeader naming %s", f.id, err, ld.id)
		}
		if _, err := f.s.Get(ctx, "order-1"); !errors.Is(err, execstore.ErrNotLeader) {
			t.Fatalf("a linearizable Get on follower %s = %v, want ErrNotLeader", f.id, err)
		}
		if _, err := f.s.ClaimDue(ctx, 1, time.Minute); !errors.Is(err, execstore.ErrNotLeader) {
			t.Fatalf("ClaimDue on follower %s = %v, want ErrNotLeader", f.id, err)
		}
	}
	// What a follower refused was never done.
	c.settled()
	if _, err := ld.s.Get(ctx, "order-2"); !errors.Is(err, execstore.ErrExecutionNotFound) {
		t.Fatalf("the refused admission: Get = %v, want ErrExecutionNotFound", err)
	}
}

func TestStaleReadsOnAFollowerCatchUpAndAwaitWakesThere(t *testing.T) {
	ctx := context.Background()
	c := newReplicas(t, 3, true)
	ld := c.leader()
	f := c.followers()[0]
	if _, err := ld.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "wf"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the follower applies the admission", func() bool {
		rec, err := f.s.Get(ctx, "a")
		return err == nil && rec.Status == execstore.StatusAdmitted
	})
	awaited := make(chan execstore.Record, 1)
	go func() {
		rec, err := f.s.Await(ctx, "a")
		if err != nil {
			t.Error(err)
		}
		awaited <- rec
	}()
	l := claimOn(t, ld.s, "a")
	if _, err := ld.s.Acknowledge(ctx, l, execstore.Failed(errors.New("boom"))); err != nil {
		t.Fatal(err)
	}
	select {
	case rec := <-awaited:
		if rec.Status != execstore.StatusFailed {
			t.Fatalf("Await on the follower returned %v, want failed", rec.Status)
		}
	case <-time.After(patience):
		t.Fatal("Await on a follower was not woken by the outcome the leader applied")
	}
}

// claimOn claims the one due execution id on s.
func claimOn(t *testing.T, s *execstore.Store, id string) execstore.Lease {
	t.Helper()
	leases, err := s.ClaimDue(context.Background(), 10, time.Minute)
	if err != nil || len(leases) != 1 || leases[0].ExecutionID != id {
		t.Fatalf("ClaimDue = %v, %v; want one lease of %q", leases, err, id)
	}
	return leases[0]
}

func TestAfterTheLeaderClosesTheNextLeaderKeepsLeasesTimeAndTokensGoing(t *testing.T) {
	ctx := context.Background()
	c := newReplicas(t, 3, false)
	// The nodes' clocks differ: whoever leads next reads an earlier time.
	for i, nd := range c.nodes {
		offset := -time.Duration(i) * time.Hour
		nd.now = func() time.Time { return c.clock.Now().Add(offset) }
	}
	c.closeAll()
	for _, nd := range c.nodes {
		c.start(nd)
	}
	ld := c.leader()
	for i := range 5 {
		if _, err := ld.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprint("e", i), WorkflowID: "wf"}); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := ld.s.ClaimDue(ctx, 2, time.Hour)
	if err != nil || len(leases) != 2 {
		t.Fatalf("ClaimDue = %v, %v", leases, err)
	}
	before := ld.s.Now()
	c.settled()
	c.stop(ld)

	next := c.leader()
	if next == ld {
		t.Fatal("the closed node still leads")
	}
	// A lease taken under the old leader is the new leader's too.
	renewed, err := next.s.Renew(ctx, leases[0], time.Hour)
	if err != nil || renewed.Token != leases[0].Token {
		t.Fatalf("Renew on the new leader = %+v, %v", renewed, err)
	}
	if _, err := next.s.Acknowledge(ctx, leases[1], execstore.Completed(raw(`1`))); err != nil {
		t.Fatalf("Acknowledge on the new leader: %v", err)
	}
	more, err := next.s.ClaimDue(ctx, 10, time.Minute)
	if err != nil || len(more) != 3 {
		t.Fatalf("ClaimDue on the new leader = %v, %v; want the 3 unleased", more, err)
	}
	for _, l := range more {
		for _, old := range leases {
			if l.Token <= old.Token && l.ExecutionID == old.ExecutionID {
				t.Fatalf("token %d for %s does not follow %d", l.Token, l.ExecutionID, old.Token)
			}
		}
	}
	if now := next.s.Now(); now.Before(before) {
		t.Fatalf("the store's time went back from %v to %v across the leader change", before, now)
	}
	st, err := next.s.Stats(ctx)
	if err != nil || st.Now.Before(before) || st.Replica == nil || st.Replica.LeaderID != next.id {
		t.Fatalf("Stats on the new leader = %+v, %v", st, err)
	}
}

func TestDispatchersOnEveryReplicaDeliverEachExecutionOnceAcrossAFailover(t *testing.T) {
	ctx := context.Background()
	c := newReplicas(t, 3, true)
	var mu sync.Mutex
	delivered := map[string]int{}
	inv := dispatcher.InvokerFunc(func(ctx context.Context, d dispatcher.Delivery) (execstore.RunOutcome, error) {
		mu.Lock()
		delivered[d.ExecutionID]++
		mu.Unlock()
		return execstore.Completed(raw(`true`)), nil
	})
	var ds []*dispatcher.Dispatcher
	start := func(nd *replicaNode) {
		d, err := dispatcher.New(nd.s, inv, dispatcher.Options{Concurrency: 4, LeaseDuration: time.Minute, PollInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		d.Start()
		ds = append(ds, d)
	}
	for _, nd := range c.nodes {
		start(nd)
	}
	defer func() {
		for _, d := range ds {
			d.Stop(ctx)
		}
	}()
	admit := func(from, to int) {
		for i := from; i < to; i++ {
			for {
				ld := c.leader()
				_, err := ld.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprint("job-", i), WorkflowID: "wf"})
				if err == nil || errors.Is(err, execstore.ErrExecutionIDConflict) {
					break
				}
				if !errors.Is(err, execstore.ErrNotLeader) {
					t.Fatal(err)
				}
			}
		}
	}
	done := func(n int) func() bool {
		return func() bool {
			ld := c.leader()
			for i := range n {
				rec, err := ld.s.Get(ctx, fmt.Sprint("job-", i))
				if err != nil || rec.Status != execstore.StatusCompleted {
					return false
				}
			}
			return true
		}
	}
	admit(0, 20)
	eventually(t, "the first 20 complete", done(20))
	ld := c.leader()
	for i, nd := range c.nodes {
		if nd == ld {
			ds[i].Stop(ctx)
		}
	}
	c.stop(ld)
	admit(20, 40)
	eventually(t, "the next 20 complete on the new leader", done(40))
	c.settled()
	c.identical()
	mu.Lock()
	defer mu.Unlock()
	for id, n := range delivered {
		if n != 1 {
			t.Errorf("%s was delivered %d times", id, n)
		}
	}
	if len(delivered) != 40 {
		t.Errorf("%d executions delivered, want 40", len(delivered))
	}
}

func TestEveryReplicaRestartedFromItsDirectoryKeepsTheState(t *testing.T) {
	ctx := context.Background()
	c := newReplicas(t, 3, true)
	ld := c.leader()
	for i := range 50 {
		if _, err := ld.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprint("e", i), WorkflowID: "wf"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ld.s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 50; i < 60; i++ {
		if _, err := ld.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: fmt.Sprint("e", i), WorkflowID: "wf"}); err != nil {
			t.Fatal(err)
		}
	}
	c.settled()
	c.closeAll()
	for _, nd := range c.nodes {
		c.start(nd)
	}
	c.settled()
	for _, nd := range c.nodes {
		st, err := nd.s.Stats(ctx)
		if err != nil || st.Executions != 60 {
			t.Fatalf("%s after restart: %d executions, %v; want 60", nd.id, st.Executions, err)
		}
	}
}

// isolate cuts a node off from every other, both ways; heal reconnects it.
func (c *replicas) isolate(nd *replicaNode) {
	for _, o := range c.nodes {
		if o != nd && o.s != nil {
			nd.trans.Disconnect(o.addr)
			o.trans.Disconnect(nd.addr)
		}
	}
}

func (c *replicas) heal(nd *replicaNode) {
	for _, o := range c.nodes {
		if o != nd && o.s != nil {
			nd.trans.Connect(o.addr, o.trans)
			o.trans.Connect(nd.addr, nd.trans)
		}
	}
}

func TestALeaderCutOffFromTheMajorityFailsItsWritesAndStepsDown(t *testing.T) {
	ctx := context.Background()
	c := newReplicas(t, 3, true)
	old := c.leader()
	if _, err := old.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "before", WorkflowID: "wf"}); err != nil {
		t.Fatal(err)
	}
	c.settled()
	c.isolate(old)

	// What it would answer from its state alone (here: no such execution)
	// it answers only once it confirmed it still leads, which it cannot.
	wctx, cancel := context.WithTimeout(ctx, patience)
	_, err := old.s.RequestWake(wctx, "nobody", t0)
	cancel()
	if !errors.Is(err, execstore.ErrNotLeader) {
		t.Fatalf("a no-op on the cut-off leader = %v, want ErrNotLeader", err)
	}

	// Its write cannot commit: it fails, and says so, once the leader sees
	// it lost its quorum.
	wctx, cancel = context.WithTimeout(ctx, patience)
	_, err = old.s.Admit(wctx, execstore.AdmitRequest{ExecutionID: "cut-off", WorkflowID: "wf"})
	cancel()
	if !errors.Is(err, execstore.ErrNotLeader) {
		t.Fatalf("a write on the cut-off leader = %v, want ErrNotLeader", err)
	}
	eventually(t, "the cut-off leader steps down", func() bool { return old.s.Node().State() != raft.Leader })

	// The majority elects another and goes on.
	var next *replicaNode
	eventually(t, "the majority elects a leader", func() bool {
		for _, nd := range c.nodes {
			if nd != old && nd.s.Node().State() == raft.Leader {
				next = nd
				return true
			}
		}
		return false
	})
	if _, err := next.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "after", WorkflowID: "wf"}); err != nil {
		t.Fatal(err)
	}

	// Healed, the old leader follows, and the write it could not commit is
	// nowhere.
	c.heal(old)
	c.settled()
	for _, nd := range c.nodes {
		for id, want := range map[string]bool{"before": true, "after": true, "cut-off": false} {
			_, err := nd.s.Get(ctx, id)
			if found := err == nil; found != want {
				t.Fatalf("%s: %s found %v (%v), want %v", nd.id, id, found, err, want)
			}
		}
	}
}

func TestSchedulesFireOnceOnTheLeaderAndRetentionRetiresOnEveryNode(t *testing.T) {
	ctx := context.Background()
	c := newReplicasWith(t, 3, true, func(o *execstore.Options) {
		o.Retention = time.Hour
		// Timers that never fire: retire and fire before each batch, as the
		// simulator does, with no timer to wait for.
		o.Now, o.Clock = nil, untimed.Clock(o.Now)
	})
	ld := c.leader()
	if _, err := ld.s.PutSchedule(ctx, execstore.Schedule{ID: "tick", WorkflowID: "wf", Interval: time.Minute,
		Start: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for _, f := range c.followers() {
		if _, err := f.s.PutSchedule(ctx, execstore.Schedule{ID: "other", WorkflowID: "wf", Interval: time.Minute, Start: t0}); !errors.Is(err, execstore.ErrNotLeader) {
			t.Fatalf("PutSchedule on a follower = %v, want ErrNotLeader", err)
		}
	}
	write := func(s *execstore.Store, id string) {
		t.Helper()
		if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: "wf"}); err != nil {
			t.Fatal(err)
		}
	}
	c.clock.Advance(3 * time.Minute)
	write(ld.s, "w1") // the occurrences at +1, +2 and +3 minutes are admitted before it answers
	c.stop(ld)
	next := c.leader()
	c.clock.Advance(2 * time.Minute)
	write(next.s, "w2") // and +4, +5 by the new leader
	c.settled()
	for _, nd := range c.nodes {
		if nd.s == nil {
			continue
		}
		for m := 1; m <= 5; m++ {
			id := execstore.ScheduleOccurrenceID("tick", t0.Add(time.Duration(m)*time.Minute))
			if _, err := nd.s.Get(ctx, id); err != nil {
				t.Fatalf("%s: occurrence %d: %v", nd.id, m, err)
			}
		}
		st, err := nd.s.Stats(ctx)
		if err != nil || st.Executions != 7 {
			t.Fatalf("%s: %d executions, %v; want 5 occurrences and 2 admissions", nd.id, st.Executions, err)
		}
	}

	// A completed execution is retired on every node once the retention passed.
	leases, err := next.s.ClaimDue(ctx, 100, time.Minute)
	if err != nil || len(leases) != 7 {
		t.Fatalf("ClaimDue = %d leases, %v; want 7", len(leases), err)
	}
	for _, l := range leases {
		if _, err := next.s.Acknowledge(ctx, l, execstore.Completed(raw(`1`))); err != nil {
			t.Fatal(err)
		}
	}
	c.clock.Advance(2 * time.Hour)
	write(next.s, "w3")
	c.settled()
	for _, nd := range c.nodes {
		if nd.s == nil {
			continue
		}
		st, err := nd.s.Stats(ctx)
		if err != nil || st.Retired == 0 {
			t.Fatalf("%s: %d retired, %v; want the completed ones", nd.id, st.Retired, err)
		}
	}
}

func TestStatsAndHealthOfAFollowerDescribeItWithoutTheLeader(t *testing.T) {
	ctx := context.Background()
	c := newReplicas(t, 3, false) // linearizable reads: Get on a follower is refused
	ld := c.leader()
	if _, err := ld.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "wf"}); err != nil {
		t.Fatal(err)
	}
	c.settled()
	for _, f := range c.followers() {
		st, err := f.s.Stats(ctx)
		if err != nil || st.Executions != 1 || st.Replica == nil || st.Replica.State != raft.Follower || st.Replica.LeaderID != ld.id {
			t.Fatalf("Stats on follower %s = %+v, %v", f.id, st, err)
		}
		if _, err := f.s.Gauges(ctx); err != nil {
			t.Fatalf("Gauges on follower %s: %v", f.id, err)
		}
		if err := f.s.CheckInvariants(); err != nil {
			t.Fatalf("CheckInvariants on follower %s: %v", f.id, err)
		}
	}
}

func TestASingleNodeDirectoryAndAReplicasAreNotOpenedAsEachOther(t *testing.T) {
	single := t.TempDir()
	s, err := execstore.Open(single, execstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(context.Background(), execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "wf"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, trans := raft.NewInmemTransport("mem-x")
	opts := execstore.ReplicaOptions{Options: execstore.Options{NoSync: true}, Node: replica.NodeOptions{ID: "x", Transport: trans}}
	if _, err := execstore.OpenReplicated(single, opts); !errors.Is(err, execstore.ErrInvalidArgument) {
		t.Fatalf("OpenReplicated of a single-node store's directory = %v, want ErrInvalidArgument", err)
	}
	if s, err := execstore.Open(single, execstore.Options{NoSync: true}); err != nil {
		t.Fatalf("the single-node store after the refusal: %v", err)
	} else {
		s.Close()
	}

	c := newReplicas(t, 1, false)
	nd := c.nodes[0]
	c.leader()
	c.stop(nd)
	if _, err := execstore.Open(nd.dir, execstore.Options{NoSync: true}); !errors.Is(err, execstore.ErrInvalidArgument) {
		t.Fatalf("Open of a replica's directory = %v, want ErrInvalidArgument", err)
	}
	c.start(nd) // and it still opens as what it is
	c.leader()
}

func TestOpenReplicatedRefusesBadOptionsAndReleasesTheDirectory(t *testing.T) {
	dir := t.TempDir()
	_, trans := raft.NewInmemTransport("mem-b")
	for name, opts := range map[string]execstore.ReplicaOptions{
		"peers without this node": {Node: replica.NodeOptions{ID: "b", Transport: trans},
			Peers: []execstore.Peer{{ID: "other", Addr: "mem-o", Voter: true}}},
		"no node ID": {Node: replica.NodeOptions{Transport: trans}},
	} {
		if _, err := execstore.OpenReplicated(dir, opts); err == nil {
			t.Fatalf("%s: OpenReplicated succeeded", name)
		}
	}
	// Nothing holds the directory: it opens.
	_, trans = raft.NewInmemTransport("mem-b")
	s, err := execstore.OpenReplicated(dir, execstore.ReplicaOptions{Node: replica.NodeOptions{ID: "b", Transport: trans},
		Peers: []execstore.Peer{{ID: "b", Addr: "mem-b", Voter: true}}})
	if err != nil {
		t.Fatalf("OpenReplicated after the refusals: %v", err)
	}
	s.Close()
}
