// Package archive keeps the executions a store has retired, on disk, out of
// its memory: an ID stays taken for ever and "how did it end?" is answered
// for ever, while the state machine, its snapshots and its restarts hold the
// live set alone.
//
// # Engine
//
// The archive is a Pebble database (github.com/cockroachdb/pebble/v2), chosen
// over bbolt by the measurement in docs/design/archive-engine.md: zstd block
// compression, bloom filters on every level over the records' keys alone
// (read on L6 too, for admission's absent check; the index entries are only
// scanned), a block cache of its own outside the Go heap. Its keys are in four
// spaces, by their first byte:
//
//	r ID                          the record (fsm.AppendArchived), then any
//	                              older ones of the ID (see Forgetting)
//	w workflow:str updated:8B ID  by workflow, then time (empty value)
//	t updated:8B ID               by time (value: status:1B workflow, for
//	                              counting without the record; empty in an
//	                              archive written before, which reads it)
//	x index:8B ID                 by the log index of the retire command (empty value)
//
// Times are big-endian with the sign bit flipped, so that bytes sort as
// times; indexes are big-endian. A record and its three index entries are
// written in one batch, so an index entry never lacks its record: a listing
// that finds one reports corruption, never a shorter page.
//
// # Durability without a second log
//
// Pebble's own write-ahead log is off: the store's log already holds every
// retire command, and replaying one rewrites the same keys with the same
// values. A Put is a memtable insert; Flush writes the memtables to synced
// tables. The store keeps one rule: the archive is flushed through log index
// X before a snapshot at X (which no longer holds those records) is written.
// At open, before the log is replayed from the snapshot at X, TrimAfter(X)
// removes what the archive holds of retirements after X (a memtable Pebble
// flushed on its own may hold some): the replay retires them again, in order,
// so the archive holds exactly what the applied log retired whenever a command
// is applied, which the state machine's decisions depend on (fsm.Archive).
//
// # Forgetting
//
// A store that forgets (fsm.KindForget) may admit a forgotten ID again, while
// the old record is still here: the state machine no longer sees it (it was
// updated before the forget cutoff), but a replay from a snapshot taken
// before the forget still would. So PutMerging keeps it: the new record goes
// first in the ID's value, the older ones after it, each with its own index
// entries. Reads take the first; TrimAfter takes out the records retired
// after its index and leaves the older ones; Forget(cutoff) deletes every
// record updated before the cutoff, once the store holds no snapshot it may
// recover from that still counts them as archived.
//
// # Errors
//
// A value that does not decode, an index entry without its record, or an
// error of the engine is an error, never "not found": a read that fails must
// not let an ID be admitted twice.
package archive
