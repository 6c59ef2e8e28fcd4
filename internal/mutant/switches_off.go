//go:build !mutants

package mutant

// The switches as the library and the shipped binary see them: constants,
// false, so that every `if mutant.X` is dead code the compiler removes.
// switches_on.go declares the same names as variables for builds with
// -tags mutants; TestEverySwitchIsAConstantFalseWithoutTheTag keeps the two
// lists equal.
const (
	// SkipCRC makes the WAL accept entries whose CRC-32C does not match.
	SkipCRC = false
	// ApplyBeforeLog makes the store apply and answer a batch before it is
	// written and synced (and then still write it).
	ApplyBeforeLog = false
	// SkipFsync makes the WAL skip the fsync after a write.
	SkipFsync = false
	// KeepCoveredWakes makes Acknowledge forget to clear the wakes its lease
	// covered: a suspended execution stays due at its old wake.
	KeepCoveredWakes = false
	// ClaimServesEveryQueue makes a claim that names its queues lease from
	// every queue.
	ClaimServesEveryQueue = false
	// ConcurrencyLimitOneOver makes a claim take one due execution more
	// than a queue's concurrency limit leaves room for.
	ConcurrencyLimitOneOver = false
	// PausedQueueHandsOutOne makes a claim take one due execution of a
	// paused queue.
	PausedQueueHandsOutOne = false
	// RateWindowOneTickShort makes a queue's rate window one nanosecond
	// short: a grant leaves the count a tick before the period has passed.
	RateWindowOneTickShort = false
	// ClaimIgnoresPriority makes a claim of several lanes merge them by
	// time alone, as if every execution had the default priority.
	ClaimIgnoresPriority = false
	// DeadlineFiresTwice makes an execution that ends keep its place in the
	// deadlines' time order, so that its deadline fires after it ended.
	DeadlineFiresTwice = false
	// KeyLimitOneOver gives each concurrency key one slot more than its
	// queue's key limit.
	KeyLimitOneOver = false
	// ReuseToken makes a claim that supersedes an expired lease issue the
	// same token again.
	ReuseToken = false
	// EncodeSkipsLastRecord makes the state encoder count every record but
	// write all of them except the last: a snapshot whose checksum is right
	// and whose state is not.
	EncodeSkipsLastRecord = false
	// SkipTailRewrite makes the WAL trust the page cache when it reopens
	// after an unclean stop: it replays the last segment without rewriting
	// and fsyncing it.
	SkipTailRewrite = false
	// CompactPastKeep makes WAL compaction remove one segment more than it
	// may: the one holding the first entry it was asked to keep.
	CompactPastKeep = false
	// AppendAfterPadding makes the WAL, reopened on a tail segment that
	// ends in padding (the zeros of a prepared file), write its next entries
	// after the padding instead of over it, as upstream tidwall/wal does.
	AppendAfterPadding = false
	// CompactNewestFirst makes WAL compaction remove segment files newest
	// first, so that a crash in the middle leaves a gap in the log.
	CompactNewestFirst = false
	// CancelSparesChildren makes a cancellation end only the execution it
	// names, leaving the children it started running.
	CancelSparesChildren = false
	// CancelTakesLastKeyFirst makes a cancellation end the children an
	// execution started in reverse step key order: every execution of the
	// tree still ends, in another order of changes.
	CancelTakesLastKeyFirst = false
	// AppliedCountsRequests makes the writer advance its applied index by the
	// requests a batch logged instead of the entries it wrote: merged
	// acknowledgements count several times, and the next snapshot claims
	// entries the log does not hold.
	AppliedCountsRequests = false
	// SnapshotSkipDirSync makes snapshot writing skip the directory fsync
	// after the rename: the new snapshot's name is not durable when the
	// store compacts the log behind it.
	SnapshotSkipDirSync = false
	// TokenZeroPasses makes the lease fence treat token 0 as "no token given"
	// and let it through: any caller can renew, release or acknowledge a
	// lease it does not hold.
	TokenZeroPasses = false
	// WakeAtPendingTimeWrites makes a wake at exactly the pending wake's time
	// change the record instead of merging into it.
	WakeAtPendingTimeWrites = false
	// CancelOfTerminalWrites makes a cancel of a terminal execution, which
	// changes nothing, be logged anyway: the answer and the state are what
	// they were, and the log has one entry more.
	CancelOfTerminalWrites = false
	// DispatcherIgnoresLostLease makes a dispatcher acknowledge or release a
	// delivery whose renewal found the lease lost.
	DispatcherIgnoresLostLease = false
	// DispatcherPublishesUnapplied makes a dispatcher publish the terminal
	// record an acknowledgement answered even when the acknowledgement was
	// not applied (the execution had ended under another delivery's lease):
	// the same outcome is published twice.
	DispatcherPublishesUnapplied = false
	// DispatcherDropsClaimOnAckError makes a delivery whose acknowledgement
	// failed drop the lease its round claimed for the slot: the execution
	// stays leased, is never invoked under that lease, and its attempt is
	// spent when the lease expires.
	DispatcherDropsClaimOnAckError = false

	// WorkflowRerunsSavedSteps makes a workflow's rerun ignore a step's
	// saved value and run its step function again (the first saved value is
	// kept, and the rerun returns the new one).
	WorkflowRerunsSavedSteps = false
	// WorkflowSleepsByWorkerClock makes Sleep compute its wake from the
	// worker's own clock (the system's) instead of the store's time.
	WorkflowSleepsByWorkerClock = false

	// RetireAtCutoff makes retirement take a terminal execution whose
	// retention ends exactly at the store's time too: one nanosecond early.
	RetireAtCutoff = false

	// ScheduleKeepsNext makes a schedule's fire forget to advance the
	// schedule to its next occurrence: the occurrence is reached again and
	// again, and every later one never.
	ScheduleKeepsNext = false

	// SuspensionReplayIgnoresTries takes a suspension repeated under the
	// last lease for a replay whenever no lease is current and the record
	// is suspended, without the try count that says the lease's own
	// acknowledgement suspended it: a suspension sent after its lease was
	// released reads as applied.
	SuspensionReplayIgnoresTries = false
	// SnapshotForgetsGrants makes a snapshot hold no claim request keys: a
	// claim repeated after a restart from it leases afresh, stranding the
	// leases the first granted.
	SnapshotForgetsGrants = false

	// ArchiveWriteDropped makes the writer drop what a retire command
	// handed it for the archive: the retired executions are in neither
	// place.
	ArchiveWriteDropped = false
	// SnapshotBeforeArchiveFlush makes a snapshot skip flushing the archive
	// first: the records it no longer holds may be only in the archive's
	// memory when the machine crashes.
	SnapshotBeforeArchiveFlush = false
	// ArchiveKeepsLaterRetirements makes recovery keep what the archive
	// holds of retirements after the snapshot it replays from: the replay
	// then finds executions archived before it retires them.
	ArchiveKeepsLaterRetirements = false
)

// Listing and the change log.
const (
	// ListKeepsReplacedRecords makes the admission table keep pointing to a
	// record's earlier version when a change replaces it (a record a
	// snapshot still shares) without changing its status: List answers
	// with a stale record, and so does every lookup by ID, which goes
	// through the table.
	ListKeepsReplacedRecords = false
	// ChangeSeqRestarts makes the state encoder number the change feed again
	// from 1 (in the same order), as if the sequence restarted at the
	// snapshot: the state is consistent, but after a reopen from it the
	// store hands out positions a consumer has already read.
	ChangeSeqRestarts = false
	// SweepDropsLive makes the writer's sweep of the change log drop the
	// first live entry of each chunk it compacts: an execution's latest
	// change vanishes from the feed.
	SweepDropsLive = false
	// SweepStaysPut makes a sweep step of the change log leave the sweep's
	// position where it was instead of moving it to the next chunk: the
	// steps compact the same chunk again and again and find nothing, and
	// the log keeps every change made since, while every read stays right.
	SweepStaysPut = false
)

// Replication (package replica).
const (
	// ReplicaStampsOwnClock makes a leader stamp commands with its own clock
	// alone, ignoring the state's time and its last stamp: a new leader
	// whose clock is behind stamps times before those already in the log.
	ReplicaStampsOwnClock = false
	// ReplicaRestoreKeepsState makes the replica FSM's Restore check a
	// snapshot and then keep the state it had: a node restarted from its
	// directory, or given a snapshot by the leader, lacks what the snapshot
	// holds.
	ReplicaRestoreKeepsState = false
	// ReplicaRestoreKeepsApplied makes a node that restores a snapshot take
	// its state but keep the applied index it had: the state is right, and
	// a linearizable read on it waits for a log the index says is not yet
	// applied, until the next write, which a quiet cluster never makes.
	ReplicaRestoreKeepsApplied = false
)
