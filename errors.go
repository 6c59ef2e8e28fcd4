package execstore

import (
	"errors"
	"fmt"

	"github.com/execstore/execstore/fsm"
)

// Error is the type of every sentinel error of this package. Compare with
// errors.Is; read the stable code with Code (or ErrorCode for any error).
type Error struct {
	code string
	name string
	msg  string
}

func (e *Error) Error() string { return "execstore: " + e.msg }

// Code returns the error's stable code, e.g. "EXECUTION_ID_CONFLICT".
func (e *Error) Code() string { return e.code }

// ErrorName returns the name recorded when this error fails a workflow.
func (e *Error) ErrorName() string { return e.name }

var (
	// ErrExecutionIDConflict: the execution ID was ever used. The existing
	// record is untouched.
	ErrExecutionIDConflict error = &Error{"EXECUTION_ID_CONFLICT", "ExecutionIDConflictError", "execution ID already in use"}
	// ErrInvalidExecutionEvent: an admission (or child start) that cannot be
	// stored exactly as given. Nothing is stored and nothing becomes due.
	ErrInvalidExecutionEvent error = &Error{"INVALID_EXECUTION_EVENT", "InvalidExecutionEventError", "invalid execution event"}
	// ErrExecutionNotFound: no execution has this ID.
	ErrExecutionNotFound error = &Error{"EXECUTION_NOT_FOUND", "ExecutionNotFoundError", "execution not found"}
	// ErrLeaseLost: the lease is not current (a later claim superseded it, or
	// its delivery already ended). Nothing was written.
	ErrLeaseLost error = &Error{"LEASE_LOST", "LeaseLostError", "lease lost"}
	// ErrStartRequestMismatch: a child start repeated a step key with a
	// different workflow ID or params.
	ErrStartRequestMismatch error = &Error{"START_REQUEST_MISMATCH", "StartRequestMismatchError", "start request differs from the one recorded for this step"}
	// ErrClosed: the store is closed.
	ErrClosed error = &Error{"CLOSED", "StoreClosedError", "store closed"}

	// ErrInvalidArgument: an argument other than an admission's event is
	// invalid (a non-positive limit or duration, a value that is not JSON, a
	// key that is empty or too long...). Nothing was written.
	ErrInvalidArgument error = &Error{"INVALID_ARGUMENT", "InvalidArgumentError", "invalid argument"}
	// ErrLimitExceeded: a per-execution count limit (steps, watches) or the
	// number of schedules would be exceeded. Nothing was written. A request
	// over one of the size or count limits (Limits, IDBytes,
	// MaxAttemptsLimit...) is refused with an error that matches it too,
	// besides ErrInvalidArgument or ErrInvalidExecutionEvent, whose code it
	// carries.
	ErrLimitExceeded error = &Error{"LIMIT_EXCEEDED", "LimitExceededError", "limit exceeded"}
	// ErrStorageFailed: a write or fsync of the log failed. The store refuses
	// every later write until it is reopened; the error also wraps the cause.
	ErrStorageFailed error = &Error{"STORAGE_FAILED", "StorageFailedError", "storage failed; the store refuses writes until it is reopened"}

	// ErrCancelled: the execution was cancelled (Store.Cancel). A cancelled
	// outcome's error matches it, and so does the error a write fenced by a
	// lease of a cancelled execution gets (which matches ErrLeaseLost too),
	// and so the cause a dispatcher gives the delivery it stops.
	ErrCancelled error = &Error{fsm.CodeCancelled, fsm.NameCancelled, "execution cancelled"}
	// ErrAttemptsExhausted: the lease of an execution's last allowed attempt
	// (AdmitRequest.MaxAttempts) expired or was released; the execution
	// failed with an error matching it, whose cause is the release's error
	// or a lease-expired error.
	ErrAttemptsExhausted error = &Error{fsm.CodeAttemptsExhausted, fsm.NameAttemptsExhausted, "attempts exhausted"}
	// ErrDeadlineExceeded: the execution had not ended by its deadline
	// (AdmitRequest.Deadline, StartRequest.Deadline); it failed with an
	// error matching it, and every execution it started that had not ended
	// was cancelled.
	ErrDeadlineExceeded error = &Error{fsm.CodeDeadlineExceeded, fsm.NameDeadlineExceeded, "deadline exceeded"}
	// ErrScheduleNotFound: no schedule has this ID.
	ErrScheduleNotFound error = &Error{"SCHEDULE_NOT_FOUND", "ScheduleNotFoundError", "schedule not found"}
)

// ErrorCode returns the stable code of err (see the Err variables), or "" if
// err carries none: the Code() of the first error in err's chain that has
// one, as errors.As finds it. A *WorkflowError read back from a record
// counts as having a Code method when its recorded Code is not empty (see
// WorkflowError.As), so the code of a failed outcome's error is its recorded
// code, or else that of its nearest recorded cause with one.
func ErrorCode(err error) string {
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return c.Code()
	}
	return ""
}

// detailError adds detail to a sentinel while still matching it with
// errors.Is. also lists further errors it matches (a cause, or a second
// sentinel).
type detailError struct {
	sentinel *Error
	detail   string
	also     []error
}

func (e *detailError) Error() string {
	return "execstore: " + e.sentinel.msg + ": " + e.detail
}

func (e *detailError) Unwrap() []error {
	return append([]error{e.sentinel}, e.also...)
}

// Code returns the sentinel's code.
func (e *detailError) Code() string { return e.sentinel.code }

func errorf(sentinel error, format string, args ...any) error {
	return &detailError{sentinel: sentinel.(*Error), detail: fmt.Sprintf(format, args...)}
}

// notFound says which execution does not exist.
func notFound(id string) error {
	return errorf(ErrExecutionNotFound, "%q", id)
}

// leaseNotFound is returned for a lease on an execution that does not exist:
// such a lease is not current, so it matches ErrLeaseLost too.
func leaseNotFound(id string) error {
	return &detailError{sentinel: ErrExecutionNotFound.(*Error), detail: fmt.Sprintf("%q (so the lease is not current)", id), also: []error{ErrLeaseLost}}
}

func leaseLost(id string, token uint64) error {
	return errorf(ErrLeaseLost, "execution %q, token %d", id, token)
}

// leaseCancelled is returned for a lease of a cancelled execution: it is not
// current, and the reason is the cancellation.
func leaseCancelled(id string, token uint64) error {
	return &detailError{sentinel: ErrLeaseLost.(*Error), detail: fmt.Sprintf("execution %q, token %d: the execution was cancelled", id, token),
		also: []error{ErrCancelled}}
}

func invalidEvent(format string, args ...any) error {
	return errorf(ErrInvalidExecutionEvent, format, args...)
}

func invalidArg(format string, args ...any) error {
	return errorf(ErrInvalidArgument, format, args...)
}

// overLimit is the error for a request over one of the documented limits
// (a field of Limits, an ID's length, an admission's MaxAttempts, a cron
// expression's length): it matches sentinel (ErrInvalidArgument or
// ErrInvalidExecutionEvent, whose code it carries) and ErrLimitExceeded, so
// a caller can tell a request too large from a malformed one.
func overLimit(sentinel error, format string, args ...any) error {
	return &detailError{sentinel: sentinel.(*Error), detail: fmt.Sprintf(format, args...), also: []error{ErrLimitExceeded}}
}

// idError applies checkID's rule and answers with sentinel: over the length
// limit, an error that matches ErrLimitExceeded too.
func idError(sentinel error, what, id string) error {
	msg := checkID(what, id)
	switch {
	case msg == "":
		return nil
	case len(id) > IDBytes:
		return overLimit(sentinel, "%s", msg)
	}
	return errorf(sentinel, "%s", msg)
}

// storageFailed wraps the cause of a fail-stop.
func storageFailed(cause error) error {
	return &detailError{sentinel: ErrStorageFailed.(*Error), detail: cause.Error(), also: []error{cause}}
}
