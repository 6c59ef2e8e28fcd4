package workflow

import (
	"errors"
	"fmt"
	"time"

	"github.com/execstore/execstore"
)

// ErrSuspended matches (errors.Is) the error every operation returns when it
// suspends the execution: Sleep before its wake time, Await before the child
// has ended, WaitForKey before the key is written, a step waiting to retry.
// The workflow function MUST return it (wrapped or not). See the package
// documentation.
var ErrSuspended = errors.New("workflow: the execution is suspended")

// Codes of the errors this package records in failed outcomes. Compare with
// execstore.ErrorCode, which finds the code on an error read back from a
// record (an *execstore.WorkflowError) as on the error that was recorded.
const (
	// CodeSuspensionSwallowed: the workflow function returned something other
	// than the suspension an operation gave it.
	CodeSuspensionSwallowed = "SUSPENSION_SWALLOWED"
	// CodeWorkflowPanic: the workflow function panicked (see PanicError).
	CodeWorkflowPanic = "WORKFLOW_PANIC"
	// CodeInvalidParams: the execution's params do not decode into the
	// workflow's params type.
	CodeInvalidParams = "INVALID_PARAMS"
	// CodePollExhausted: Poll's condition did not hold within its attempts.
	CodePollExhausted = "POLL_EXHAUSTED"
	// CodeNotAChild: Await was given an execution that this one did not
	// start, so nothing would wake it when that execution ends.
	CodeNotAChild = "NOT_A_CHILD"
	// CodeInvalidStepValue: a step's value cannot be saved or does not decode
	// into the type asked for (the same code as an undecodable result).
	CodeInvalidStepValue = execstore.CodeInvalidStepValue
)

// suspension is the error an operation returns when it suspends. It is
// created only by this package, so the runner can tell a real suspension
// from one a workflow returned without suspending.
type suspension struct {
	op, key, reason string
}

func (s *suspension) Error() string {
	return fmt.Sprintf("workflow: %s(%q) suspended the execution (%s); the workflow function must return this error", s.op, s.key, s.reason)
}

// Is makes a suspension match ErrSuspended.
func (s *suspension) Is(target error) bool { return target == ErrSuspended }

// RetryableError makes a step's failure retryable: the step is attempted up
// to MaxAttempts times in all, Interval apart. Between attempts the
// execution is suspended with a wake at the retry time, so a retry survives
// restarts and holds no worker; a retry whose time has come by the time the
// failure is saved (an Interval of zero or less) runs at once, in the same
// delivery. When the attempts run out, the step fails
// with Err. Return it (or Retryable's result) from a Run function.
type RetryableError struct {
	Err         error         // what failed the attempt
	MaxAttempts int           // attempts in all, the first included; 1 or less never retries
	Interval    time.Duration // from the failed attempt to the next
}

// Retryable returns err as a RetryableError.
func Retryable(err error, maxAttempts int, interval time.Duration) error {
	return &RetryableError{Err: err, MaxAttempts: maxAttempts, Interval: interval}
}

// Error returns Err's message.
func (e *RetryableError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RetryableError) Unwrap() error { return e.Err }

// PanicError is the error a panicking workflow fails with. Its message holds
// the panic value; the stack is logged, not recorded.
type PanicError struct {
	Value any    // what the workflow panicked with
	Stack []byte // the panicking goroutine's stack
}

// Error returns "workflow: panic: " and the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("workflow: panic: %v", e.Value) }

// Code returns CodeWorkflowPanic.
func (e *PanicError) Code() string { return CodeWorkflowPanic }

// ErrorName names the error in the failed outcome.
func (e *PanicError) ErrorName() string { return "WorkflowPanic" }

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// ChildError is what Await returns when the child failed or was cancelled:
// the child's recorded error, with the child's identity. A cancelled child's
// error matches execstore.ErrCancelled and holds the reason as its Message.
type ChildError struct {
	ChildID    string                   // the child's execution ID
	WorkflowID string                   // the child's workflow
	Err        *execstore.WorkflowError // the child's recorded error
}

// Error names the child and gives its error's message.
func (e *ChildError) Error() string {
	if e.Err.Code == execstore.ErrorCode(execstore.ErrCancelled) {
		return fmt.Sprintf("workflow: child %s (%s) was cancelled: %s", e.ChildID, e.WorkflowID, e.Err.Message)
	}
	return fmt.Sprintf("workflow: child %s (%s) failed: %s", e.ChildID, e.WorkflowID, e.Err.Message)
}

// Unwrap returns the child's recorded error.
func (e *ChildError) Unwrap() error { return e.Err }

// Code returns the child's error code, so that it carries over to the
// parent's outcome if the parent fails with it: the code the child's error
// was recorded with, or else that of its nearest recorded cause with one (as
// execstore.ErrorCode finds it), so that a child failing with a coded error
// wrapped in context still gives its code.
func (e *ChildError) Code() string { return execstore.ErrorCode(e.Err) }

// ErrorName names the error in the failed outcome.
func (e *ChildError) ErrorName() string { return "ChildFailedError" }

// codedError is an error of this package with a stable code and name.
type codedError struct {
	name, code, msg string
	cause           error
}

func (e *codedError) Error() string     { return "workflow: " + e.msg }
func (e *codedError) Code() string      { return e.code }
func (e *codedError) ErrorName() string { return e.name }
func (e *codedError) Unwrap() error     { return e.cause }

func coded(name, code string, cause error, format string, args ...any) error {
	return &codedError{name: name, code: code, msg: fmt.Sprintf(format, args...), cause: cause}
}

// invalidValue is a step value that cannot be saved or decoded.
func invalidValue(key string, cause error) error {
	return coded("WorkflowValueError", CodeInvalidStepValue, cause, "the value of step %q cannot be stored or decoded: %v", key, cause)
}

// recordError converts err to the form a failed step is saved, and every
// rerun returns it, in: the same form the store gives a failed outcome's
// error (name, message, code, causes).
func recordError(err error) *execstore.WorkflowError { return execstore.NewWorkflowError(err) }
