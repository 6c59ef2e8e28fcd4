// Package replica runs execstore's state machine (package fsm) on hashicorp/raft: the
// building blocks of the replicated store. It holds raft's three storage interfaces and its
// FSM, each on what the single-node store already uses:
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
// # What a later phase wires into the root package
//
// execstore.OpenReplicated builds a Store whose writer, on the leader, does what it does now
// up to the log: validate a command, stamp it (time = max(the state's clock, the leader's
// clock), so that time never goes backwards across leader changes even when a new leader's
// clock is behind; generated IDs; schedule occurrences), precheck it against the state to
// answer no-ops without logging them, then hand a batch to raft.Apply instead of the wal;
// results come back through the futures, from FSM. On a follower, writes return
// ErrNotLeader carrying the leader's address (raft.LeaderWithID), and serve forwards them or
// redirects with 307. Reads are linearizable by default: the store checks it is still
// leader (raft.VerifyLeader, a round of heartbeats; or the read-index: note the commit
// index, confirm leadership, wait until FSM applied up to it) before reading the state; an
// explicit stale-read option lets a follower answer from its own state. Tokens never
// repeat across leader changes because they come from the replicated state, not from the
// leader. Awaiters and the dispatcher are woken from FSM's applied results on every node.
// Retention must call fsm.State.TrackRetirement on the initial state and, through
// FSMOptions.Restored, on every restored one.
package replica
