package execstore

import (
	"encoding/json"
	"time"

	"github.com/execstore/execstore/fsm"
)

// Record is an execution's durable record, as Get and Await return it. It is a
// copy: changing it changes nothing in the store.
type Record struct {
	ExecutionID string
	WorkflowID  string
	Params      json.RawMessage   // byte-identical to what was admitted; nil if none
	Context     map[string]string // a copy: changing it changes nothing in the store
	Status      Status
	Outcome     *Outcome // non-nil exactly when Status is terminal
	Parent      *Parent  // set when another execution started this one
	AdmittedAt  time.Time
	UpdatedAt   time.Time
	DueAt       time.Time // earliest pending wake not covered by a current lease; zero if none
	Lease       *Lease    // the current lease while a delivery holds one (it may have expired without being superseded); nil otherwise
	Attempts    int       // deliveries claimed so far
	// MaxAttempts is the admission's bound on deliveries in a row that end
	// without an outcome (see AdmitRequest.MaxAttempts); 0: none, and 0
	// once the record is retired.
	MaxAttempts int
	// Queue is the queue the execution was admitted to by name
	// (AdmitRequest.Queue, StartRequest.Queue); "" for the default queue,
	// which is named after WorkflowID, and once the record is retired.
	Queue string
	// Priority is the execution's priority (AdmitRequest.Priority, or its
	// parent's) when it is not the default: 1, 2, 4 or 5. It is 0 for the
	// default (PriorityDefault), as Queue is "" for the default queue, and
	// 0 once the record is retired.
	Priority int
	// Deadline is when the execution fails unless it has ended
	// (AdmitRequest.Deadline); zero without one, and once it has ended.
	Deadline time.Time
	// ConcurrencyKey is the execution's concurrency key
	// (AdmitRequest.ConcurrencyKey); "" without one, and once the record
	// is retired.
	ConcurrencyKey string
	// Archived: the execution was retired to the archive (Options.Archive)
	// and this record was read from there. It has what a retired record
	// has: no params, context, steps, lease or wake.
	Archived bool
}

// Status is an execution's status.
type Status string

const (
	StatusAdmitted  Status = "admitted"  // no delivery acknowledged yet
	StatusSuspended Status = "suspended" // the latest acknowledged delivery suspended
	StatusCompleted Status = "completed" // terminal
	StatusFailed    Status = "failed"    // terminal
	// StatusCancelled: terminal; Store.Cancel ended the execution, or an
	// ancestor's cancellation did. The outcome's Error holds the reason (its
	// Message) and matches ErrCancelled.
	StatusCancelled Status = "cancelled"
)

// Terminal reports whether s is completed, failed or cancelled: the record
// is then immutable and the execution is never delivered again.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Outcome is how an execution ended.
type Outcome struct {
	Status Status          // StatusCompleted, StatusFailed or StatusCancelled
	Result json.RawMessage // completed: the result (nil if none)
	Error  *WorkflowError  // failed: the recorded error; cancelled: the reason, as an error matching ErrCancelled
}

// Parent names the execution, and its step, that started a child.
type Parent struct {
	ExecutionID string
	StepKey     string
}

// Lease is a claim on one execution, fenced by its token.
type Lease struct {
	ExecutionID string
	Token       uint64 // fencing token: starts at 1, strictly greater than every earlier token of this execution (across restarts too)
	ExpiresAt   time.Time
}

var statusNames = [...]Status{
	fsm.StatusAdmitted:  StatusAdmitted,
	fsm.StatusSuspended: StatusSuspended,
	fsm.StatusCompleted: StatusCompleted,
	fsm.StatusFailed:    StatusFailed,
	fsm.StatusCancelled: StatusCancelled,
}

func statusFromFSM(s fsm.Status) Status { return statusNames[s] }

// timeFromNanos converts a state time (0 meaning none) to a UTC time.
func timeFromNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// earliestNanos and latestNanos bound the times a store can represent.
var (
	earliestNanos = time.Unix(0, 1)
	latestNanos   = time.Unix(0, 1<<63-1)
)

// nanosFromTime converts a time to the state's nanoseconds, clamping times
// before the Unix epoch to its first nanosecond (they are all "in the past").
// ok is false for times after the year 2262, which cannot be represented.
func nanosFromTime(t time.Time) (int64, bool) {
	if t.Before(earliestNanos) {
		return 1, true
	}
	if t.After(latestNanos) {
		return 0, false
	}
	return t.UnixNano(), true
}

func leaseFromFSM(l fsm.Lease) Lease {
	return Lease{ExecutionID: l.ExecutionID, Token: l.Token, ExpiresAt: timeFromNanos(l.ExpiresAt)}
}

// recordFromFSM copies a state record into a public Record.
func recordFromFSM(e *fsm.Execution) Record { return recordInto(e, nil) }

// recordInto is recordFromFSM with the memory for its outcome, if it has
// one, given (nil: allocated): a batch of answers allocates theirs at once.
func recordInto(e *fsm.Execution, out *Outcome) Record {
	r := Record{
		ExecutionID: e.ID,
		WorkflowID:  e.WorkflowID,
		Status:      statusFromFSM(e.Status),
		AdmittedAt:  timeFromNanos(e.AdmittedAt),
		UpdatedAt:   timeFromNanos(e.UpdatedAt),
		DueAt:       timeFromNanos(e.DueAt),
		Attempts:    int(e.LastToken),
		MaxAttempts: int(e.MaxAttempts),
		Queue:       e.Queue,
	}
	if e.HasParams {
		r.Params = json.RawMessage(e.Params)
	}
	if e.Context != nil {
		r.Context = make(map[string]string, len(*e.Context))
		for _, kv := range *e.Context {
			r.Context[kv.Key] = kv.Value
		}
	}
	if o := e.Outcome; o != nil {
		if out == nil {
			out = new(Outcome)
		}
		*out = Outcome{Status: statusFromFSM(o.Status), Error: workflowErrorFromInfo(o.Error)}
		r.Outcome = out
		if o.HasRes {
			r.Outcome.Result = json.RawMessage(o.Result)
		}
	}
	if p := e.Parent; p != nil {
		r.Parent = &Parent{ExecutionID: p.ExecutionID, StepKey: p.StepKey}
	}
	if e.LeaseToken != 0 {
		r.Lease = &Lease{ExecutionID: e.ID, Token: e.LeaseToken, ExpiresAt: timeFromNanos(e.LeaseExpiresAt)}
	}
	return r
}
