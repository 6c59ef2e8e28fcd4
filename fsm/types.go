package fsm

// Status is an execution's status. The numeric values are part of the WAL and
// snapshot formats: never renumber them.
type Status uint8

const (
	StatusAdmitted  Status = 1 // no delivery acknowledged yet
	StatusSuspended Status = 2 // the latest acknowledged delivery suspended
	StatusCompleted Status = 3 // terminal
	StatusFailed    Status = 4 // terminal
	// StatusCancelled: terminal; a cancel command ended the execution (or an
	// ancestor's did). Its outcome's error holds the reason (see cancel).
	StatusCancelled Status = 5
)

// Terminal reports whether s is completed, failed or cancelled.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool { return s >= StatusAdmitted && s <= StatusCancelled }

// ErrorInfo is a failed outcome's recorded error: name, message, code and the
// chain of causes it wrapped. It is immutable once recorded.
type ErrorInfo struct {
	Name    string
	Message string
	Code    string
	Cause   *ErrorInfo
}

// Outcome is how a delivery ended. Result is kept byte for byte (a string so
// that it cannot be mutated after it is recorded).
type Outcome struct {
	Status Status     // StatusSuspended, StatusCompleted, StatusFailed or StatusCancelled
	Result string     // with StatusCompleted; meaningful only when HasResult
	HasRes bool       // false: no result (nil), as opposed to any JSON value
	Error  *ErrorInfo // with StatusFailed; with StatusCancelled, the reason
}

// completedNoResult is the outcome most acknowledgements record; records share
// it instead of each holding a copy (outcomes are never changed).
var completedNoResult = &Outcome{Status: StatusCompleted}

// internOutcome returns a pointer to an outcome equal to *o that a record may
// keep.
func internOutcome(o *Outcome) *Outcome {
	if *o == *completedNoResult {
		return completedNoResult
	}
	out := *o
	return &out
}

// KV is one context entry. Contexts are kept sorted by key.
type KV struct {
	Key, Value string
}

// Parent names the execution (and its step) that started a child.
type Parent struct {
	ExecutionID string
	StepKey     string
}

// Execution is one execution's record. It is stored by value in a btree, so
// a copy of the tree is a consistent point-in-time view: fields are never
// mutated in place, only replaced through the tree. Pointer and string fields
// point to data that is never changed after it is recorded.
//
// Invariants (checked by State.CheckInvariants):
//   - Status is terminal exactly when Outcome is non-nil; a terminal execution
//     has no DueAt, no CoveredAt, no lease and is in no index.
//   - LeaseToken != 0 (a current lease) implies LeaseToken == LastToken,
//     CoveredAt != 0 and LeaseExpiresAt != 0; otherwise both are zero.
//   - Tries <= MaxAttempts, and Tries == 0 when MaxAttempts == 0.
type Execution struct {
	ID         string
	WorkflowID string
	Params     string // meaningful only when HasParams
	Context    *[]KV  // nil: no context; otherwise sorted by key, possibly empty
	Parent     *Parent
	Outcome    *Outcome

	AdmittedAt int64 // nanoseconds since the Unix epoch, as every time here
	UpdatedAt  int64
	// DueAt is the earliest pending wake not covered by the current lease,
	// 0 if none.
	DueAt int64
	// CoveredAt is the earliest pending wake covered by the current lease, 0 if
	// there is no current lease. It stays pending until the lease is
	// acknowledged.
	CoveredAt      int64
	LeaseExpiresAt int64
	LeaseToken     uint64 // the current lease's token; 0: no current lease
	// LastToken is the highest token ever issued for this execution. Every
	// claim issues one, so it is also the number of deliveries claimed.
	LastToken uint64

	StepCount  uint32
	WatchCount uint16 // at most MaxWatchesPerExecution
	Status     Status
	HasParams  bool

	// AdmitNo is the record's admission number (list.go): admissions are
	// numbered 1, 2, ... in the order they are applied, so in admission
	// order. ChangeSeq is the position in the change log of the record's
	// latest change of status.
	AdmitNo   uint64
	ChangeSeq uint64
	// MaxAttempts bounds the deliveries in a row that end without an
	// acknowledgement (their lease expired and was superseded, or was
	// released); 0: no bound. Tries counts them: every claim adds one, a
	// suspended acknowledgement starts again from 0. Tries stays 0 without a
	// bound. Both fit the record's padding, so the bound costs no memory.
	MaxAttempts uint16
	Tries       uint16

	gen uint32 // see State.gen; not part of the record's value
}

// value returns a copy of the record without its bookkeeping (gen, and its
// positions in the change log, which the indexes keep).
func (e *Execution) value() Execution {
	v := *e
	v.gen = 0
	v.AdmitNo, v.ChangeSeq = 0, 0
	return v
}

// Terminal reports whether the execution has a recorded outcome.
func (e *Execution) Terminal() bool { return e.Status.Terminal() }

// Leased reports whether a lease is current.
func (e *Execution) Leased() bool { return e.LeaseToken != 0 }

// exhausted reports whether the current lease is the last delivery
// MaxAttempts allows: when it expires or is released, the execution fails
// with CodeAttemptsExhausted instead of becoming due again.
func (e *Execution) exhausted() bool {
	return e.LeaseToken != 0 && e.MaxAttempts != 0 && e.Tries >= e.MaxAttempts
}

// claimableAt is the execution's key in the due index: the lease expiry while
// a lease is current (redelivery), else the earliest pending wake. ok is false
// when the execution belongs in no index.
func (e *Execution) claimableAt() (at int64, ok bool) {
	switch {
	case e.Status.Terminal():
		return 0, false
	case e.LeaseToken != 0:
		return e.LeaseExpiresAt, true
	case e.DueAt != 0:
		return e.DueAt, true
	}
	return 0, false
}

// Lease is a claim on one execution, fenced by its token.
type Lease struct {
	ExecutionID string
	Token       uint64
	ExpiresAt   int64
}

// Write is one change to the key-value store. A nil value (HasValue false)
// deletes the key.
type Write struct {
	Key      string
	Value    string
	HasValue bool
}

// minNonZero returns the smaller of two times where 0 means "none".
func minNonZero(a, b int64) int64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	case a < b:
		return a
	}
	return b
}

// addSaturating returns a+d, clamped to the largest time instead of overflowing.
func addSaturating(a, d int64) int64 {
	if d > 0 && a > maxTime-d {
		return maxTime
	}
	return a + d
}

const maxTime = int64(^uint64(0) >> 1)
