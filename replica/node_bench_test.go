package replica

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
)

// The node benchmarks run three nodes on loopback TCP, each with a durable log (every
// append fsynced), and NodeOptions' default timeouts:
//
//	go test -run '^$' -bench 'Node' -benchtime 3s ./replica
//	go test -run '^$' -bench 'NodeFailover' -benchtime 5x ./replica
//	go test -run '^$' -bench ReplacedDiskCatchUp -benchtime 1x -timeout 1h -v ./replica
//
// The single-node store's admissions, for comparison: go test -run '^$' -bench
// 'Admit/sync=true' . in the repository's root.

// benchCluster runs three members over TCP with NodeOptions' defaults (but for the test
// clocks, no timed snapshots and a 5s RaftTimeout), recording nothing they apply.
var benchCluster = clusterOptions{tcp: true, defaults: true, quiet: true}

// BenchmarkNodeApplyAdmit measures admissions through the leader's Apply from 1 and 64
// concurrent callers; raft gathers concurrent commands into one append (and one fsync on
// each node) of up to MaxAppendEntries logs.
func BenchmarkNodeApplyAdmit(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			c := newClusterWith(b, 3, benchCluster)
			ld := c.leader().n
			ctx := context.Background()
			var next, failed atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						cmd := fsm.Command{Kind: fsm.KindAdmit, ExecutionID: fmt.Sprintf("g%d-%d", g, i), WorkflowID: "wf",
							Params: `{"n":1}`, HasParams: true}
						if _, err := ld.Apply(ctx, &cmd); err != nil {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commands/s")
			if failed.Load() > 0 {
				b.Fatalf("%d admissions failed", failed.Load())
			}
		})
	}
}

// BenchmarkNodeApplyBatch measures admissions by ApplyBatch calls of 1,024 from one caller
// and of 64 from 16 callers, with MaxAppendEntries 64 (the default) and 1,024: raft's
// pipelined replication sends a follower one append of at most MaxAppendEntries logs per
// batch the leader appends or per CommitTimeout, so a call much larger than
// MaxAppendEntries replicates at about MaxAppendEntries logs per CommitTimeout. For
// comparison, Propose calls of 1,024 from one caller: each call is one log (an envelope).
func BenchmarkNodeApplyBatch(b *testing.B) {
	for _, maxAppend := range []int{64, 1024} {
		for _, shape := range []struct {
			callers, batch int
			propose        bool
		}{{1, 1024, false}, {16, 64, false}, {1, 1024, true}} {
			name := fmt.Sprintf("max-append=%d/callers=%d/batch=%d", maxAppend, shape.callers, shape.batch)
			if shape.propose {
				name = fmt.Sprintf("max-append=%d/propose/callers=%d/batch=%d", maxAppend, shape.callers, shape.batch)
			}
			b.Run(name, func(b *testing.B) {
				opts := benchCluster
				opts.tune = func(o *NodeOptions, _ *FSMOptions) { o.MaxAppendEntries = maxAppend }
				c := newClusterWith(b, 3, opts)
				ld := c.leader().n
				var next, failed atomic.Int64
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for g := range shape.callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							from := int(next.Add(int64(shape.batch))) - shape.batch
							if from >= b.N {
								return
							}
							var cmds []*fsm.Command
							for i := from; i < min(from+shape.batch, b.N); i++ {
								cmds = append(cmds, &fsm.Command{Kind: fsm.KindAdmit, ExecutionID: fmt.Sprintf("g%d-%d", g, i),
									WorkflowID: "wf", Params: `{"n":1}`, HasParams: true})
							}
							var out []Applied
							var err error
							if shape.propose {
								out, err = ld.Propose(context.Background(), func(now int64) [][]byte { return encodeStamped(cmds, now) })
							} else {
								out, err = ld.ApplyBatch(context.Background(), cmds)
							}
							if err != nil {
								failed.Add(int64(len(cmds)))
								continue
							}
							for _, a := range out {
								if a.Err != nil {
									failed.Add(1)
								}
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commands/s")
				if failed.Load() > 0 {
					b.Fatalf("%d admissions failed", failed.Load())
				}
			})
		}
	}
}

// BenchmarkNodeFailover measures, on a fresh cluster each time, the time from closing the
// leader to the first Apply a new leader answers; it reports the median.
func BenchmarkNodeFailover(b *testing.B) {
	var took []time.Duration
	for i := range b.N {
		b.StopTimer()
		c := newClusterWith(b, 3, benchCluster)
		old := c.leader()
		cmd := fsm.Command{Kind: fsm.KindAdmit, ExecutionID: "before", WorkflowID: "wf"}
		if _, err := old.n.Apply(context.Background(), &cmd); err != nil {
			b.Fatal(err)
		}
		nodes := []*Node{}
		for _, tn := range c.running() {
			if tn != old {
				nodes = append(nodes, tn.n)
			}
		}
		b.StartTimer()
		start := time.Now()
		c.stop(old)
		cmd = fsm.Command{Kind: fsm.KindAdmit, ExecutionID: fmt.Sprintf("after-%d", i), WorkflowID: "wf"}
		ok := false
		for !ok {
			if time.Since(start) > waitBound {
				b.Fatal("no new leader took a write")
			}
			for _, n := range nodes {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				if _, err := n.Apply(ctx, &cmd); err == nil {
					ok = true
				}
				cancel()
			}
			if !ok {
				time.Sleep(time.Millisecond)
			}
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		for _, tn := range c.running() {
			c.stop(tn)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "ms-median")
}

// BenchmarkReplacedDiskCatchUp measures how long a follower whose disk was replaced takes to
// catch up with a leader holding many executions (10^6; REPLICA_CATCHUP_RECORDS changes
// it): three members over TCP, durable, with NodeOptions' defaults (timed snapshots
// included). The leader is filled with admissions by Propose calls of 4,096, one envelope
// each (the fill rate is reported too), and takes a snapshot; then a follower is stopped,
// its directory emptied, and it is restarted with the same ID and address. The timer runs
// from that restart until the follower's FSM applied the leader's last log: the leader
// notices it, sends its snapshot, the follower stores and restores it, then applies the
// logs after it. It takes a minute or more:
//
//	go test -run '^$' -bench ReplacedDiskCatchUp -benchtime 1x -timeout 1h -v ./replica
func BenchmarkReplacedDiskCatchUp(b *testing.B) {
	if testing.Short() {
		b.Skip("fills a cluster with 10^6 executions")
	}
	records := 1_000_000
	if s := os.Getenv("REPLICA_CATCHUP_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("REPLICA_CATCHUP_RECORDS=%q: want a positive count", s)
		}
		records = n
	}
	// With envelopes, 10^6 admissions are a few hundred logs, fewer than TrailingLogs
	// (10,240) keeps behind a snapshot: with the defaults, the replaced disk replays the
	// leader's log. Keeping 8 logs makes it install the snapshot instead.
	for _, tc := range []struct {
		from     string
		trailing uint64
	}{{"log", 0}, {"snapshot", 8}} {
		b.Run("from="+tc.from, func(b *testing.B) {
			for range b.N {
				replaceADiskAndCatchUp(b, records, tc.trailing)
			}
		})
	}
}

// replaceADiskAndCatchUp is one run of BenchmarkReplacedDiskCatchUp; trailing, when not
// zero, is the members' TrailingLogs, and then the replaced disk must catch up from a
// snapshot (from the log otherwise).
func replaceADiskAndCatchUp(b *testing.B, records int, trailing uint64) {
	b.StopTimer()
	var restoredMu sync.Mutex
	restoredAt := map[string]time.Time{}
	opts := benchCluster
	opts.tune = func(o *NodeOptions, hooks *FSMOptions) {
		o.SnapshotInterval = 0 // raft's timed snapshots, as deployed
		o.TrailingLogs = trailing
		counted := hooks.Restored
		hooks.Restored = func(st *fsm.State) {
			counted(st)
			restoredMu.Lock()
			restoredAt[o.ID] = time.Now()
			restoredMu.Unlock()
		}
	}
	c := newClusterWith(b, 3, opts)
	fillRate := fillCluster(b, c, records)
	ld := c.settle()
	if err := ld.n.raft.Snapshot().Error(); err != nil {
		b.Fatalf("snapshot: %v", err)
	}
	metas, err := ld.n.snaps.List()
	if err != nil || len(metas) == 0 {
		b.Fatalf("the leader lists no snapshot (%v)", err)
	}
	first, _ := ld.n.logs.FirstIndex()
	target := ld.n.fsm.Applied()
	b.Logf("leader %s: applied index %d, log from %d, snapshot of %d bytes at index %d",
		ld.id, target, first, metas[0].Size, metas[0].Index)

	f := c.follower()
	c.stop(f)
	if err := os.RemoveAll(f.dir); err != nil {
		b.Fatal(err)
	}
	if err := os.Mkdir(f.dir, 0o755); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	start := time.Now()
	c.start(f)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	err = f.n.fsm.WaitApplied(ctx, target)
	cancel()
	took := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatalf("the replaced disk did not catch up: %v", err)
	}
	if snapshot := f.installed() > 0; snapshot != (trailing != 0) {
		b.Fatalf("the replaced disk installed %d snapshots: not the path the benchmark measures", f.installed())
	}
	how := "from the log"
	if trailing != 0 {
		restoredMu.Lock()
		restored := restoredAt[f.id].Sub(start)
		restoredMu.Unlock()
		how = fmt.Sprintf("from the snapshot (its FSM got the snapshot's state %v after the restart)", restored)
		b.ReportMetric(restored.Seconds(), "restored-s")
	}
	b.Logf("caught up in %v %s", took, how)
	c.settle()
	c.identicalStates()
	b.ReportMetric(took.Seconds(), "catchup-s")
	b.ReportMetric(float64(metas[0].Size)/(1<<20), "snapshot-MiB")
	b.ReportMetric(float64(records)/took.Seconds(), "records/s")
	b.ReportMetric(fillRate, "fill-records/s")
	for _, m := range c.running() {
		c.stop(m)
	}
}

// fillCluster admits records executions through the leader of the moment, with Propose,
// the replicated store's path: calls of 4,096 commands, each one raft log (an envelope),
// from two callers, retrying the commands of a failed call (an admission conflicting with
// itself, after an uncertain answer, counts as done); it logs its progress every 100,000
// and returns the admissions per second.
func fillCluster(b *testing.B, c *cluster, records int) float64 {
	const batch, callers, every = MaxEnvelopeCommands, 2, 100_000
	var nodes []*Node
	for _, m := range c.running() {
		nodes = append(nodes, m.n)
	}
	var next, done atomic.Int64
	start := time.Now()
	errc := make(chan error, callers)
	for range callers {
		go func() {
			for {
				from := int(next.Add(batch)) - batch
				if from >= records {
					errc <- nil
					return
				}
				var cmds []*fsm.Command
				for i := from; i < min(from+batch, records); i++ {
					cmds = append(cmds, &fsm.Command{Kind: fsm.KindAdmit, ExecutionID: fmt.Sprintf("x%08d", i),
						WorkflowID: "wf", Params: `{"n":1}`, HasParams: true})
				}
				if err := admitAll(nodes, cmds); err != nil {
					errc <- err
					return
				}
				if n := done.Add(int64(len(cmds))); n/every != (n-int64(len(cmds)))/every {
					b.Logf("%d admitted, %.0f/s", n, float64(n)/time.Since(start).Seconds())
				}
			}
		}()
	}
	for range callers {
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	rate := float64(records) / time.Since(start).Seconds()
	b.Logf("filled %d executions in %v: %.0f/s", records, time.Since(start).Round(time.Millisecond), rate)
	return rate
}

// admitAll proposes the admissions through the leader of the moment until each is
// admitted, within waitBound of the last progress.
func admitAll(nodes []*Node, cmds []*fsm.Command) error {
	deadline := time.Now().Add(waitBound)
	for len(cmds) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d admissions still fail after %v", len(cmds), waitBound)
		}
		var ld *Node
		for _, n := range nodes {
			if n.State() == raft.Leader {
				ld = n
			}
		}
		if ld == nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		out, err := ld.Propose(context.Background(), func(now int64) [][]byte { return encodeStamped(cmds, now) })
		if err != nil {
			continue
		}
		var failed []*fsm.Command
		for i, a := range out {
			switch {
			case a.Err != nil:
				failed = append(failed, cmds[i])
			case a.Result.Code != fsm.CodeOK && a.Result.Code != fsm.CodeConflict:
				return fmt.Errorf("admission of %s: %v", cmds[i].ExecutionID, a.Result.Code)
			}
		}
		if len(failed) < len(cmds) {
			deadline = time.Now().Add(waitBound)
		}
		cmds = failed
	}
	return nil
}

// encodeStamped encodes the commands stamped with now, as Propose's prepare returns them.
func encodeStamped(cmds []*fsm.Command, now int64) [][]byte {
	datas := make([][]byte, len(cmds))
	for i, c := range cmds {
		stamped := *c
		stamped.Now = now
		datas[i] = fsm.AppendEncode(nil, &stamped)
	}
	return datas
}
