package execstore

import (
	"encoding/json"
	"errors"
	"fmt"
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
