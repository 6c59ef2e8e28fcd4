package fsm

// Kind names a command. The numeric values are part of the WAL format: never
// renumber them.
type Kind uint8

const (
	KindAdmit       Kind = 1
	KindWake        Kind = 2
	KindClaim       Kind = 3
	KindRenew       Kind = 4
	KindRelease     Kind = 5
	KindAcknowledge Kind = 6
	KindSaveStep    Kind = 7
	KindStart       Kind = 8
	KindCommit      Kind = 9
	KindWatch       Kind = 10
	KindRetire      Kind = 11
	// KindAcknowledgeBatch is several acknowledgements in one command (one
	// WAL entry), applied in order, each exactly as its own acknowledge
	// command would be and with its own result.
	KindAcknowledgeBatch Kind = 12
	// KindCancel ends a non-terminal execution, and every non-terminal
	// execution it started (recursively), with StatusCancelled.
	KindCancel Kind = 13
	// KindForget forgets the archived executions last updated before a
	// cutoff (forget.go).
	KindForget Kind = 14
)

// Schedules' commands (schedule.go).
const (
	// KindPutSchedule creates or replaces a schedule.
	KindPutSchedule Kind = 20
	// KindDeleteSchedule removes a schedule.
	KindDeleteSchedule Kind = 21
	// KindFireSchedules reaches schedules' due occurrences: it admits an
	// execution for each the catch-up policy keeps, and advances each
	// schedule to its next occurrence.
	KindFireSchedules Kind = 22
)

// Queues' settings commands (queue_settings.go).
const (
	// KindPutQueue creates or replaces a queue's settings.
	KindPutQueue Kind = 23
	// KindDeleteQueue removes a queue's settings.
	KindDeleteQueue Kind = 24
)

// KindExpireDeadlines ends the executions whose deadlines have passed
// (deadline.go).
const KindExpireDeadlines Kind = 25

func (k Kind) String() string {
	if d := kindOf(k); d != nil {
		return d.name
	}
	return "kind(" + itoa(uint64(k)) + ")"
}

// Command is one state transition. It carries everything Apply needs: the
// time it happens at and any generated IDs, so that applying the same commands
// to the same state always gives the same state and results.
//
// Command is a union: each kind uses the fields its comment names. The Store
// validates a command's values (sizes, JSON, UTF-8) BEFORE it is logged;
// Apply checks only what depends on the state.
type Command struct {
	Kind Kind
	Now  int64 // the command's time, nanoseconds since the Unix epoch

	// ExecutionID: the execution acted on (admit: the chosen or generated ID;
	// start: the caller).
	ExecutionID string
	// Generated (admit): the store chose ExecutionID; if it is taken, Apply
	// derives another instead of reporting a conflict.
	Generated bool

	WorkflowID string // admit, start
	Params     string // admit, start; meaningful only when HasParams
	HasParams  bool
	Context    *[]KV // admit: sorted by key, unique keys; nil: no context

	At       int64  // wake: the requested time
	Limit    int    // claim: the most executions to lease
	Duration int64  // claim, renew: lease duration; release: retry delay (ns)
	Token    uint64 // renew, release, acknowledge, save-step, start

	Outcome Outcome // acknowledge

	Key     string // save-step, start: the step key
	Value   string // save-step: the step value
	ChildID string // start: a generated ID for the child

	Writes []Write  // commit
	Keys   []string // watch: sorted, unique
	Acks   []Ack    // acknowledge-batch: 1 to MaxAcksPerCommand

	// Cancellation and bounded attempts (codec version 2).
	MaxAttempts int        // admit: 0 (no bound) to MaxAttempts
	Cause       *ErrorInfo // release: why the delivery ended; nil: none given
	Reason      string     // cancel: kept as the cancelled outcome's error message
	// put-schedule: the schedule, with At its first occurrence after Now (0:
	// none) and Limit the most schedules there may be.
	Schedule   *ScheduleDef
	ScheduleID string // delete-schedule
	Fires      []Fire // fire-schedules: 1 to MaxFiresPerCommand

	// retire: terminal executions last updated before At lose their params,
	// context and steps; at most Limit of them, oldest first.

	// claim (codec version 3): the request key, "" for none. A repeat with
	// the key answers the leases the first granted (claimkeys.go).
	RequestKey string

	// forget (codec version 4): archived executions last updated before At
	// are forgotten; Forgotten counts those updated at or after the state's
	// previous cutoff, by workflow and status, sorted, unique.
	Forgotten []ForgetCount

	// Queues (codec version 5, queues.go). Queue (admit, start): the new
	// execution's queue; "" or the workflow ID: the default queue, named
	// after the workflow ID. Queues (claim): the queues the claim serves,
	// sorted, unique, not empty, at most MaxClaimQueues; none: every queue.
	Queue  string
	Queues []string
	// Priority (admit, codec version 8, priority.go): 0 for the default, or
	// PriorityFirst to PriorityLast.
	Priority int
	// Deadline (admit, start, codec version 9, deadline.go): when the new
	// execution fails unless it has ended; 0: none.
	Deadline int64
	// ConcurrencyKey (admit, start, codec version 10, conckeys.go): the new
	// execution's concurrency key; "" for none.
	ConcurrencyKey string
	// put-queue (codec version 6): the settings, with Limit the most queues
	// with settings there may be. delete-queue: Queue names the queue.
	QueueSettings *QueueSettings
}

// Ack is one acknowledgement of an acknowledge-batch command: the fields an
// acknowledge command would carry.
type Ack struct {
	ExecutionID string
	Token       uint64
	Outcome     Outcome
}

// MaxAcksPerCommand bounds an acknowledge-batch command.
const MaxAcksPerCommand = 4096

// Code classifies a command's result. Values are internal (results are never
// logged) but stable for readability.
type Code uint8

const (
	CodeOK            Code = 0
	CodeConflict      Code = 1 // admit: the ID was ever used
	CodeNotFound      Code = 2 // no such execution
	CodeLeaseLost     Code = 3 // the lease is not current
	CodeMismatch      Code = 4 // start: a repeat that differs; forget: disagrees with the state
	CodeLimitExceeded Code = 5 // a per-execution count limit (steps, watches)
	// CodeLeaseCancelled: the lease is not current, and the execution was
	// cancelled (CodeLeaseLost with its reason).
	CodeLeaseCancelled Code = 6
)

var codeNames = [...]string{"ok", "conflict", "not-found", "lease-lost", "mismatch", "limit-exceeded", "lease-cancelled"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "code(" + itoa(uint64(c)) + ")"
}

// WakeResult says whether a wake (or watch) took effect.
type WakeResult uint8

const (
	WakeRequested WakeResult = 1
	WakeIgnored   WakeResult = 2 // the execution is terminal
)

// Result is a command's answer.
type Result struct {
	Code Code
	Wake WakeResult // wake, watch (beside Code: the three share a word)
	// Unchanged (CodeOK only): save-step, the key was saved already and its
	// first value is kept; acknowledge, the execution was terminal already
	// and Exec is the record as it was (or, for a suspension, the lease's
	// own acknowledgement suspended it); claim, a repeat of a keyed claim,
	// answered with the leases it granted that are still current.
	Unchanged      bool
	ID             string    // admit, start: the execution's ID
	Leases         []Lease   // claim
	Lease          Lease     // renew
	Exec           Execution // acknowledge: the record afterwards
	Priority       uint8     // acknowledge, cancel: Exec's priority, 0 for the default (priority.go)
	Deadline       int64     // acknowledge: Exec's deadline while it has not ended (deadline.go)
	ConcurrencyKey string    // acknowledge, cancel: Exec's concurrency key (conckeys.go)
	Woken          []string  // acknowledge (parent), commit (watchers): executions woken, in order
	Count          int       // retire: executions retired; forget: forgotten; expire-deadlines: executions ended
	// Retired (retire, a state with an archive): the records it removed,
	// in the order retired, for the archive. The state keeps none of them.
	Retired []ArchivedRecord
	Acks    []Result    // acknowledge-batch: each acknowledgement's result, in order
	Became  Transitions // what the command changed, for the Store's notifications
	// (Cancel returns the record afterwards in Exec. Which executions a
	// cancel, a claim or a release made terminal is not listed: it would
	// grow every result, acknowledgements' included, for a rare event; the
	// Store asks the state about the executions it waits for instead.)

	// Schedules (schedule.go). put-schedule: the schedule as stored (also
	// when it was stored already), or CodeLimitExceeded; delete-schedule:
	// CodeNotFound for an unknown one; fire-schedules: the executions it
	// admitted, in Woken.
	Schedule *Schedule
	// put-queue: the settings as stored (also when they were stored
	// already), or CodeLimitExceeded.
	QueueSettings *QueueSettings
}

// Transitions summarises effects the Store reacts to after applying.
type Transitions struct {
	Terminal bool // some execution became terminal (acknowledge: this one; cancel, claim, release: some)
	Due      bool // something may have become due (admit, wake, release, start, commit, ack, cancel)
}

// Per-execution count limits. They decide command results, so they are part
// of the state machine's definition, not options: replaying a log must give
// the same results whatever the process's configuration.
const (
	MaxStepsPerExecution   = 100_000
	MaxWatchesPerExecution = 1024
)

// Cancellation and bounded attempts.
const (
	// MaxAttempts is the largest bound an admission may set (the record keeps
	// it in 16 bits).
	MaxAttempts = 1<<16 - 1
	// CodeCancelled is the code of a cancelled outcome's error, whose
	// message is the reason given; NameCancelled its name.
	CodeCancelled = "CANCELLED"
	NameCancelled = "CancelledError"
	// CodeAttemptsExhausted is the code of the error an execution fails with
	// when the lease of its last allowed attempt expires or is released; its
	// cause is the release's error, or a lease-expired error.
	CodeAttemptsExhausted = "ATTEMPTS_EXHAUSTED"
	NameAttemptsExhausted = "AttemptsExhaustedError"
	NameLeaseExpired      = "LeaseExpiredError"
)

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}
