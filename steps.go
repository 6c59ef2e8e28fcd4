package execstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/execstore/execstore/fsm"
)

// SaveStep records a step's result for the rerun to find. The first saved
// value of a key wins; saving the same key again is a no-op (and writes
// nothing). ErrLeaseLost (nothing written) if the lease is not current.
// value must be JSON of at most Limits.ValueBytes (ErrInvalidArgument).
func (s *Store) SaveStep(ctx context.Context, lease Lease, stepKey string, value json.RawMessage) error {
	if err := checkLease(lease); err != nil {
		return err
	}
	if err := checkKey("step key", stepKey, &s.limits); err != nil {
		return err
	}
	if err := checkValue("step value", value, &s.limits); err != nil {
		return err
	}
	c := fsm.Command{Kind: fsm.KindSaveStep, ExecutionID: lease.ExecutionID, Token: lease.Token, Key: stepKey, Value: string(value)}
	res, err := s.do(ctx, &c)
	if err != nil {
		return err
	}
	return resultErr(&res, &c)
}

// SaveStepKept is SaveStep that says what is kept: saved is true when this
// call saved value, false when the key had a value already, the first one,
// which kept then is (nil in the rare case that retention dropped the
// execution's steps in between). Its errors are SaveStep's.
func (s *Store) SaveStepKept(ctx context.Context, lease Lease, stepKey string, value json.RawMessage) (kept json.RawMessage, saved bool, err error) {
	if err := checkLease(lease); err != nil {
		return nil, false, err
	}
	if err := checkKey("step key", stepKey, &s.limits); err != nil {
		return nil, false, err
	}
	if err := checkValue("step value", value, &s.limits); err != nil {
		return nil, false, err
	}
	c := fsm.Command{Kind: fsm.KindSaveStep, ExecutionID: lease.ExecutionID, Token: lease.Token, Key: stepKey, Value: string(value)}
	res, err := s.do(ctx, &c)
	if err != nil {
		return nil, false, err
	}
	if err := resultErr(&res, &c); err != nil {
		return nil, false, err
	}
	if !res.Unchanged {
		return value, true, nil
	}
	v, found, err := s.Step(ctx, lease.ExecutionID, stepKey)
	if err != nil || !found {
		return nil, false, err
	}
	return v, false, nil
}

// SavedStep is one saved step, as ListSteps and Detail return it.
type SavedStep struct {
	Key   string
	Value json.RawMessage
}

// ListSteps returns an execution's saved steps in key order, starting after
// the key after ("" for the first), at most limit of them (1 to
// Limits.ClaimLimit, ErrInvalidArgument otherwise) and, when maxBytes is
// positive, no more than their values fill: it stops before the step whose
// value would take the values' total past maxBytes, but always returns at
// least one. more says whether steps after the last one returned remain.
// Errors: ErrExecutionNotFound.
func (s *Store) ListSteps(ctx context.Context, executionID, after string, limit, maxBytes int) (steps []SavedStep, more bool, err error) {
	if limit < 1 {
		return nil, false, invalidArg("step list limit %d is outside 1..%d", limit, s.limits.ClaimLimit)
	}
	if limit > s.limits.ClaimLimit {
		return nil, false, overLimit(ErrInvalidArgument, "step list limit %d is outside 1..%d", limit, s.limits.ClaimLimit)
	}
	exists := false
	var aerr error
	err = s.read(ctx, func(st *fsm.State) {
		if _, _, exists, aerr = s.getRecord(st, executionID); !exists {
			return
		}
		size := 0
		st.StepsAfter(executionID, after, func(key, value string) bool {
			if len(steps) == limit || (len(steps) > 0 && maxBytes > 0 && size+len(value) > maxBytes) {
				more = true
				return false
			}
			size += len(value)
			steps = append(steps, SavedStep{Key: key, Value: json.RawMessage(value)})
			return true
		})
	})
	if err != nil {
		return nil, false, err
	}
	if aerr != nil {
		return nil, false, aerr
	}
	if !exists {
		return nil, false, notFound(executionID)
	}
	return steps, more, nil
}

// Step returns a saved step value and whether it exists.
// Errors: ErrExecutionNotFound.
func (s *Store) Step(ctx context.Context, executionID, stepKey string) (json.RawMessage, bool, error) {
	var (
		v             string
		found, exists bool
	)
	var aerr error
	err := s.read(ctx, func(st *fsm.State) {
		if _, _, exists, aerr = s.getRecord(st, executionID); exists {
			v, found = st.Step(executionID, stepKey)
		}
	})
	if err == nil {
		err = aerr
	}
	if err != nil {
		return nil, false, err
	}
	if !exists {
		return nil, false, notFound(executionID)
	}
	if !found {
		return nil, false, nil
	}
	return json.RawMessage(v), true, nil
}

// Start admits a child execution on behalf of the lease's execution,
// idempotently per (caller, stepKey): a repeat with the same workflowID and
// the same params (compared in canonical JSON form: key order and
// insignificant whitespace do not matter) returns the same child ID and
// admits nothing; a repeat that differs returns ErrStartRequestMismatch.
// The child gets a new generated ID, exactly the params bytes given here, the
// caller's Context, Parent{caller, stepKey}, and is due now. It is in its own
// workflow's queue, as an admission without a queue is (not its parent's:
// the parent's workers may not run it); StartWith names another.
// ErrLeaseLost (nothing admitted) if the lease is not current;
// ErrInvalidExecutionEvent for a workflow ID or params admission would refuse.
func (s *Store) Start(ctx context.Context, lease Lease, stepKey, workflowID string, params json.RawMessage) (string, error) {
	return s.StartWith(ctx, lease, StartRequest{StepKey: stepKey, WorkflowID: workflowID, Params: params})
}

// StartRequest is a child start's arguments, for StartWith.
type StartRequest struct {
	StepKey    string          // required: the caller's step that starts the child
	WorkflowID string          // required: the child's workflow
	Params     json.RawMessage // optional JSON object
	// Queue is the child's queue, as AdmitRequest.Queue is an admission's:
	// "" (the default) is the queue named after WorkflowID. A repeat is
	// recognised by its step key, workflow and params; its queue is the
	// first start's.
	Queue string
	// Deadline, when not zero, is the child's, as AdmitRequest.Deadline is
	// an admission's: past it, the child fails with an error matching
	// ErrDeadlineExceeded and the caller is woken, as for any child that
	// ends. A repeat's deadline is the first start's.
	Deadline time.Time
	// ConcurrencyKey is the child's, as AdmitRequest.ConcurrencyKey is an
	// admission's; a child never inherits its parent's (under a limit of
	// one, a parent that waits for a child of its own key would wait
	// forever). A repeat's key is the first start's.
	ConcurrencyKey string
}

// StartWith is Start with its arguments in a StartRequest, which may name
// the child's queue.
func (s *Store) StartWith(ctx context.Context, lease Lease, req StartRequest) (string, error) {
	stepKey, workflowID, params := req.StepKey, req.WorkflowID, req.Params
	if err := checkLease(lease); err != nil {
		return "", err
	}
	if err := checkKey("step key", stepKey, &s.limits); err != nil {
		return "", err
	}
	if err := idError(ErrInvalidExecutionEvent, "workflow ID", workflowID); err != nil {
		return "", err
	}
	queue := ""
	if req.Queue != "" && req.Queue != workflowID {
		if err := idError(ErrInvalidExecutionEvent, "queue", req.Queue); err != nil {
			return "", err
		}
		queue = req.Queue
	}
	if len(params) > s.limits.EventBytes {
		return "", overLimit(ErrInvalidExecutionEvent, "params are %d bytes, more than the limit of %d", len(params), s.limits.EventBytes)
	}
	if msg := checkParams(params); msg != "" {
		return "", invalidEvent("%s", msg)
	}
	var deadline int64
	if !req.Deadline.IsZero() {
		at, ok := nanosFromTime(req.Deadline)
		if !ok {
			return "", invalidEvent("deadline %v is past the latest time the store keeps", req.Deadline)
		}
		deadline = at
	}
	if err := concurrencyKeyError(req.ConcurrencyKey); err != nil {
		return "", err
	}
	c := fsm.Command{
		Kind:        fsm.KindStart,
		ExecutionID: lease.ExecutionID,
		Token:       lease.Token,
		Key:         stepKey,
		WorkflowID:  workflowID,
		ChildID:     newID(s.idTime(), s.opts.IDRand),
		Queue:       queue,
		Deadline:    deadline,

		ConcurrencyKey: req.ConcurrencyKey,
	}
	if params != nil {
		c.Params, c.HasParams = string(params), true
	}
	res, err := s.do(ctx, &c)
	if err != nil {
		return "", err
	}
	if err := resultErr(&res, &c); err != nil {
		return "", err
	}
	return res.ID, nil
}
