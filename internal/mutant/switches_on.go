//go:build mutants

package mutant

// The switches as variables, in builds with -tags mutants only: a test or
// the simulator's -mutant flag turns one on. Each is documented where the
// default build declares it as a constant (switches_off.go).
var (
	SkipCRC                        bool
	ApplyBeforeLog                 bool
	SkipFsync                      bool
	KeepCoveredWakes               bool
	ReuseToken                     bool
	ClaimServesEveryQueue          bool
	ConcurrencyLimitOneOver        bool
	PausedQueueHandsOutOne         bool
	RateWindowOneTickShort         bool
	ClaimIgnoresPriority           bool
	DeadlineFiresTwice             bool
	KeyLimitOneOver                bool
	EncodeSkipsLastRecord          bool
	SkipTailRewrite                bool
	CompactPastKeep                bool
	AppendAfterPadding             bool
	CompactNewestFirst             bool
	CancelSparesChildren           bool
	CancelTakesLastKeyFirst        bool
	AppliedCountsRequests          bool
	SnapshotSkipDirSync            bool
	TokenZeroPasses                bool
	WakeAtPendingTimeWrites        bool
	CancelOfTerminalWrites         bool
	DispatcherIgnoresLostLease     bool
	DispatcherPublishesUnapplied   bool
	DispatcherDropsClaimOnAckError bool
	WorkflowRerunsSavedSteps       bool
	WorkflowSleepsByWorkerClock    bool
	RetireAtCutoff                 bool
	ScheduleKeepsNext              bool
	SuspensionReplayIgnoresTries   bool
	SnapshotForgetsGrants          bool
	ArchiveWriteDropped            bool
	SnapshotBeforeArchiveFlush     bool
	ArchiveKeepsLaterRetirements   bool
)

// Listing and the change log.
var (
	ListKeepsReplacedRecords bool
	ChangeSeqRestarts        bool
	SweepDropsLive           bool
	SweepStaysPut            bool
)

// Replication (package replica).
var (
	ReplicaStampsOwnClock      bool
	ReplicaRestoreKeepsState   bool
	ReplicaRestoreKeepsApplied bool
)

// Set turns one mutation on and returns the function that turns it off.
func Set(v *bool) (reset func()) {
	*v = true
	return func() { *v = false }
}

// All names every switch, for a command that sets one by name (the
// simulator's -mutant flag). TestAllNamesEverySwitch keeps it complete.
var All = map[string]*bool{
	"SkipCRC":                        &SkipCRC,
	"ApplyBeforeLog":                 &ApplyBeforeLog,
	"SkipFsync":                      &SkipFsync,
	"KeepCoveredWakes":               &KeepCoveredWakes,
	"ReuseToken":                     &ReuseToken,
	"ClaimServesEveryQueue":          &ClaimServesEveryQueue,
	"ConcurrencyLimitOneOver":        &ConcurrencyLimitOneOver,
	"PausedQueueHandsOutOne":         &PausedQueueHandsOutOne,
	"RateWindowOneTickShort":         &RateWindowOneTickShort,
	"ClaimIgnoresPriority":           &ClaimIgnoresPriority,
	"DeadlineFiresTwice":             &DeadlineFiresTwice,
	"KeyLimitOneOver":                &KeyLimitOneOver,
	"EncodeSkipsLastRecord":          &EncodeSkipsLastRecord,
	"SkipTailRewrite":                &SkipTailRewrite,
	"CompactPastKeep":                &CompactPastKeep,
	"AppendAfterPadding":             &AppendAfterPadding,
	"CompactNewestFirst":             &CompactNewestFirst,
	"CancelSparesChildren":           &CancelSparesChildren,
	"CancelTakesLastKeyFirst":        &CancelTakesLastKeyFirst,
	"AppliedCountsRequests":          &AppliedCountsRequests,
	"SnapshotSkipDirSync":            &SnapshotSkipDirSync,
	"TokenZeroPasses":                &TokenZeroPasses,
	"WakeAtPendingTimeWrites":        &WakeAtPendingTimeWrites,
	"CancelOfTerminalWrites":         &CancelOfTerminalWrites,
	"DispatcherIgnoresLostLease":     &DispatcherIgnoresLostLease,
	"DispatcherPublishesUnapplied":   &DispatcherPublishesUnapplied,
	"DispatcherDropsClaimOnAckError": &DispatcherDropsClaimOnAckError,
	"WorkflowRerunsSavedSteps":       &WorkflowRerunsSavedSteps,
	"WorkflowSleepsByWorkerClock":    &WorkflowSleepsByWorkerClock,
	"RetireAtCutoff":                 &RetireAtCutoff,
	"ScheduleKeepsNext":              &ScheduleKeepsNext,
	"SuspensionReplayIgnoresTries":   &SuspensionReplayIgnoresTries,
	"SnapshotForgetsGrants":          &SnapshotForgetsGrants,
	"ArchiveWriteDropped":            &ArchiveWriteDropped,
	"SnapshotBeforeArchiveFlush":     &SnapshotBeforeArchiveFlush,
	"ArchiveKeepsLaterRetirements":   &ArchiveKeepsLaterRetirements,
	"ListKeepsReplacedRecords":       &ListKeepsReplacedRecords,
	"ChangeSeqRestarts":              &ChangeSeqRestarts,
	"SweepDropsLive":                 &SweepDropsLive,
	"SweepStaysPut":                  &SweepStaysPut,
	"ReplicaStampsOwnClock":          &ReplicaStampsOwnClock,
	"ReplicaRestoreKeepsState":       &ReplicaRestoreKeepsState,
	"ReplicaRestoreKeepsApplied":     &ReplicaRestoreKeepsApplied,
}
