package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/wal"
)

// NodeOptions configures Open. Durations left zero take the documented default.
type NodeOptions struct {
	// ID names the node in the cluster's configuration; it must not change across restarts
	// and must be unique in the cluster. Required.
	ID string
	// BindAddr is the TCP address raft listens on ("127.0.0.1:7000"; port 0 lets the system
	// choose, see Node.Addr). Required.
	BindAddr string
	// AdvertiseAddr is the address other nodes dial; default: the address bound, which must
	// then be a specific IP (not 0.0.0.0).
	AdvertiseAddr string

	// Meta is a short text (at most MaxMetaBytes) this node tells any peer that asks,
	// over its raft port (PeerMeta, LeaderMeta): a replicated store's serve puts its
	// HTTP API's URL here, so that a follower can send clients to the leader's. Not
	// available with Transport. Default empty.
	Meta string

	// Clock stamps the commands this node writes while it is leader. Default time.Now.
	Clock func() time.Time
	// Logger receives raft's messages (transport and snapshot store included), each with
	// a "node" attribute holding ID. Default: discarded.
	Logger *slog.Logger

	// HeartbeatTimeout: a follower that hears nothing from a leader this long starts an
	// election. Default 500ms (raft's is 1s, sized for WANs; a cluster on one network
	// fails over in about two of these).
	HeartbeatTimeout time.Duration
	// ElectionTimeout: a candidate that wins no election this long starts another.
	// Default 500ms.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout: a leader that hears from no quorum this long steps down.
	// Default 250ms; at most HeartbeatTimeout.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout: how long an idle leader waits before telling followers the commit
	// index (a busy one tells them with every append). Default 10ms.
	CommitTimeout time.Duration
	// MaxAppendEntries: the most logs raft sends in one append, and so the most commands
	// one fsync covers on each node (the group commit). Default 64; at most 1024.
	MaxAppendEntries int
	// SnapshotThreshold: raft snapshots once this many logs follow the last snapshot.
	// Default 8192.
	SnapshotThreshold uint64
	// SnapshotInterval: how often raft checks SnapshotThreshold. Default 30s.
	SnapshotInterval time.Duration
	// TrailingLogs: logs kept behind a snapshot, so that a follower a little behind catches
	// up from the log rather than a whole snapshot. Default 10240.
	TrailingLogs uint64
	// SnapshotsRetained: snapshot files kept. Default 2.
	SnapshotsRetained int
	// WAL configures the log store's write-ahead log. Default: wal's defaults. Its FS holds
	// the stable store's file (dir/raft) too; raft's snapshot store writes its own files.
	WAL wal.Options
	// Transport, when non-nil, carries raft's messages instead of a TCP transport on
	// BindAddr (which is then not required): raft's in-memory transport in tests and the
	// simulator. The node closes it on Close when it implements raft.WithClose.
	Transport raft.Transport
	// RaftTimeout bounds the transport's I/O with a peer and raft's enqueueing of a
	// request when the caller's context has no deadline. Default 10s.
	RaftTimeout time.Duration
}

// withDefaults fills the zero fields and checks the options.
func (o NodeOptions) withDefaults() (NodeOptions, error) {
	bad := func(format string, args ...any) (NodeOptions, error) {
		return o, fmt.Errorf("%w: %s", ErrNodeOptions, fmt.Sprintf(format, args...))
	}
	if o.ID == "" {
		return bad("ID is required")
	}
	if o.BindAddr == "" && o.Transport == nil {
		return bad("BindAddr is required")
	}
	if len(o.Meta) > MaxMetaBytes {
		return bad("Meta of %d bytes, more than %d", len(o.Meta), MaxMetaBytes)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.HeartbeatTimeout, 500*time.Millisecond)
	def(&o.ElectionTimeout, 500*time.Millisecond)
	def(&o.LeaderLeaseTimeout, 250*time.Millisecond)
	def(&o.CommitTimeout, 10*time.Millisecond)
	def(&o.SnapshotInterval, 30*time.Second)
	def(&o.RaftTimeout, 10*time.Second)
	if o.MaxAppendEntries == 0 {
		o.MaxAppendEntries = 64
	}
	if o.SnapshotThreshold == 0 {
		o.SnapshotThreshold = 8192
	}
	if o.TrailingLogs == 0 {
		o.TrailingLogs = 10240
	}
	if o.SnapshotsRetained == 0 {
		o.SnapshotsRetained = 2
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	for _, d := range []time.Duration{o.HeartbeatTimeout, o.ElectionTimeout, o.LeaderLeaseTimeout,
		o.CommitTimeout, o.SnapshotInterval, o.RaftTimeout} {
		if d < 0 {
			return bad("negative duration %v", d)
		}
	}
	if o.MaxAppendEntries < 0 || o.SnapshotsRetained < 0 {
		return bad("negative MaxAppendEntries or SnapshotsRetained")
	}
	return o, nil
}

func (o NodeOptions) raftConfig(logger *slogLogger) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(o.ID)
	c.HeartbeatTimeout = o.HeartbeatTimeout
	c.ElectionTimeout = o.ElectionTimeout
	c.LeaderLeaseTimeout = o.LeaderLeaseTimeout
	c.CommitTimeout = o.CommitTimeout
	c.MaxAppendEntries = o.MaxAppendEntries
	c.SnapshotThreshold = o.SnapshotThreshold
	c.SnapshotInterval = o.SnapshotInterval
	c.TrailingLogs = o.TrailingLogs
	c.Logger = logger
	// A buffered apply channel: Apply submits under the stamping lock, in stamp order, and
	// with an unbuffered channel each submission would wait for raft's leader loop, which
	// would then find one command per append instead of a batch.
	c.BatchApplyCh = true
	return c
}

// Node is one member of a replicated execstore cluster: raft over TCP, with this package's
// log and stable stores, raft's file snapshot store and the FSM, all under one directory.
// See the package documentation for writes, reads and stamping. A Node is safe for
// concurrent use.
type Node struct {
	opts   NodeOptions
	raft   *raft.Raft
	fsm    *FSM
	logs   *LogStore
	stable *StableStore
	snaps  *raft.FileSnapshotStore
	trans  raft.Transport

	// stampMu orders stamping and submission: commands reach raft in the order of their
	// stamped times, and lastStamp only grows.
	stampMu   sync.Mutex
	lastStamp int64
	readyTerm uint64 // the term in which this node last caught up before stamping

	observer *raft.Observer
	obsCh    chan raft.Observation
	changeMu sync.Mutex
	changed  chan struct{} // closed and replaced on every raft observation
	done     chan struct{} // closed by Close

	closeOnce sync.Once
	closeErr  error

	// The leader's Meta, cached for the leader it was asked of (LeaderMeta).
	metaMu                    sync.Mutex
	metaID, metaAddr, metaVal string
}

// Open opens (or creates) the node's directory and starts raft on it: dir/wal holds the raft
// log (LogStore), dir/raft the term and vote (StableStore), dir/snapshots raft's snapshot
// files (whose contents are package snapshot's format). A directory that holds raft state
// resumes it: the node restores its latest snapshot, replays its log as the leader commits,
// and rejoins its configuration. A new directory holds no configuration: call Bootstrap on
// the first start of a cluster, or have the leader add the node (AddVoter).
//
// hooks configure the node's state machine (FSMOptions): what its owner is told, and the
// lock it shares with an owner that reads the state directly. Restored is also called
// with the node's first, empty state.
func Open(dir string, opts NodeOptions, hooks FSMOptions) (_ *Node, err error) {
	// Every check comes before the directory is touched: refused options create nothing.
	if opts, err = opts.withDefaults(); err != nil {
		return nil, err
	}
	logger := opts.Logger.With("node", opts.ID)
	hl := newSlogLogger(logger)
	cfg := opts.raftConfig(hl)
	if err = raft.ValidateConfig(cfg); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNodeOptions, err)
	}
	var advertise net.Addr
	if opts.AdvertiseAddr != "" && opts.Transport == nil {
		if advertise, err = net.ResolveTCPAddr("tcp", opts.AdvertiseAddr); err != nil {
			return nil, fmt.Errorf("%w: AdvertiseAddr: %v", ErrNodeOptions, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("replica: open node: %w", err)
	}
	n := &Node{opts: opts, changed: make(chan struct{}), done: make(chan struct{})}
	defer func() {
		if err != nil {
			n.closeStores()
		}
	}()
	if n.logs, err = OpenLogStore(filepath.Join(dir, "wal"), opts.WAL); err != nil {
		return nil, err
	}
	if n.stable, err = OpenStableStore(filepath.Join(dir, "raft"), StableOptions{FS: opts.WAL.FS}); err != nil {
		return nil, err
	}
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, "snapshots"), opts.SnapshotsRetained,
		hl.Named("snapshots")); err != nil {
		return nil, fmt.Errorf("replica: open node: %w", err)
	}
	if n.trans = opts.Transport; n.trans == nil {
		layer, err := newMuxLayer(opts.BindAddr, advertise, opts.Meta)
		if err != nil {
			return nil, fmt.Errorf("replica: open node: transport: %w", err)
		}
		n.trans = raft.NewNetworkTransportWithLogger(layer, 3, opts.RaftTimeout, hl.Named("transport"))
	}
	first := fsm.New()
	if hooks.Restored != nil {
		hooks.Restored(first)
	}
	n.fsm = NewFSM(first, 0, hooks)
	if n.raft, err = raft.NewRaft(cfg, n.fsm, n.logs, n.stable, n.snaps, n.trans); err != nil {
		return nil, fmt.Errorf("replica: open node: %w", err)
	}
	n.obsCh = make(chan raft.Observation, 16)
	n.observer = raft.NewObserver(n.obsCh, false, nil)
	n.raft.RegisterObserver(n.observer)
	go n.watch()
	return n, nil
}

// watch turns raft's observations (leader changes, state changes, peers) into wake-ups for
// WaitLeader. raft drops an observation when obsCh is full; one already queued wakes the
// waiters, who then read raft's current state, so nothing is missed.
func (n *Node) watch() {
	for {
		select {
		case <-n.obsCh:
			n.changeMu.Lock()
			close(n.changed)
			n.changed = make(chan struct{})
			n.changeMu.Unlock()
		case <-n.done:
			return
		}
	}
}

func (n *Node) changes() <-chan struct{} {
	n.changeMu.Lock()
	defer n.changeMu.Unlock()
	return n.changed
}

// Changed returns a channel that is closed on the node's next raft observation: a change
// of its state (follower, candidate, leader), of the leader it knows, or of its peers.
// Read State or Leader after it closes, then ask again.
func (n *Node) Changed() <-chan struct{} { return n.changes() }

// Done returns a channel closed when Close begins.
func (n *Node) Done() <-chan struct{} { return n.done }

// voters counts the voting members of the latest configuration; 0 when unknown.
func (n *Node) voters() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	k := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			k++
		}
	}
	return k
}

// VerifyLeader confirms that this node still leads: a quorum answers a round of heartbeats
// in its term. It returns a *NotLeaderError when it does not (raft's VerifyLeader).
func (n *Node) VerifyLeader(ctx context.Context) error { return n.wait(ctx, n.raft.VerifyLeader()) }

// Snapshot asks raft for a snapshot now and returns once it is durable in the snapshot
// store (and the log compacted behind it, keeping TrailingLogs). It returns an error
// wrapping raft.ErrNothingNewToSnapshot when no log was applied since the last one.
func (n *Node) Snapshot(ctx context.Context) error { return n.wait(ctx, n.raft.Snapshot()) }

// Stats is what a node reports of its raft: its state, the leader it knows, its term, and
// its log's and state machine's indexes.
type Stats struct {
	State       raft.RaftState
	LeaderID    string
	LeaderAddr  string
	Term        uint64
	LastIndex   uint64 // the last log stored
	CommitIndex uint64
	Applied     uint64 // the last log given to the FSM
	FirstIndex  uint64 // the first log stored (0: none)
}

// Stats returns the node's raft state and indexes, read without waiting for raft.
func (n *Node) Stats() Stats {
	id, addr := n.Leader()
	first, _ := n.logs.FirstIndex()
	return Stats{State: n.raft.State(), LeaderID: id, LeaderAddr: addr, Term: n.raft.CurrentTerm(),
		LastIndex: n.raft.LastIndex(), CommitIndex: n.raft.CommitIndex(), Applied: n.fsm.Applied(), FirstIndex: first}
}

// Close shuts raft down, closes the transport and the stores. A leader first hands its
// leadership to the most up-to-date follower (raft's leadership transfer, bounded by
// ElectionTimeout), so that the cluster takes writes again within a round trip rather
// than after a heartbeat timeout and an election; if the transfer fails, it shuts down
// anyway and the others elect a new leader. The directory keeps everything for Open. Close
// is idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if n.raft.State() == raft.Leader && n.voters() > 1 {
			f := n.raft.LeadershipTransfer()
			ctx, cancel := context.WithTimeout(context.Background(), n.opts.ElectionTimeout)
			if _, err := n.waitFuture(ctx, f); err != nil {
				n.opts.Logger.Info("replica: leadership transfer on close failed; shutting down anyway", "node", n.opts.ID, "err", err)
			}
			cancel()
		}
		close(n.done)
		n.raft.DeregisterObserver(n.observer)
		if err := n.raft.Shutdown().Error(); err != nil {
			n.closeErr = fmt.Errorf("replica: shut raft down: %w", err)
		}
		if err := n.closeStores(); err != nil && n.closeErr == nil {
			n.closeErr = err
		}
	})
	return n.closeErr
}

// closeStores closes what Open opened; raft, when it runs, must be shut down first.
func (n *Node) closeStores() error {
	var errs []error
	if n.raft == nil && n.trans != nil {
		if c, ok := n.trans.(raft.WithClose); ok {
			errs = append(errs, c.Close())
		}
	}
	if n.logs != nil {
		errs = append(errs, n.logs.Close())
	}
	if n.stable != nil {
		errs = append(errs, n.stable.Close())
	}
	return errors.Join(errs...)
}

func (n *Node) closed() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// ID returns the node's ID.
func (n *Node) ID() string { return n.opts.ID }

// Addr returns the address other nodes reach this node's raft at (the advertised one).
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }

// FSM returns the node's state machine (for its applied index and View).
func (n *Node) FSM() *FSM { return n.fsm }

// Server is one member of the cluster's configuration.
type Server struct {
	ID    string
	Addr  string
	Voter bool
}

// Bootstrap writes the first configuration of a new cluster: peers, which must include this
// node. Call it on the first start only, on one node (or on every initial member with the
// same peers); it returns ErrBootstrapped when the node already holds raft state.
func (n *Node) Bootstrap(peers []Server) error {
	if n.closed() {
		return ErrNodeClosed
	}
	var conf raft.Configuration
	self := false
	for _, p := range peers {
		if p.ID == "" || p.Addr == "" {
			return fmt.Errorf("%w: a peer needs an ID and an address", ErrNodeOptions)
		}
		self = self || p.ID == n.opts.ID
		s := raft.Nonvoter
		if p.Voter {
			s = raft.Voter
		}
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr), Suffrage: s})
	}
	if !self {
		return fmt.Errorf("%w: the peers do not include this node (%s)", ErrNodeOptions, n.opts.ID)
	}
	if err := n.raft.BootstrapCluster(conf).Error(); err != nil {
		if errors.Is(err, raft.ErrCantBootstrap) {
			return ErrBootstrapped
		}
		return fmt.Errorf("replica: bootstrap: %w", err)
	}
	return nil
}

// State returns raft's state: Follower, Candidate, Leader or Shutdown.
func (n *Node) State() raft.RaftState { return n.raft.State() }

// Leader returns the ID and address of the leader this node knows of; empty when none.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// WaitLeader blocks until the node knows a leader (itself or another), or ctx ends. It wakes
// on raft's observations, not by polling.
func (n *Node) WaitLeader(ctx context.Context) (id, addr string, err error) {
	for {
		ch := n.changes()
		if n.closed() {
			return "", "", ErrNodeClosed
		}
		if id, addr = n.Leader(); id != "" {
			return id, addr, nil
		}
		select {
		case <-ch:
		case <-n.done:
			return "", "", ErrNodeClosed
		case <-ctx.Done():
			return "", "", fmt.Errorf("replica: waiting for a leader: %w", ctx.Err())
		}
	}
}

// Servers returns the cluster's latest configuration as this node knows it.
func (n *Node) Servers() ([]Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, n.raftError(err, false)
	}
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// AddVoter adds a voting member (or changes a member's address), on the leader; it returns
// once the new configuration is committed. The new node catches up from the log, or from a
// snapshot when the log was compacted past its end.
func (n *Node) AddVoter(ctx context.Context, id, addr string) error {
	if id == "" || addr == "" {
		return fmt.Errorf("%w: AddVoter needs an ID and an address", ErrNodeOptions)
	}
	return n.wait(ctx, n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, n.enqueueTimeout(ctx)))
}

// RemoveServer removes a member, on the leader; it returns once the new configuration is
// committed. A leader that removes itself steps down.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: RemoveServer needs an ID", ErrNodeOptions)
	}
	return n.wait(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, n.enqueueTimeout(ctx)))
}

// TransferLeadership hands this node's leadership to the voter id once it has caught up
// (raft's leadership transfer: the leader replicates to it, then tells it to start an
// election at once), for maintenance that takes the leader down or to move the leadership
// where it is wanted. It returns when the transfer succeeded or failed, or ctx ended; a node
// that does not lead returns a *NotLeaderError, an id that is not a voter of the latest
// configuration, or this node's own, ErrNodeOptions. Writes are refused while the transfer
// is in progress (raft takes none).
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if id == n.opts.ID {
		return fmt.Errorf("%w: TransferLeadership to the node itself", ErrNodeOptions)
	}
	servers, err := n.Servers()
	if err != nil {
		return err
	}
	for _, s := range servers {
		if s.ID == id && s.Voter {
			return n.wait(ctx, n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(s.Addr)))
		}
	}
	return fmt.Errorf("%w: TransferLeadership to %q, which is not a voter", ErrNodeOptions, id)
}

// enqueueTimeout is how long raft may wait to take a request: ctx's deadline, else
// RaftTimeout.
func (n *Node) enqueueTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return n.opts.RaftTimeout
}

// wait waits for a raft future, or ctx; a future raft refused becomes this package's error.
func (n *Node) wait(ctx context.Context, f raft.Future) error {
	if n.closed() {
		return ErrNodeClosed
	}
	if _, err := n.waitFuture(ctx, f); err != nil {
		return n.raftError(err, false)
	}
	return nil
}

// waitFuture returns f's error, with answered true; or, when ctx ends or the node closes
// first, answered false with ctx's error or ErrNodeClosed (the future's outcome is then
// unknown to the caller). Waiting on the node matters: raft answers no future it still
// holds in its apply or verify queue when it shuts down, so a caller without a deadline
// would wait for ever. The goroutine waiting on such a future stays blocked; there are at
// most MaxAppendEntries of them, and a few, per closed node.
func (n *Node) waitFuture(ctx context.Context, f raft.Future) (answered bool, err error) {
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		return true, err
	case <-n.done:
		select {
		case err := <-errc: // answered as the node closed
			return true, err
		default:
			return false, ErrNodeClosed
		}
	case <-ctx.Done():
		return false, fmt.Errorf("replica: %w (the outcome is unknown)", ctx.Err())
	}
}

// raftError maps raft's errors to this package's: not being (or no longer being) the leader
// becomes a *NotLeaderError naming the leader; shutdown becomes ErrNodeClosed.
func (n *Node) raftError(err error, submitted bool) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		id, addr := n.Leader()
		return &NotLeaderError{LeaderID: id, LeaderAddr: addr}
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		id, addr := n.Leader()
		return &NotLeaderError{LeaderID: id, LeaderAddr: addr, Uncertain: submitted}
	case errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, ErrNodeClosed):
		return ErrNodeClosed
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err // waitFuture's, already explained
	}
	return fmt.Errorf("replica: %w", err)
}

func (n *Node) notLeader() error {
	id, addr := n.Leader()
	return &NotLeaderError{LeaderID: id, LeaderAddr: addr}
}
