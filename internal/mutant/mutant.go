// Package mutant holds deliberate bugs that the crash simulator must catch.
//
// A harness that never fails proves nothing. Each variable below, when set,
// breaks one guarantee in the real code path that provides it; the
// simulator's mutation tests set one at a time and require that a bounded
// number of seeds finds a violation. Production code never sets them: the
// package is internal to the module, and every variable is false unless a
// test turns it on. Reading a plain bool on the hot path costs nothing
// measurable.
//
// Tests that set a variable must not run in parallel with other tests of the
// same binary, and must reset it (use Set, which returns the reset).
package mutant

var (
	// SkipCRC makes the WAL accept entries whose CRC-32C does not match.
	SkipCRC bool
	// ApplyBeforeLog makes the store apply and answer a batch before it is
	// written and synced (and then still write it).
	ApplyBeforeLog bool
	// SkipFsync makes the WAL skip the fsync after a write.
	SkipFsync bool
	// KeepCoveredWakes makes Acknowledge forget to clear the wakes its lease
	// covered: a suspended execution stays due at its old wake.
	KeepCoveredWakes bool
	// ReuseToken makes a claim that supersedes an expired lease issue the
	// same token again.
	ReuseToken bool
	// EncodeSkipsLastRecord makes the state encoder count every record but
	// write all of them except the last: a snapshot whose checksum is right
	// and whose state is not.
	EncodeSkipsLastRecord bool
	// SkipTailRewrite makes the WAL trust the page cache when it reopens
	// after an unclean stop: it replays the last segment without rewriting
	// and fsyncing it.
	SkipTailRewrite bool
	// CompactPastKeep makes WAL compaction remove one segment more than it
	// may: the one holding the first entry it was asked to keep.
	CompactPastKeep bool
	// AppendAfterPadding makes the WAL, reopened on a tail segment that
	// ends in padding (the zeros of a prepared file), write its next entries
	// after the padding instead of over it, as upstream tidwall/wal does.
	AppendAfterPadding bool
	// CompactNewestFirst makes WAL compaction remove segment files newest
	// first, so that a crash in the middle leaves a gap in the log.
	CompactNewestFirst bool
	// CancelSparesChildren makes a cancellation end only the execution it
	// names, leaving the children it started running.
	CancelSparesChildren bool
	// AppliedCountsRequests makes the writer advance its applied index by the
	// requests a batch logged instead of the entries it wrote: merged
	// acknowledgements count several times, and the next snapshot claims
	// entries the log does not hold.
	AppliedCountsRequests bool
	// SnapshotSkipDirSync makes snapshot writing skip the directory fsync
	// after the rename: the new snapshot's name is not durable when the
	// store compacts the log behind it.
	SnapshotSkipDirSync bool
	// TokenZeroPasses makes the lease fence treat token 0 as "no token given"
	// and let it through: any caller can renew, release or acknowledge a
	// lease it does not hold.
	TokenZeroPasses bool
	// WakeAtPendingTimeWrites makes a wake at exactly the pending wake's time
	// change the record instead of merging into it.
	WakeAtPendingTimeWrites bool
	// DispatcherIgnoresLostLease makes a dispatcher acknowledge or release a
	// delivery whose renewal found the lease lost.
	DispatcherIgnoresLostLease bool
	// DispatcherPublishesUnapplied makes a dispatcher publish the terminal
	// record an acknowledgement answered even when the acknowledgement was
	// not applied (the execution had ended under another delivery's lease):
	// the same outcome is published twice.
	DispatcherPublishesUnapplied bool

	// WorkflowRerunsSavedSteps makes a workflow's rerun ignore a step's
	// saved value and run its step function again (the first saved value is
	// kept, and the rerun returns the new one).
	WorkflowRerunsSavedSteps bool
	// WorkflowSleepsByWorkerClock makes Sleep compute its wake from the
	// worker's own clock (the system's) instead of the store's time.
	WorkflowSleepsByWorkerClock bool

	// RetireAtCutoff makes retirement take a terminal execution whose
	// retention ends exactly at the store's time too: one nanosecond early.
	RetireAtCutoff bool

	// ScheduleKeepsNext makes a schedule's fire forget to advance the
	// schedule to its next occurrence: the occurrence is reached again and
	// again, and every later one never.
	ScheduleKeepsNext bool
)

// Set turns one mutation on and returns the function that turns it off.
func Set(v *bool) (reset func()) {
	*v = true
	return func() { *v = false }
}

// Listing and the change log.
var (
	// ListKeepsReplacedRecords makes the admission table keep pointing to a
	// record's earlier version when a change replaces it (a record a
	// snapshot still shares) without changing its status: List answers
	// with a stale record, and so does every lookup by ID, which goes
	// through the table.
	ListKeepsReplacedRecords bool
	// ChangeSeqRestarts makes the state encoder number the change feed again
	// from 1 (in the same order), as if the sequence restarted at the
	// snapshot: the state is consistent, but after a reopen from it the
	// store hands out positions a consumer has already read.
	ChangeSeqRestarts bool
	// SweepDropsLive makes the writer's sweep of the change log drop the
	// first live entry of each chunk it compacts: an execution's latest
	// change vanishes from the feed.
	SweepDropsLive bool
)

// Replication (package replica).
var (
	// ReplicaStampsOwnClock makes a leader stamp commands with its own clock
	// alone, ignoring the state's time and its last stamp: a new leader
	// whose clock is behind stamps times before those already in the log.
	ReplicaStampsOwnClock bool
	// ReplicaRestoreKeepsState makes the replica FSM's Restore check a
	// snapshot and then keep the state it had: a node restarted from its
	// directory, or given a snapshot by the leader, lacks what the snapshot
	// holds.
	ReplicaRestoreKeepsState bool
)

// All names every switch, for a command that sets one by name (the
// simulator's -mutant flag). TestAllNamesEverySwitch keeps it complete.
var All = map[string]*bool{
	"SkipCRC":                      &SkipCRC,
	"ApplyBeforeLog":               &ApplyBeforeLog,
	"SkipFsync":                    &SkipFsync,
	"KeepCoveredWakes":             &KeepCoveredWakes,
	"ReuseToken":                   &ReuseToken,
	"EncodeSkipsLastRecord":        &EncodeSkipsLastRecord,
	"SkipTailRewrite":              &SkipTailRewrite,
	"CompactPastKeep":              &CompactPastKeep,
	"CompactNewestFirst":           &CompactNewestFirst,
	"AppendAfterPadding":           &AppendAfterPadding,
	"CancelSparesChildren":         &CancelSparesChildren,
	"AppliedCountsRequests":        &AppliedCountsRequests,
	"SnapshotSkipDirSync":          &SnapshotSkipDirSync,
	"TokenZeroPasses":              &TokenZeroPasses,
	"WakeAtPendingTimeWrites":      &WakeAtPendingTimeWrites,
	"DispatcherIgnoresLostLease":   &DispatcherIgnoresLostLease,
	"DispatcherPublishesUnapplied": &DispatcherPublishesUnapplied,
	"WorkflowRerunsSavedSteps":     &WorkflowRerunsSavedSteps,
	"WorkflowSleepsByWorkerClock":  &WorkflowSleepsByWorkerClock,
	"RetireAtCutoff":               &RetireAtCutoff,
	"ScheduleKeepsNext":            &ScheduleKeepsNext,
	"ListKeepsReplacedRecords":     &ListKeepsReplacedRecords,
	"ChangeSeqRestarts":            &ChangeSeqRestarts,
	"SweepDropsLive":               &SweepDropsLive,
	"ReplicaStampsOwnClock":        &ReplicaStampsOwnClock,
	"ReplicaRestoreKeepsState":     &ReplicaRestoreKeepsState,
}
