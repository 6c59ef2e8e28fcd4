package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/mutant"
)

// Run runs a step: fn's result is saved under key with the delivery's lease,
// and every rerun returns the saved value without calling fn. What Run
// returns, first time or rerun, is the value decoded from its saved JSON, so
// both see the same value.
//
// If fn returns an error, the step fails: the error is saved too, and Run
// returns it, on this run and every rerun, as the *execstore.WorkflowError it
// is recorded as. Pointer identity is lost, the code is not: errors.Is
// matches the recorded error against any error with the same non-empty code
// (see execstore.WorkflowError.Is), and execstore.ErrorCode returns it; an
// error without a code can be told only by its Name and Message. A
// RetryableError instead retries the step: the execution suspends until the
// retry time, and fn runs again on the rerun, up to MaxAttempts in all.
//
// A step runs at least once, and more than once only if a delivery dies
// after fn returned and before the value was saved: fn's effects outside the
// store should be idempotent (pass an idempotency key built from the
// execution ID and key). fn receives the delivery's context, which is
// cancelled if the lease is lost.
func Run[T any](x *Execution, key string, fn func(ctx context.Context) (T, error)) (T, error) {
	return runStep(x, "Run", key, fn)
}

// Poll runs check every interval until it reports done, at most maxAttempts
// times in all (at least once), and returns the value it reported with done. Between
// attempts the execution suspends with a wake, as a retried step does. When
// the attempts run out Poll fails with CodePollExhausted; an error from check
// fails it at once (unless it is a RetryableError). Like Run, the final value
// or failure is saved under key and a rerun returns it.
func Poll[T any](x *Execution, key string, interval time.Duration, maxAttempts int, check func(ctx context.Context) (T, bool, error)) (T, error) {
	maxAttempts = max(maxAttempts, 1)
	return runStep(x, "Poll", key, func(ctx context.Context) (T, error) {
		v, done, err := check(ctx)
		if err == nil && !done {
			err = &RetryableError{
				Err:         coded("PollExhaustedError", CodePollExhausted, nil, "the condition of Poll(%q) did not hold in %d attempts", key, maxAttempts),
				MaxAttempts: maxAttempts,
				Interval:    interval,
			}
		}
		return v, err
	})
}

func runStep[T any](x *Execution, op, key string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	raw, err := x.step(op, key, func(ctx context.Context) (json.RawMessage, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, invalidValue(key, err)
		}
		return raw, nil
	})
	if err != nil {
		return zero, err
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return zero, recordError(invalidValue(key, err))
	}
	return v, nil
}

// step is Run on JSON values: a saved value, a saved failure, a retry that is
// not due yet, or a new attempt.
func (x *Execution) step(op, key string, fn func(ctx context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	if err := x.begin(op, key); err != nil {
		return nil, err
	}
	if v, ok, err := x.readStep(op, key, key); err != nil || (ok && !mutant.WorkflowRerunsSavedSteps) {
		return v, err
	}
	if failed, err := x.savedFailure(op, key); err != nil || failed != nil {
		return nil, firstErr(err, failed)
	}
	for {
		attempts, retryAt, err := x.retries(op, key)
		if err != nil {
			return nil, err
		}
		if attempts > 0 {
			// A rerun before the retry time (another wake came first) waits
			// again.
			if err := x.sleepUntil(op, key, retryAt, "retrying"); err != nil {
				return nil, err
			}
		}
		v, err := x.attempt(fn)
		if err == nil {
			if err = x.saveStep(op, key, key, v); err == nil {
				return v, nil
			}
			if x.aborted != nil {
				return nil, err
			}
		}
		if cause := context.Cause(x.ctx); cause != nil {
			return nil, x.abort(op, key, cause) // fn failed because the lease was lost
		}
		if err := x.failStep(op, key, attempts+1, err); err != errRetryDue {
			return nil, err
		}
		// The retry is due already (a zero interval, or the store's time
		// passed it while the failure was saved): attempt it now.
	}
}

// errRetryDue is failStep's answer when the retry it saved is due at once.
// It never leaves step.
var errRetryDue = errors.New("workflow: the retry is due")

// attempt runs a step function, marking the run as inside a step so that a
// workflow operation called from it panics.
func (x *Execution) attempt(fn func(ctx context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	x.inStep = true
	defer func() { x.inStep = false }()
	return fn(x.ctx)
}

// failStep handles the failed attempt-th attempt of a step: a retry if it is
// retryable and attempts remain (a suspension until its time, or errRetryDue
// if that time has come), else the step's saved failure.
func (x *Execution) failStep(op, key string, attempt int, err error) error {
	var re *RetryableError
	if errors.As(err, &re) && attempt < re.MaxAttempts {
		at := x.now().Add(re.Interval)
		rec, _ := json.Marshal(retryRecord{At: at.UTC(), Error: recordError(err).Message})
		if err := x.saveStep(op, key, retryKey(key, attempt), rec); err != nil {
			return firstErr(x.aborted, recordError(err))
		}
		if err := x.sleepUntil(op, key, at, "retry "+strconv.Itoa(attempt+1)+" of "+strconv.Itoa(re.MaxAttempts)); err != nil {
			return err
		}
		return errRetryDue
	}
	if re != nil && re == err {
		err = re.Err // the retries ran out: the step fails with what failed it
	}
	failed := recordError(err)
	if raw, merr := json.Marshal(failed); merr == nil {
		if err := x.saveStep(op, key, failureKey(key), raw); x.aborted != nil {
			return err
		}
	}
	return failed
}

// retryRecord is saved for each failed attempt that will be retried.
type retryRecord struct {
	At    time.Time `json:"at"`
	Error string    `json:"error"`
}

// retries returns how many attempts of the step failed and were set to
// retry, and when the last one is due to retry.
func (x *Execution) retries(op, key string) (int, time.Time, error) {
	var last retryRecord
	n := 0
	for ; ; n++ {
		raw, ok, err := x.readStep(op, key, retryKey(key, n+1))
		if err != nil {
			return 0, time.Time{}, err
		}
		if !ok {
			return n, last.At, nil
		}
		if err := json.Unmarshal(raw, &last); err != nil {
			return 0, time.Time{}, x.abort(op, key, err)
		}
	}
}

// savedFailure returns the step's saved failure, or nil.
func (x *Execution) savedFailure(op, key string) (*execstore.WorkflowError, error) {
	raw, ok, err := x.readStep(op, key, failureKey(key))
	if err != nil || !ok {
		return nil, err
	}
	var failed execstore.WorkflowError
	if err := json.Unmarshal(raw, &failed); err != nil {
		return nil, x.abort(op, key, err)
	}
	return &failed, nil
}

// firstErr returns the first non-nil error, so that a nil *WorkflowError
// never becomes a non-nil error.
func firstErr(err error, failed *execstore.WorkflowError) error {
	if err != nil {
		return err
	}
	if failed != nil {
		return failed
	}
	return nil
}
