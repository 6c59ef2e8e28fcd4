package execstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/execstore/execstore"
)

// Every sentinel is an *execstore.Error with a stable code, and the errors
// the store returns wrap their sentinel with detail: errors.Is and ErrorCode
// work on them, and the message says more than the sentinel's.
func TestEverySentinelIsAnErrorWithAStableCode(t *testing.T) {
	for _, c := range []struct {
		sentinel error
		code     string
	}{
		{execstore.ErrExecutionIDConflict, "EXECUTION_ID_CONFLICT"},
		{execstore.ErrInvalidExecutionEvent, "INVALID_EXECUTION_EVENT"},
		{execstore.ErrExecutionNotFound, "EXECUTION_NOT_FOUND"},
		{execstore.ErrLeaseLost, "LEASE_LOST"},
		{execstore.ErrStartRequestMismatch, "START_REQUEST_MISMATCH"},
		{execstore.ErrClosed, "CLOSED"},
		{execstore.ErrInvalidArgument, "INVALID_ARGUMENT"},
		{execstore.ErrLimitExceeded, "LIMIT_EXCEEDED"},
		{execstore.ErrStorageFailed, "STORAGE_FAILED"},
	} {
		var e *execstore.Error
		if !errors.As(c.sentinel, &e) || e != c.sentinel || e.Code() != c.code || execstore.ErrorCode(c.sentinel) != c.code {
			t.Errorf("%v: want an *execstore.Error with code %s", c.sentinel, c.code)
		}
	}

	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "w"})
	_, conflict := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-42", WorkflowID: "w"})
	_, missing := f.s.Get(ctx, "order-7")
	for _, c := range []struct {
		err      error
		sentinel error
		detail   string
	}{
		{conflict, execstore.ErrExecutionIDConflict, "order-42"},
		{missing, execstore.ErrExecutionNotFound, "order-7"},
	} {
		if !errors.Is(c.err, c.sentinel) || execstore.ErrorCode(c.err) != execstore.ErrorCode(c.sentinel) ||
			!strings.Contains(c.err.Error(), c.detail) || !strings.HasPrefix(c.err.Error(), c.sentinel.Error()) {
			t.Errorf("%v: want %v with the detail %q", c.err, c.sentinel, c.detail)
		}
	}
}
