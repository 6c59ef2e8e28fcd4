package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/replica"
)

// The replicated world: CheckReplicated runs a cluster of replicated
// stores (execstore.OpenReplicated: the store's writer proposing through a
// replica.Node, the state machine on hashicorp/raft) on raft's in-memory
// transport, concurrent clients that call whichever node leads, and a
// seeded schedule of faults: nodes crashed or stopped and restarted from
// their directories, the leader or a follower cut off from the others and
// healed, a node whose messages are delayed or held, a node's disk replaced
// by an empty one (it must catch up from a leader's snapshot), and clocks
// behind. It then checks properties of what the clients saw and of what the
// nodes hold (see check). The seed fixes the workload (each client's
// calls), the fault schedule and the clocks; raft's timing fixes the
// interleaving, so a run is not reproducible byte for byte.

// ReplConfig sets up one replicated world. Zero fields take their defaults.
type ReplConfig struct {
	Seed uint64
	// Nodes in the cluster. Default 3.
	Nodes int
	// Clients calling concurrently. Default 3.
	Clients int
	// Executions: new execution IDs each phase (the previous phase's stay
	// in use). Default 4.
	Executions int
	// Phases: each starts the clock at a new time, runs the clients and
	// faults, then heals. Default 4.
	Phases int
	// OpsPerPhase: calls per client and phase. Default 25.
	OpsPerPhase int
	// FaultsPerPhase: faults injected, one at a time, while clients run.
	// Default 2.
	FaultsPerPhase int
	// Dir holds the nodes' directories. Default: a new directory under
	// /dev/shm when it exists, else the system's temporary directory.
	Dir string
	// Timeout bounds porcupine's search. Default 30 s.
	Timeout time.Duration
	// Bound bounds every wait for the cluster: a leader, a catch-up, the
	// cluster settling after the faults heal. Default 20 s.
	Bound time.Duration
}

func (c ReplConfig) withDefaults() ReplConfig {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Nodes, 3)
	def(&c.Clients, 3)
	def(&c.Executions, 4)
	def(&c.Phases, 4)
	def(&c.OpsPerPhase, 25)
	def(&c.FaultsPerPhase, 2)
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Bound <= 0 {
		c.Bound = 20 * time.Second
	}
	return c
}

// ReplReport is what one replicated world saw.
type ReplReport struct {
	Calls   int // client calls made
	Ops     int // operations in the history (a claim counts once per execution)
	Unknown int // calls whose outcome stayed unknown (may have taken effect)
	Dropped int // calls left out: no leader in time (nothing submitted), or a read that failed
	Retries int // refusals by a node that did not lead, each tried again elsewhere
	// Faults counts the faults injected, by kind: crash-leader,
	// stop-leader, crash-follower, isolate-leader, isolate-follower, delay,
	// replace-disk, clock-behind (a phase with a node's clock behind).
	Faults map[string]int
	// Failovers counts changes of leader the fault driver saw (one leader at
	// a time, at its polls).
	Failovers int
	// Installs counts snapshots leaders sent to followers; FromSnapshot the
	// replaced disks that caught up through one.
	Installs, FromSnapshot int
	// Reads counts the probe's linearizable reads on a healthy cluster
	// (probeReads): answered within the bound, each on a node just made
	// the leader; Restarts the nodes restarted on a fresh snapshot before
	// theirs; NotLed the nodes raft would not hand the leadership to in
	// time, which were not probed.
	Reads, Restarts, NotLed int
	// Lin is the linearizability check of the clients' history.
	Lin       LinReport
	Violation error // nil when every check held
}

// Raft's settings in the world: short timeouts (messages are in memory) and
// small snapshot settings, so that a replaced disk catches up from a
// snapshot.
const (
	replHeartbeat   = 100 * time.Millisecond // and the election timeout
	replLease       = 50 * time.Millisecond
	replSnapshotLog = 16 // SnapshotThreshold and TrailingLogs
	replSnapshotDue = 100 * time.Millisecond
	replCallBound   = 3 * time.Second // a client call, retries included
	replPoll        = 5 * time.Millisecond
	// replSendBound bounds a message's delivery on the in-memory transport
	// (not counting the delay fault's wait): a message to a node that
	// stopped waits this long before it fails.
	replSendBound = 250 * time.Millisecond
)

// replNode is one member of the world: its identity and directory survive
// crashes; store is nil while it is down.
type replNode struct {
	w    *replWorld
	idx  int
	id   string
	addr raft.ServerAddress
	dir  string
	skew atomic.Int64 // its clock's offset from the world's time, ns (0 or negative)

	store atomic.Pointer[execstore.Store]
	inner *raft.InmemTransport // guarded by w.mu
	// installs counts the snapshots leaders sent to it.
	installs atomic.Int64
}

// node returns the node's raft node, nil while it is down.
func (nd *replNode) node() *replica.Node {
	if s := nd.store.Load(); s != nil {
		return s.Node()
	}
	return nil
}

func (nd *replNode) now() time.Time {
	return time.Unix(0, nd.w.base.Load()+nd.skew.Load()).UTC()
}

// replWorld is one replicated world.
type replWorld struct {
	cfg   ReplConfig
	dir   string
	rng   *rand.Rand // the fault schedule and the clocks: the driver's alone
	base  atomic.Int64
	nodes []*replNode
	peers []replica.Server

	mu       sync.Mutex // the nodes' being up, the links, the first violation
	isolated map[int]bool
	failure  error

	// The delay fault: messages from and to one node wait a seeded time.
	slow     atomic.Int32 // 1 + the slow node's index; 0: none
	slowMax  atomic.Int64 // the longest wait, ns
	delayMu  sync.Mutex
	delayRng *rand.Rand

	hist       replHistory
	faults     map[string]int
	lastLeader string
	failovers  int
	fromSnap   int
	markCount  int
	reads      readProbe // probeReads
}

// CheckReplicated runs one replicated world and checks it. The error is for
// the world's own failures (a directory it cannot make); broken guarantees
// are in ReplReport.Violation.
func CheckReplicated(cfg ReplConfig) (ReplReport, error) {
	cfg = cfg.withDefaults()
	dir, cleanup, err := workDir(cfg.Dir)
	if err != nil {
		return ReplReport{}, err
	}
	defer cleanup()
	w := &replWorld{
		cfg:      cfg,
		dir:      filepath.Join(dir, fmt.Sprintf("repl-%d", cfg.Seed)),
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0x7e91)),
		isolated: map[int]bool{},
		delayRng: rand.New(rand.NewPCG(cfg.Seed, 0xde1a)),
		faults:   map[string]int{},
	}
	defer os.RemoveAll(w.dir)
	w.base.Store(simEpoch.UnixNano())
	defer w.closeAll()
	if err := w.start(); err != nil {
		return ReplReport{}, err
	}
	for p := range cfg.Phases {
		if w.violation() != nil {
			break
		}
		w.phase(p)
	}
	var lin LinReport
	if w.violation() == nil {
		lin = w.check()
	}
	return w.report(lin), nil
}

func (w *replWorld) report(lin LinReport) ReplReport {
	r := ReplReport{
		Calls: int(w.hist.calls.Load()), Ops: len(w.hist.ops), Unknown: int(w.hist.unknown.Load()),
		Dropped: int(w.hist.dropped.Load()), Retries: int(w.hist.retries.Load()),
		Faults: w.faults, Failovers: w.failovers, FromSnapshot: w.fromSnap, Lin: lin,
		Reads: w.reads.answered, Restarts: w.reads.restarts, NotLed: w.reads.notLed,
		Violation: w.violation(),
	}
	for _, nd := range w.nodes {
		r.Installs += int(nd.installs.Load())
	}
	return r
}

// violate records a broken guarantee; the first one is reported.
func (w *replWorld) violate(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failure == nil {
		w.failure = err
	}
}

func (w *replWorld) violation() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failure
}

// phase runs one phase: the clock moves to the phase's time, a write through
// the leader stamps it into the state, clocks fall behind, the clients run
// while the faults come and go, everything heals, now and then a disk is
// replaced, and every node must answer a read as the leader (probeReads).
func (w *replWorld) phase(p int) {
	if p > 0 {
		jump := []time.Duration{time.Millisecond, time.Second, 2 * time.Hour}[w.rng.IntN(3)]
		w.base.Add(int64(jump))
	}
	for _, nd := range w.nodes {
		nd.skew.Store(0)
	}
	// Every command of the phase is stamped with its time: the marker is,
	// as the clocks read it now, and every later stamp is the greatest of a
	// clock (at or behind it), the node's last stamp and the state's time
	// (the marker's, once the leader applied every committed log).
	if w.mark() == nil {
		return
	}
	w.skewClocks()
	plan := w.planFaults()
	ids := w.phaseIDs(p)
	g := newGates(2 * len(plan))
	var wg sync.WaitGroup
	for c := range w.cfg.Clients {
		cl := &replClient{w: w, id: c, rng: rand.New(rand.NewPCG(w.cfg.Seed, uint64(p*1000+c+1))),
			ids: ids, all: w.allIDs(p), now: w.base.Load()}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl.run(w.cfg.OpsPerPhase, g)
		}()
	}
	w.drive(plan, g)
	wg.Wait()
	w.heal()
	if p > 0 && w.rng.IntN(2) == 0 {
		w.replaceDisk(w.rng.IntN(1 << 20))
	}
	// After the replaced disk: a probe that restarts nodes exposes the old
	// logs their files still hold, and a leader with its log from the start
	// would catch a replaced disk up from the log, never from a snapshot.
	w.probeReads(p)
}

// phaseIDs are the IDs the clients of phase p use: the phase's new ones and
// the previous phase's.
func (w *replWorld) phaseIDs(p int) []string {
	var ids []string
	for q := max(p-1, 0); q <= p; q++ {
		for k := range w.cfg.Executions {
			ids = append(ids, fmt.Sprintf("x%d-%d", q, k))
		}
	}
	return ids
}

// allIDs are every ID used up to phase p: a claim may lease any of them.
func (w *replWorld) allIDs(p int) []string {
	var ids []string
	for q := 0; q <= p; q++ {
		for k := range w.cfg.Executions {
			ids = append(ids, fmt.Sprintf("x%d-%d", q, k))
		}
	}
	return ids
}

// skewClocks sets some nodes' clocks behind the world's time for the phase.
func (w *replWorld) skewClocks() {
	behind := false
	for _, nd := range w.nodes {
		skew := []time.Duration{0, 0, -time.Millisecond, -time.Second, -time.Hour}[w.rng.IntN(5)]
		nd.skew.Store(int64(skew))
		behind = behind || skew != 0
	}
	if behind {
		w.faults["clock-behind"]++
	}
}

// mark writes a marker (a key the clients never use) through the leader,
// retrying within the bound, and returns the node that took it; nil (and a
// violation) when none did.
func (w *replWorld) mark() *replNode {
	w.markCount++
	write := execstore.Write{Key: "mark", Value: json.RawMessage(fmt.Sprint(w.markCount))}
	deadline := time.Now().Add(w.cfg.Bound)
	for time.Now().Before(deadline) {
		ld := w.awaitLeader()
		if ld == nil {
			break
		}
		if s := ld.store.Load(); s != nil {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			err := s.Commit(ctx, write)
			cancel()
			if err == nil {
				return ld
			}
		}
		time.Sleep(replPoll)
	}
	w.violate(violationf("no leader took a write within %v after the faults healed", w.cfg.Bound))
	return nil
}

// heal undoes every fault: every node up, linked and undelayed.
func (w *replWorld) heal() {
	w.slow.Store(0)
	w.mu.Lock()
	clear(w.isolated)
	w.rewire()
	w.mu.Unlock()
	for _, nd := range w.nodes {
		if nd.store.Load() == nil {
			if err := w.open(nd, nil); err != nil {
				w.violate(violationf("%v", err))
			}
		}
	}
}

// settle waits, within the bound, until a write through the leader has
// been applied by every running node, and returns that leader.
func (w *replWorld) settle() *replNode {
	ld := w.mark()
	if ld == nil {
		return nil
	}
	n := ld.node()
	if n == nil {
		return nil
	}
	want := n.FSM().Applied()
	for _, nd := range w.nodes {
		deadline := time.Now().Add(w.cfg.Bound)
		for {
			m := nd.node()
			if m == nil || m.FSM().Applied() >= want {
				break
			}
			if time.Now().After(deadline) {
				w.violate(violationf("node %s applied up to log %d, not %d (the leader %s's), %v after the faults healed",
					nd.id, m.FSM().Applied(), want, ld.id, w.cfg.Bound))
				return nil
			}
			time.Sleep(replPoll)
		}
	}
	return ld
}
