// Package record holds the execution record of the state machine (package
// fsm) and the one type through which a state keeps it: Stored, whose
// fields are read through its methods and changed only by Put, which checks
// that no copy of the state can see the record before it changes it in place.
// A state that skipped the check would not compile: nothing outside this
// package can reach a stored record's fields to write them.
package record

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
//   - Tries <= LastToken, Tries <= MaxAttempts when MaxAttempts != 0, and
//     Tries >= 1 while a lease is current.
type Execution struct {
	ID         string
	WorkflowID string
	Params     string // meaningful only when HasParams
	Context    *[]KV  // nil: no context; otherwise sorted by key, possibly empty
	Parent     *Parent
	Outcome    *Outcome
	// Queue is the queue the execution is claimed from; "" means the
	// default queue, named after WorkflowID (QueueName).
	Queue string

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
	// released); 0: no bound. Tries counts them: every claim adds one (up to
	// the largest uint16, without a bound), a suspended acknowledgement
	// starts again from 0. So a record with no current lease and Tries 0
	// whose LastToken is T ended delivery T with a suspension (SuspendedBy),
	// which is how a repeat of that acknowledgement is known for a replay.
	// Both fit the record's padding, so they cost no memory.
	MaxAttempts uint16
	Tries       uint16

	// gen is the generation of the state that stored the record (see
	// Stored), kept in the record's padding so that it costs no memory.
	// Value leaves it out.
	gen uint32
}

// WithoutPositions returns a copy of the record without its positions in
// the change log, which the indexes keep.
func (e Execution) WithoutPositions() Execution {
	e.AdmitNo, e.ChangeSeq = 0, 0
	return e
}

// Terminal reports whether the execution has a recorded outcome.
func (e *Execution) Terminal() bool { return e.Status.Terminal() }

// QueueName is the name of the execution's queue: Queue, or WorkflowID when
// Queue is "" (the default queue).
func (e *Execution) QueueName() string {
	if e.Queue != "" {
		return e.Queue
	}
	return e.WorkflowID
}

// Leased reports whether a lease is current.
func (e *Execution) Leased() bool { return e.LeaseToken != 0 }

// Exhausted reports whether the current lease is the last delivery
// MaxAttempts allows: when it expires or is released, the execution fails
// with CodeAttemptsExhausted instead of becoming due again.
func (e *Execution) Exhausted() bool {
	return e.LeaseToken != 0 && e.MaxAttempts != 0 && e.Tries >= e.MaxAttempts
}

// SuspendedBy reports whether the acknowledgement of the delivery with the
// given lease token suspended the execution, and nothing has happened to it
// since but wakes: no lease is current, no claim has issued a token after
// it, and the status is suspended. (Tries is 0 only after a suspended
// acknowledgement, or before any claim, when LastToken is 0 and no token
// matches.)
func (e *Execution) SuspendedBy(token uint64) bool {
	return e.LeaseToken == 0 && e.LastToken == token && e.Tries == 0 && e.Status == StatusSuspended
}

// ClaimableAt is the execution's key in the due index: the lease expiry while
// a lease is current (redelivery), else the earliest pending wake. ok is false
// when the execution belongs in no index.
func (e *Execution) ClaimableAt() (at int64, ok bool) {
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

// Stored is an execution's record as a state keeps it. A state and its
// copies (fsm.State.Copy) share stored records until one of them changes
// the record: a state may change it in place only when no copy can see it,
// and must otherwise store a new one. That rule is this type's: its fields
// are read through its methods, and Put is the only way to change them, so
// a state cannot skip the check.
type Stored struct {
	e Execution // e.gen: the generation of the state that stored it (fsm.State's gen)
}

// New stores e as a record of the state of generation gen.
func New(e *Execution, gen uint32) *Stored {
	s := &Stored{e: *e}
	s.e.gen = gen
	return s
}

// Put stores e in place of s, and returns where it is stored: in s itself
// when the state of generation gen owns s (it stored s since its latest
// copy, or exclusive says no copy of the state exists and it is none), else
// in a new Stored of the state's generation.
func Put(s *Stored, e *Execution, gen uint32, exclusive bool) *Stored {
	if s.e.gen == gen || exclusive {
		g := s.e.gen
		s.e = *e
		s.e.gen = g
		return s
	}
	return New(e, gen)
}

// Value returns a copy of the record.
func (s *Stored) Value() Execution {
	v := s.e
	v.gen = 0
	return v
}

// Getters of the fields a state reads without copying the whole record.
func (s *Stored) ID() string                 { return s.e.ID }
func (s *Stored) WorkflowID() string         { return s.e.WorkflowID }
func (s *Stored) Parent() *Parent            { return s.e.Parent }
func (s *Stored) Status() Status             { return s.e.Status }
func (s *Stored) Terminal() bool             { return s.e.Status.Terminal() }
func (s *Stored) Leased() bool               { return s.e.LeaseToken != 0 }
func (s *Stored) Exhausted() bool            { return s.e.Exhausted() }
func (s *Stored) SuspendedBy(t uint64) bool  { return s.e.SuspendedBy(t) }
func (s *Stored) LeaseToken() uint64         { return s.e.LeaseToken }
func (s *Stored) LastToken() uint64          { return s.e.LastToken }
func (s *Stored) LeaseExpiresAt() int64      { return s.e.LeaseExpiresAt }
func (s *Stored) DueAt() int64               { return s.e.DueAt }
func (s *Stored) AdmittedAt() int64          { return s.e.AdmittedAt }
func (s *Stored) UpdatedAt() int64           { return s.e.UpdatedAt }
func (s *Stored) AdmitNo() uint64            { return s.e.AdmitNo }
func (s *Stored) ChangeSeq() uint64          { return s.e.ChangeSeq }
func (s *Stored) ClaimableAt() (int64, bool) { return s.e.ClaimableAt() }
func (s *Stored) WatchCount() uint16         { return s.e.WatchCount }
func (s *Stored) StepCount() uint32          { return s.e.StepCount }
func (s *Stored) MaxAttempts() uint16        { return s.e.MaxAttempts }
func (s *Stored) Context() *[]KV             { return s.e.Context }
func (s *Stored) QueueName() string          { return s.e.QueueName() }

// SetPositions sets the record's admission number and change position, for
// a state that decodes its records and numbers them afterwards (0 leaves
// one as it is). Like Put, it writes only a record of the state's own
// generation, and panics on any other: no copy can see a record being
// decoded.
func (s *Stored) SetPositions(admitNo, changeSeq uint64, gen uint32) {
	if s.e.gen != gen {
		panic("record: positions set on a record of another state's generation")
	}
	if admitNo != 0 {
		s.e.AdmitNo = admitNo
	}
	if changeSeq != 0 {
		s.e.ChangeSeq = changeSeq
	}
}
