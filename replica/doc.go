// Package replica runs execstore's state machine (package fsm) on hashicorp/raft: the
// replicated store's node (Node) and its building blocks, raft's three storage interfaces
// and its FSM, each on what the single-node store already uses:
//
//	raft.LogStore     LogStore     raft's log, one wal entry per raft log (package wal)
//	raft.StableStore  StableStore  term and vote, in one small file replaced atomically
//	raft.BatchingFSM  FSM          *fsm.State; snapshots in package snapshot's format
//
// # What raft owns, what we own
//
// raft owns agreement: elections, terms and votes, which log entries are committed,
// replication to followers, membership, and when to snapshot. It decides which logs to
// store, delete and apply; it never looks inside a command. We own everything that
// touches the disk or the state: the log's bytes (our wal's framing, CRC-32C, torn-tail
// repair, fail-stop), the stable store's file, the state machine and the snapshot format.
// The transport and raft's snapshot store (FileSnapshotStore: temporary directory, fsync,
// rename, directory fsync, CRC-64 over the bytes, keep the newest N) are raft's own.
//
// # The log
//
// A raft log is stored at the same index in the wal, so the wal's frame checks that every
// entry sits where it belongs and that its bytes are the ones written. The payload is the
// raft.Log's other fields behind a version byte (type, term, the leader's AppendedAt, data,
// extensions; see codec.go). StoreLogs appends one raft batch (up to MaxAppendEntries logs)
// with one wal Write: one write and one fsync, as the single-node store's group commit.
//
// raft deletes logs three ways, and each maps onto one wal operation:
//
//   - a prefix, after a snapshot (compaction, from raft's snapshot goroutine): wal.CompactTo
//     removes the whole segment files the prefix covers, without holding up writes. raft's
//     view moves at once; the entries of a partly covered segment stay on disk until a later
//     compaction, and show again after a reopen. They are committed entries the snapshot
//     covers, identical on every node, so raft may read them or delete them again.
//   - a suffix, when a follower's log conflicts with a new leader's: wal.TruncateBack, which
//     takes segment files out newest first and cuts the segment holding the new last entry,
//     each step durable before the next, so that a crash leaves a prefix of the old log,
//     never a hole (see the wal package's "Truncating the back").
//   - everything, after a follower installed a snapshot. LogStore is a
//     raft.MonotonicLogStore: it accepts no gaps, so raft removes all logs once the snapshot
//     is restored, and the next StoreLogs starts the log again at the snapshot's index + 1,
//     whatever the log held before. wal.Reset empties the log and restarts its numbering,
//     each step again leaving a log Open accepts.
//
// A range strictly inside the log is refused (raft never asks for one), and so are logs that
// do not continue the log; a refusal changes nothing. A storage error fail-stops the wal
// (every later change fails until the store is reopened), and reopening finds a log each
// of these operations may leave after a crash.
//
// # Why our wal and not raft-boltdb
//
// Measured with raft.LogStore alone (bench/raftlog: cd bench/raftlog && go test -run '^$'
// -bench . -benchtime 2s -count 3), on the 2-core machine the project's benchmarks use (ext4,
// about 160 us per fsync), with a load average near 3 from other work, 100-byte logs, every
// batch fsynced before the next; medians of three runs:
//
//	                              our wal           raft-boltdb v2.3.1
//	StoreLogs, batches of 1       5,710 logs/s      3,230 logs/s         1.8x
//	StoreLogs, batches of 64      224,000 logs/s    74,900 logs/s        3.0x
//	GetLog, random, 20,000 held   0.50 us           4.1 us               8x
//
// An append is one write and one fsync of the tail segment; a bbolt commit writes pages
// and its meta page with two fdatasyncs, and a batch of 64 rewrites B+tree pages. Reads of
// recent logs come from the tail segment, which tidwall keeps in memory; bbolt decodes
// each log with msgpack. Beyond speed: our wal's checksums, torn-tail repair and fail-stop
// are the ones the single-node store's crash simulator exercises, the raft log and the
// single-node log are one format to inspect and repair, and the library gains no bbolt
// dependency. The cost we accept: GetLog of an entry in an older, uncached segment loads
// that segment (at most 16 MiB) whole, which a follower far behind pays once per segment
// (raft reads sequentially, and the wal caches two); raft's LogCache in front keeps recent
// logs for replication either way. hashicorp/raft-wal was not measured (it was not at
// hand); it shares our design (segment files, monotonic, CRC) and our reasons would be the
// same three beyond speed.
//
// # The stable store
//
// raft keeps its current term and its vote with Set/SetUint64 and needs them durable before
// it acts on them (a node that forgot its vote could vote twice in one term). StableStore
// writes its whole contents (a few keys) to a temporary file, fsyncs it, renames it over
// the file and fsyncs the directory; the file is checksummed, and a damaged one refuses to
// open rather than read as empty. A failed write fail-stops it, as the wal does.
//
// # The state machine
//
// FSM applies each command log's data, one command in fsm's codec, with fsm.State.Apply, and
// answers raft's future with the command's fsm.Result. ApplyBatch applies a committed batch
// under one lock, so that the single-node store's group commit survives replication: one
// raft batch, one fsync on each node, one pass through the state. Applying is
// deterministic, because the state machine is: the adapter reads no clock, no randomness
// and no file (a test checks its imports), and ignores a log's AppendedAt. A command's time,
// its generated IDs and a schedule's occurrences are in the command; lease tokens come from
// counters in the state. Every replica therefore applies identical commands and holds
// identical state, byte for byte (the cluster tests compare encodings).
//
// Snapshot captures the state with fsm.State.Copy, O(1) (the btrees are copy-on-write), on
// raft's FSM goroutine; Persist, on raft's snapshot goroutine, writes it with
// snapshot.Encode while Apply goes on: the bytes are those of a single-node snapshot file
// (header, fsm.State.Encode, CRC-32C), inside raft's snapshot store. Restore decodes with
// snapshot.Decode, checking the checksum and the state's structure, and adopts the state
// only if all of it is sound.
//
// # The node
//
// Open runs one member of a cluster under one directory:
//
//	dir/wal/        raft's log (LogStore, our wal)
//	dir/raft/       term and vote (StableStore)
//	dir/snapshots/  raft's FileSnapshotStore; each snapshot's data is package snapshot's format
//
// with raft's TCP transport on NodeOptions.BindAddr, the FSM, and raft's messages sent to a
// *slog.Logger (a small hclog adapter, hclog.go). The snapshot store is raft's own because
// it already does what ours would (temporary directory, fsync, rename, directory fsync,
// CRC-64, keep the newest N), and raft's metadata (index, term, configuration) belongs to
// raft; what is inside is ours, the bytes of a single-node snapshot file, so the same
// decoder and checks read both. Bootstrap writes the first configuration of a new cluster;
// a directory that holds raft state resumes it (Bootstrap then returns ErrBootstrapped, it
// never bootstraps twice). Close shuts raft down, which closes the transport, then closes
// the stores. Callers still waiting get ErrNodeClosed at once: raft answers no request it
// still holds in its queues when it shuts down (with BatchApplyCh its apply queue holds up
// to MaxAppendEntries commands), so the node waits on its own closing as well as on raft.
//
// Default timeouts are for nodes on one network: heartbeat and election 500ms (raft's
// defaults, 1s, are sized for WANs), leader lease 250ms, commit 10ms. A leader closed or
// lost is replaced in about one to two heartbeat timeouts (measured below).
// SnapshotThreshold 8192 logs, checked every 30s, with 10240 TrailingLogs kept behind a
// snapshot so that a follower briefly away catches up from the log. MaxAppendEntries 64:
// one append, and one fsync on each node, covers up to 64 commands.
//
// # Writes: the leader stamps
//
// Apply and ApplyBatch run on the leader: they check each command (fsm.Command.Check, a
// refused one costs nothing, not even a log), stamp the time, encode the command and hand
// each to raft.Apply, then wait for the FSM's result on this node. Stamping and submission
// happen under one lock, so the log holds stamped times in order; raft's apply channel is
// buffered (BatchApplyCh), so that concurrent callers still fill one append. The time is
//
//	Now = max(the node's clock, the last time it stamped, the applied state's Meta().Now)
//
// and, once in each term before its first stamp, the leader applies a raft barrier so that
// its state includes every log an earlier leader committed. Store time therefore never goes
// backwards across a leader change, even when the new leader's clock is behind the old
// one's (a test sets it an hour behind and reads every stamp in the log). A batch shares
// one time.
//
// Lease tokens are not stamped: each execution's LastToken is in the replicated state and a
// claim takes the next one, so a claim applied under a new leader continues the counter
// (the tests check every token an execution gets exceeds its earlier ones, across a
// failover, and porcupine checks no execution is leased twice at once). Generated IDs are
// made by the root package before the writer (ids.go: newID from Options.Now and 80 random
// bits, put in the command as ExecutionID with Generated, or as a start's ChildID), so they
// too are data in the log and no replica generates one; a taken one is replaced by the
// state machine deterministically. Phase 3 must build them on the leader from the stamped
// time rather than the local clock, so that generated IDs keep sorting by creation across a
// leader whose clock is behind.
//
// On a follower, or a leader deposed before it submitted, writes return a *NotLeaderError
// (wrapping ErrNotLeader) naming the leader this node knows, and submit nothing. A leader
// that loses its leadership after submitting returns one with Uncertain set: the command
// may still commit under the next leader, exactly as after a timeout, so a client that
// retries must make the command idempotent (an admission with its own ID is). So may a
// command whose node was closed while it waited (ErrNodeClosed). Applied.Index tells where
// the log put a command: the committed log that answered it, or the one a lost leader
// appended it at.
//
// # Reads
//
// Read is linearizable: it sees every write completed before it was called. It is the read
// index of the raft paper. raft.VerifyLeader confirms this node still leads (a quorum
// answers heartbeats in its term); the node's last log index at that moment is at or above
// every committed log (a confirmed leader's log holds them all, and its term's no-op,
// appended before it serves anything, follows them); the read waits until the FSM has been
// given the last command or configuration log up to that index (raft gives no-ops and
// barriers to no FSM) and then runs under the FSM's read lock. Waiting uses FSM.WaitApplied,
// which sleeps on a channel the FSM closes whenever it advances: no polling. The cost is a
// round of heartbeats per read, and a read waits for writes submitted before it to commit.
// A leader lease (reading without the heartbeat round while the lease holds) would be
// cheaper but trusts clocks; it is not used.
//
// ReadStale reads this node's state as it is, on any node, without asking anyone: it may
// lag the cluster by what the node has not yet received or applied, never shows an
// uncommitted write, and, on one node, never goes backwards. It is for followers answering
// reads that tolerate staleness.
//
// # Membership
//
// AddVoter and RemoveServer run on the leader and return once the new configuration is
// committed; a new node starts with an empty directory, without Bootstrap, and catches up
// from the log or from a snapshot. Leader, Servers, State and WaitLeader (which wakes on
// raft's observations, not by polling) report what this node knows.
//
// # Measured
//
// Three nodes on loopback TCP on one 2-core machine shared with other work, every append
// fsynced on each node, default options (cd replica && go test -run '^$' -bench
// NodeApplyAdmit -benchtime 2s; -bench NodeFailover -benchtime 5x):
//
//	admissions, 1 caller           1,320 commands/s   (about 0.76 ms each)
//	admissions, 64 callers        17,600 commands/s
//	failover (leader closed to     1.09 s median of 5  (heartbeat timeout 500ms)
//	first write on the next)
//
// Since Close hands a leader's leadership over first, the failover benchmark measures that
// handover: 9 ms median of 5 (-bench NodeFailover -benchtime 5x, after the envelopes). A
// leader that crashes is still replaced after a heartbeat timeout and an election, as
// measured above.
//
// The single-node store on the same machine, same hour (go test -run '^$' -bench
// 'Admit/sync=true' . in the repository's root): 3,800 admissions/s from 1 caller, 59,800
// from 64. Replication costs a network round trip and a second fsync in each commit, and
// the three nodes share one disk and two cores here. Without BatchApplyCh, 64 callers
// reached 3,400 commands/s: each append carried one command.
//
// ApplyBatch calls larger than MaxAppendEntries replicate slowly: ApplyBatch submits each
// command as its own raft log, and raft's pipelined replication sends a follower one append
// of at most MaxAppendEntries logs for each batch the leader appends (notifications that
// pile up count once) or each CommitTimeout (10-20ms), so a leader whose log runs ahead of
// a follower by more than one append feeds it about MaxAppendEntries logs per
// CommitTimeout. Propose puts a batch in one log (an envelope) and is not held back.
// Admissions on the same cluster (-bench NodeApplyBatch -benchtime 2s -count 2; the load
// average near 2):
//
//	                                       MaxAppendEntries 64      MaxAppendEntries 1,024
//	ApplyBatch, 1 caller, calls of 1,024   4,700 commands/s         91,000 commands/s
//	ApplyBatch, 16 callers, calls of 64    33,000-42,000            85,000-87,000
//	Propose, 1 caller, calls of 1,024      105,000-135,000          141,000
//
// A caller of ApplyBatch with thousands of commands at once (a bulk import) should use
// Propose, or raise MaxAppendEntries.
//
// A replaced disk (a follower stopped, its directory emptied, restarted with the same ID
// and address) catches up with 10^6 records in about a second, from the log or from a
// snapshot. Three nodes filled with 10^6 admissions by Propose calls of 4,096, default
// options with raft's timed snapshots, a snapshot taken on the leader, then a follower's
// disk replaced; timed from its restart until its FSM applied the leader's last log (go
// test -run '^$' -bench ReplacedDiskCatchUp -benchtime 1x -timeout 1h -v ./replica; two
// runs, the load average near 2):
//
//	filling 10^6 admissions                        3.1 to 5.9 s: 168,000 to 321,000 /s
//	the leader's snapshot                          75,967,047 bytes (72.4 MiB, 76 bytes a record)
//	caught up from the log (defaults)              1.08 s and 1.42 s: 930,000 and 700,000 records/s
//	caught up from the snapshot (TrailingLogs 8)   1.22 s and 1.26 s: 820,000 and 800,000 records/s
//
// With envelopes, 10^6 admissions are about 250 logs, far fewer than the 10,240
// TrailingLogs a snapshot keeps behind it: with the default options a replaced disk
// replays the leader's log; with few trailing logs it installs the snapshot. Of the
// snapshot path nearly all is the snapshot (the follower's FSM was given the decoded state
// within a millisecond of the end): the leader sends it, the follower writes it to its
// snapshot store (fsynced) and decodes it whole. The test process peaked at about 3.3 GB
// resident (three states of 10^6 records in one process).
//
// # Behind the public API
//
// execstore.OpenReplicated builds a Store on a Node. Its writer, on the leader, does what it
// does on one node up to the log: validate, precheck against the state (answering no-ops
// without logging them), group acknowledgements; then Propose, which catches up and stamps
// under the node's stamping lock, calls back for the encoded commands and submits them as one
// raft log, an envelope of the batch's commands (envelope.go), so that raft's work per log is
// paid once per batch as the single-node store pays one wal batch. FSMOptions carries the store's hooks: Lock (the store reads the state under the
// FSM's lock), Adopted (the store follows a restored state), Applied (Await-ers, the change
// feed and dispatchers are woken on every node from what was applied). NodeOptions.Meta is
// told over the node's raft port (meta.go: every connection names its service in its first
// byte), which serve uses to find the leader's API.
package replica
