// Package snapshot writes and reads point-in-time snapshots of the state
// machine, so that a store reopens from its newest snapshot plus the
// write-ahead log after it, instead of replaying every command ever logged.
//
// # File layout
//
// A snapshot is one file, named after the last WAL index it covers, so that
// file names sort in the order of the log they cover:
//
//	snapshots/snapshot-<index, 20 digits>.snap
//
//	+----------+---------+------------+--------+-----------+---------------+-----------+
//	| magic    | version | last index | clock  | records   | state         | CRC-32C   |
//	| 8 bytes  | u32 LE  | u64 LE     | i64 LE | u64 LE    | fsm encoding  | u32 LE    |
//	+----------+---------+------------+--------+-----------+---------------+-----------+
//	  "EXSNAP\r\n"                                          (fsm.State.Encode)  over every
//	                                                                            byte before it
//
// The magic, the version and the layout are part of the snapshot format.
// The header repeats what recovery needs before decoding (the index the WAL
// continues after, the store's clock) and what an operator wants to see
// (the record count). The checksum covers the whole file, header included:
// a snapshot that fails it is skipped, loudly, never trusted.
//
// # Writing safely
//
// Write follows the recipe that survives a crash at any instant: write to
// snapshot-<index>.snap.tmp, fsync it, rename it to its final name, fsync the
// directory. A crash before the rename leaves a temporary file that the next
// write or Prune removes; after it, the snapshot is whole. The state is
// encoded from an fsm.State.Copy, which is O(1) to take, so the store's
// writer never waits for the encoding. Every one of those steps, and each
// removal of Prune, goes through Options.FS, so that a filesystem that
// injects faults (vfs.WithFaults) can fail any of them: Write and Prune then
// return the error.
//
// # Streams
//
// Encode and Decode write and read the same format to any stream, for a replicated store
// whose consensus library keeps and sends snapshots in its own files (hashicorp/raft's
// FileSnapshotStore: temporary directory, fsync, rename, directory fsync, and its own
// checksum over the bytes). A snapshot sent to a follower is thus byte for byte the file a
// single-node store would write for the same state and header. Decode verifies the
// checksum as it reads, since a stream cannot be read twice; the state is returned only
// once it matched.
//
// # Choosing one
//
// List returns the snapshot files newest first. Recovery tries them in that
// order and uses the first that reads back whole (checksum, version, decode)
// and that the WAL still continues. Prune keeps the newest two, so a corrupt
// newest snapshot falls back to the older one plus a longer WAL tail, which
// the store never truncates past the older kept snapshot.
package snapshot
