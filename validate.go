package execstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/jsonv"
)

// Validation happens in the caller's goroutine, BEFORE a command is queued:
// a rejected input is never logged, and never costs the writer time.

// checkID applies the rule for execution and workflow IDs: 1 to IDBytes bytes
// of valid UTF-8 with no control characters.
func checkID(what, id string) string {
	switch {
	case id == "":
		return what + " is empty"
	case len(id) > IDBytes:
		return what + " is longer than 200 bytes"
	case !utf8.ValidString(id):
		return what + " is not valid UTF-8"
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return what + " contains a control character"
	}
	return ""
}

// checkKey applies the rule for step keys and store keys: 1 to KeyBytes
// bytes of valid UTF-8.
func checkKey(what, key string, lim *Limits) error {
	switch {
	case key == "":
		return invalidArg("%s is empty", what)
	case len(key) > lim.KeyBytes:
		return overLimit(ErrInvalidArgument, "%s is %d bytes, more than the limit of %d", what, len(key), lim.KeyBytes)
	case !utf8.ValidString(key):
		return invalidArg("%s is not valid UTF-8", what)
	}
	return nil
}

// checkParams validates params: nil, or a JSON object that round-trips.
func checkParams(params json.RawMessage) string {
	if params == nil {
		return ""
	}
	if err := jsonv.ValidateObject(params); err != nil {
		return "params: " + err.Error()
	}
	return ""
}

// admitCommand validates an admission and builds its command. id may be
// empty: the caller then passes a generated one in genID.
func admitCommand(req *AdmitRequest, lim *Limits, genID string) (fsm.Command, error) {
	c := fsm.Command{Kind: fsm.KindAdmit, ExecutionID: req.ExecutionID, WorkflowID: req.WorkflowID}
	if c.ExecutionID == "" {
		c.ExecutionID, c.Generated = genID, true
	} else if err := idError(ErrInvalidExecutionEvent, "execution ID", c.ExecutionID); err != nil {
		return c, err
	}
	if err := idError(ErrInvalidExecutionEvent, "workflow ID", req.WorkflowID); err != nil {
		return c, err
	}
	if req.MaxAttempts < 0 {
		return c, invalidEvent("max attempts %d is outside 0..%d", req.MaxAttempts, MaxAttemptsLimit)
	}
	if req.MaxAttempts > MaxAttemptsLimit {
		return c, overLimit(ErrInvalidExecutionEvent, "max attempts %d is outside 0..%d", req.MaxAttempts, MaxAttemptsLimit)
	}
	c.MaxAttempts = req.MaxAttempts
	if req.Priority != 0 && (req.Priority < PriorityFirst || req.Priority > PriorityLast) {
		// An admission's error, which is also a bad argument's.
		return c, &detailError{sentinel: ErrInvalidExecutionEvent.(*Error), also: []error{ErrInvalidArgument},
			detail: fmt.Sprintf("priority %d is outside %d..%d", req.Priority, PriorityFirst, PriorityLast)}
	}
	c.Priority = req.Priority
	if err := concurrencyKeyError(req.ConcurrencyKey); err != nil {
		return c, err
	}
	c.ConcurrencyKey = req.ConcurrencyKey
	if !req.Deadline.IsZero() {
		at, ok := nanosFromTime(req.Deadline)
		if !ok {
			return c, invalidEvent("deadline %v is past the latest time the store keeps", req.Deadline)
		}
		c.Deadline = at
	}
	if req.Queue != "" {
		if err := idError(ErrInvalidExecutionEvent, "queue", req.Queue); err != nil {
			return c, err
		}
		if req.Queue != req.WorkflowID {
			c.Queue = req.Queue
		}
	}
	size := len(req.Params)
	for k, v := range req.Context {
		size += len(k) + len(v)
	}
	if size > lim.EventBytes {
		return c, overLimit(ErrInvalidExecutionEvent, "params and context are %d bytes, more than the limit of %d", size, lim.EventBytes)
	}
	if msg := checkParams(req.Params); msg != "" {
		return c, invalidEvent("%s", msg)
	}
	ctx, err := contextEntries(req.Context, lim)
	if err != nil {
		return c, err
	}
	if req.Params != nil {
		c.Params, c.HasParams = string(req.Params), true
	}
	c.Context = ctx
	return c, nil
}

// contextEntries validates a context and returns it sorted by key (a map has
// no order; the log must).
func contextEntries(m map[string]string, lim *Limits) (*[]fsm.KV, error) {
	if m == nil {
		return nil, nil
	}
	if len(m) > lim.ContextEntries {
		return nil, overLimit(ErrInvalidExecutionEvent, "context has %d entries, more than the limit of %d", len(m), lim.ContextEntries)
	}
	kvs := make([]fsm.KV, 0, len(m))
	for k, v := range m {
		switch {
		case k == "":
			return nil, invalidEvent("context has an empty key")
		case !utf8.ValidString(k):
			return nil, invalidEvent("context key %q is not valid UTF-8", k)
		case !utf8.ValidString(v):
			return nil, invalidEvent("context value of %q is not valid UTF-8", k)
		}
		kvs = append(kvs, fsm.KV{Key: k, Value: v})
	}
	slices.SortFunc(kvs, func(a, b fsm.KV) int { return strings.Compare(a.Key, b.Key) })
	return &kvs, nil
}

// checkValue validates a JSON value kept byte for byte (a step value, a
// store value).
func checkValue(what string, v json.RawMessage, lim *Limits) error {
	if len(v) > lim.ValueBytes {
		return overLimit(ErrInvalidArgument, "%s is %d bytes, more than the limit of %d", what, len(v), lim.ValueBytes)
	}
	if err := jsonv.Validate(v); err != nil {
		return invalidArg("%s: %v", what, err)
	}
	return nil
}

// checkDuration validates a lease duration or retry delay.
func checkDuration(what string, d time.Duration, positive bool, max time.Duration) error {
	switch {
	case positive && d <= 0:
		return invalidArg("%s must be positive, got %v", what, d)
	case d < 0:
		return invalidArg("%s must not be negative, got %v", what, d)
	case d > max:
		return overLimit(ErrInvalidArgument, "%s %v is longer than the limit of %v", what, d, max)
	}
	return nil
}

// checkLease refuses a lease whose execution ID no execution can have: such a
// lease is not current (it matches ErrLeaseLost and ErrExecutionNotFound).
func checkLease(l Lease) error {
	if checkID("", l.ExecutionID) != "" {
		return leaseNotFound(l.ExecutionID)
	}
	return nil
}

// concurrencyKeyError checks a concurrency key: "" or 1 to
// MaxConcurrencyKeyBytes bytes of UTF-8. Its error is an admission's, which
// is also a bad argument's, and over the length, one over a limit.
func concurrencyKeyError(k string) error {
	also := []error{ErrInvalidArgument}
	switch {
	case len(k) > MaxConcurrencyKeyBytes:
		also = append(also, ErrLimitExceeded)
	case !utf8.ValidString(k):
	default:
		return nil
	}
	return &detailError{sentinel: ErrInvalidExecutionEvent.(*Error), also: also,
		detail: fmt.Sprintf("concurrency key of %d bytes: want at most %d bytes of UTF-8", len(k), MaxConcurrencyKeyBytes)}
}
