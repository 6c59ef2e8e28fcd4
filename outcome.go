package execstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/jsonv"
)

// WorkflowError is how a failed outcome's error is stored and revived. Every
// later read of a failed execution returns the same recorded error.
type WorkflowError struct {
	Name    string         // a declared name (an ErrorName() string method), else the Go type as %T prints it
	Message string         // err.Error()
	Code    string         // from an error with a Code() string method, else ""
	Cause   *WorkflowError // the error err wraps (errors.Unwrap), recorded the same way; depth-limited
}

// Error returns the recorded message, exactly as the original error said it.
func (e *WorkflowError) Error() string { return e.Message }

// NewWorkflowError records err the way a failed outcome records it: its
// declared name (an ErrorName() string method) or Go type, its message, its
// code (a Code() string method) and the chain it wraps, with
// DefaultLimits' message and depth limits. A *WorkflowError is kept as it
// is. It returns nil for a nil err.
func NewWorkflowError(err error) *WorkflowError {
	lim := DefaultLimits
	return workflowErrorFromInfo(errorInfo(err, &lim, 0))
}

// Unwrap returns the recorded cause, or nil.
func (e *WorkflowError) Unwrap() error {
	if e.Cause == nil {
		return nil
	}
	return e.Cause
}

// Is reports whether target has the code e was recorded with, so that a
// recorded error keeps the identity its code gave it: errors.Is(recorded,
// ErrLeaseLost) holds for an error recorded from ErrLeaseLost (or from any
// error whose Code() was "LEASE_LOST"), in the run that recorded it and in
// every later read of the record, across restarts too.
//
// Exactly: e.Code is not empty, and target is a *WorkflowError whose Code
// equals it, or target has a Code() string method that returns it. Only
// target itself is compared, not what it wraps. A recorded error without a
// code matches nothing but itself; errors.Is goes on to its Cause, which
// matches in the same way. Errors of types without a Code method cannot be
// matched after recording (only their Name and Message are kept).
func (e *WorkflowError) Is(target error) bool {
	if e == nil || e.Code == "" {
		return false
	}
	switch t := target.(type) {
	case *WorkflowError:
		return t != nil && t.Code == e.Code
	case interface{ Code() string }:
		return t.Code() == e.Code
	}
	return false
}

// As lets errors.As, and so ErrorCode, find the recorded code. (The code is
// the field Code, so *WorkflowError cannot also have a Code method.) When e
// has a code and target points to an interface that a value with the methods
// Error, Code and Unwrap satisfies, such as the interface{ Code() string }
// that ErrorCode asks for, As stores there a view of e: its Code returns
// e.Code, its Error e's message, and it unwraps to e. A recorded error without
// a code is not a coded error, so errors.As goes on to its Cause.
func (e *WorkflowError) As(target any) bool {
	if e == nil || e.Code == "" {
		return false
	}
	v := reflect.ValueOf(target)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return false
	}
	view := reflect.ValueOf(recordedCode{e})
	if t := v.Type().Elem(); t.Kind() != reflect.Interface || !view.Type().Implements(t) {
		return false
	}
	v.Elem().Set(view)
	return true
}

// recordedCode is a *WorkflowError seen as a coded error (see
// WorkflowError.As).
type recordedCode struct{ e *WorkflowError }

func (c recordedCode) Error() string { return c.e.Message }
func (c recordedCode) Code() string  { return c.e.Code }
func (c recordedCode) Unwrap() error { return c.e }

// RunOutcome is how a delivery ended, as the worker reports it to Acknowledge.
type RunOutcome struct {
	Status Status          // StatusSuspended, StatusCompleted or StatusFailed
	Result json.RawMessage // with StatusCompleted
	Err    error           // with StatusFailed
}

// Suspended reports that the workflow is waiting (for a wake it requested).
func Suspended() RunOutcome { return RunOutcome{Status: StatusSuspended} }

// Completed reports the workflow's result. A result that is not valid JSON is
// recorded as failed with code "INVALID_STEP_VALUE".
func Completed(result json.RawMessage) RunOutcome {
	return RunOutcome{Status: StatusCompleted, Result: result}
}

// Failed reports the workflow's error.
func Failed(err error) RunOutcome { return RunOutcome{Status: StatusFailed, Err: err} }

// CodeInvalidStepValue is the code of the error recorded when a completed
// result cannot be stored as given.
const CodeInvalidStepValue = "INVALID_STEP_VALUE"

// WorkflowResultStepKey names the workflow's result where an error about it
// needs a step key.
const WorkflowResultStepKey = "$$workflow-result$$"

// CheckOutcome returns the outcome that acknowledging o would record, without
// writing anything: a completed result over Limits.ValueBytes or not valid
// JSON comes back failed with code INVALID_STEP_VALUE, error messages cut to
// Limits.ErrorMessageBytes, causes beyond Limits.ErrorCauseDepth dropped.
// A suspended outcome comes back as it is. The error is the one Acknowledge
// would return for o itself (ErrInvalidArgument).
func (s *Store) CheckOutcome(o RunOutcome) (Outcome, error) {
	out, err := outcomeToFSM(o, &s.limits)
	if err != nil {
		return Outcome{}, err
	}
	checked := Outcome{Status: statusFromFSM(out.Status), Error: workflowErrorFromInfo(out.Error)}
	if out.HasRes {
		checked.Result = json.RawMessage(out.Result)
	}
	return checked, nil
}

// outcomeToFSM validates a RunOutcome and converts it for the state machine.
// A completed result that is not valid JSON (or too large) becomes a failed
// outcome, so a delivery can always record how it ended.
func outcomeToFSM(o RunOutcome, lim *Limits) (fsm.Outcome, error) {
	switch o.Status {
	case StatusSuspended:
		return fsm.Outcome{Status: fsm.StatusSuspended}, nil
	case StatusCompleted:
		if o.Result == nil {
			return fsm.Outcome{Status: fsm.StatusCompleted}, nil
		}
		reason := ""
		if len(o.Result) > lim.ValueBytes {
			reason = fmt.Sprintf("%d bytes, more than the limit of %d", len(o.Result), lim.ValueBytes)
		} else if err := jsonv.Validate(o.Result); err != nil {
			reason = err.Error()
		}
		if reason != "" {
			info := &fsm.ErrorInfo{
				Name:    "WorkflowValueError",
				Message: "the workflow's result (" + WorkflowResultStepKey + ") cannot be stored: " + reason,
				Code:    CodeInvalidStepValue,
			}
			return fsm.Outcome{Status: fsm.StatusFailed, Error: info}, nil
		}
		return fsm.Outcome{Status: fsm.StatusCompleted, Result: string(o.Result), HasRes: true}, nil
	case StatusFailed:
		if o.Err == nil {
			return fsm.Outcome{}, invalidArg("a failed outcome needs a non-nil Err")
		}
		return fsm.Outcome{Status: fsm.StatusFailed, Error: errorInfo(o.Err, lim, 0)}, nil
	}
	return fsm.Outcome{}, invalidArg("outcome status %q: want suspended, completed or failed", o.Status)
}

// errorInfo records err, its declared name, code and the chain it wraps.
func errorInfo(err error, lim *Limits, depth int) *fsm.ErrorInfo {
	if err == nil || depth > lim.ErrorCauseDepth {
		return nil
	}
	if we, ok := err.(*WorkflowError); ok && we != nil {
		// A revived error is recorded as it was, not as *WorkflowError.
		info := &fsm.ErrorInfo{Name: clean(we.Name, IDBytes), Message: clean(we.Message, lim.ErrorMessageBytes), Code: clean(we.Code, IDBytes)}
		if we.Cause != nil {
			info.Cause = errorInfo(we.Cause, lim, depth+1)
		}
		return info
	}
	info := &fsm.ErrorInfo{Name: clean(errorName(err), IDBytes), Message: clean(err.Error(), lim.ErrorMessageBytes)}
	if c, ok := err.(interface{ Code() string }); ok {
		info.Code = clean(c.Code(), IDBytes)
	}
	info.Cause = errorInfo(unwrapOne(err), lim, depth+1)
	return info
}

func errorName(err error) string {
	if n, ok := err.(interface{ ErrorName() string }); ok {
		return n.ErrorName()
	}
	return fmt.Sprintf("%T", err)
}

// unwrapOne returns the error err wraps; of several (errors.Join), the first.
func unwrapOne(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	if m, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range m.Unwrap() {
			if e != nil {
				return e
			}
		}
	}
	return nil
}

// clean makes s valid UTF-8 and at most max bytes, marking a truncation.
func clean(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max - len(truncatedMark)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedMark
}

// truncatedMark ends a recorded message cut to its limit.
const truncatedMark = "…(truncated)"

func workflowErrorFromInfo(info *fsm.ErrorInfo) *WorkflowError {
	if info == nil {
		return nil
	}
	return &WorkflowError{Name: info.Name, Message: info.Message, Code: info.Code, Cause: workflowErrorFromInfo(info.Cause)}
}
