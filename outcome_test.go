package execstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/execstore/execstore"
)

// coder is how code outside this package commonly asks an error for its code.
type coder interface{ Code() string }

// A failed outcome's error, read back from the record (Get, Await, after a
// restart), matches with errors.Is the errors its recorded code identifies,
// and ErrorCode returns that code, even through further wrapping.
func TestARecordedErrorKeepsTheIdentityItsCodeGives(t *testing.T) {
	cases := []struct {
		name     string
		err      error // what the delivery fails with
		matches  error // errors.Is(recorded, matches) must hold (nil: nothing to match)
		notMatch error // and errors.Is(recorded, notMatch) must not
		code     string
	}{
		{"a sentinel", execstore.ErrStartRequestMismatch, execstore.ErrStartRequestMismatch, execstore.ErrLeaseLost, "START_REQUEST_MISMATCH"},
		{"a sentinel wrapped by fmt.Errorf", fmt.Errorf("charging: %w", execstore.ErrLeaseLost), execstore.ErrLeaseLost, execstore.ErrStartRequestMismatch, "LEASE_LOST"},
		{"a user's coded error", &paymentError{cause: errors.New("card expired")}, &paymentError{}, execstore.ErrLeaseLost, "DECLINED"},
		{"an error without a code", errors.New("boom"), nil, &execstore.WorkflowError{Name: "*errors.errorString", Message: "boom"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
			f.ack(f.claimOne("e"), execstore.Failed(c.err))
			if got := execstore.ErrorCode(c.err); got != c.code {
				t.Fatalf("test premise: ErrorCode(original) = %q, want %q", got, c.code)
			}
			check := func(how string, rec execstore.Record) {
				t.Helper()
				recorded := rec.Outcome.Error
				for _, err := range []error{recorded, fmt.Errorf("waiting for e: %w", recorded)} {
					if c.matches != nil && !errors.Is(err, c.matches) {
						t.Errorf("%s: errors.Is(%v, %v) = false, want true", how, err, c.matches)
					}
					if errors.Is(err, c.notMatch) {
						t.Errorf("%s: errors.Is(%v, %v) = true, want false", how, err, c.notMatch)
					}
					if got := execstore.ErrorCode(err); got != c.code {
						t.Errorf("%s: ErrorCode(%v) = %q, want %q", how, err, got, c.code)
					}
				}
			}
			check("Get", f.get("e"))
			rec, err := f.s.Await(ctx, "e")
			if err != nil {
				t.Fatalf("Await: %v", err)
			}
			check("Await", rec)
			f.reopen()
			check("Get after a restart", f.get("e"))
		})
	}
}

func TestAWorkflowErrorMatchesATargetOnlyByANonEmptyEqualCode(t *testing.T) {
	coded := &execstore.WorkflowError{Name: "A", Message: "a", Code: "X"}
	cases := []struct {
		name   string
		err    *execstore.WorkflowError
		target error
		want   bool
	}{
		{"another recorded error with the same code", coded, &execstore.WorkflowError{Name: "B", Message: "b", Code: "X"}, true},
		{"another recorded error with another code", coded, &execstore.WorkflowError{Name: "A", Message: "a", Code: "Y"}, false},
		{"a nil recorded error", coded, (*execstore.WorkflowError)(nil), false},
		{"a sentinel with the same code", &execstore.WorkflowError{Code: "LEASE_LOST"}, execstore.ErrLeaseLost, true},
		{"an error without a code", coded, errors.New("a"), false},
		{"two errors without a code, equal otherwise", &execstore.WorkflowError{Name: "A", Message: "a"}, &execstore.WorkflowError{Name: "A", Message: "a"}, false},
		{"a target wrapping one with the code (only the target itself counts)", coded, fmt.Errorf("w: %w", &execstore.WorkflowError{Code: "X"}), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := errors.Is(c.err, c.target); got != c.want {
				t.Fatalf("errors.Is(%+v, %v) = %v, want %v", c.err, c.target, got, c.want)
			}
		})
	}
}

// errors.As finds a recorded code for any interface with a Code method, not
// only ErrorCode's, and the value it finds leads back to the recorded error.
func TestErrorsAsFindsARecordedCodeAndLeadsBackToTheRecordedError(t *testing.T) {
	cause := &execstore.WorkflowError{Name: "PaymentError", Message: "declined", Code: "DECLINED"}
	recorded := &execstore.WorkflowError{Name: "*fmt.wrapError", Message: "charging: declined", Cause: cause}
	var c coder
	if !errors.As(fmt.Errorf("order 42: %w", recorded), &c) || c.Code() != "DECLINED" {
		t.Fatalf("errors.As(…, *coder) = %v, want the cause's code DECLINED", c)
	}
	var back *execstore.WorkflowError
	if !errors.As(c.(error), &back) || back != cause || c.(error).Error() != "declined" {
		t.Fatalf("the coded view leads to %+v (message %q), want the cause %+v", back, c.(error).Error(), cause)
	}
	var named interface {
		error
		Timeout() bool
	}
	if errors.As(recorded, &named) {
		t.Fatalf("errors.As found a Timeout method on a recorded error: %v", named)
	}
	var first *execstore.WorkflowError
	if !errors.As(recorded, &first) || first != recorded {
		t.Fatalf("errors.As(…, **WorkflowError) = %p, want the outer recorded error %p", first, recorded)
	}
}
