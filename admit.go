package execstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/execstore/execstore/fsm"
)

// AdmitRequest is an execution to admit.
type AdmitRequest struct {
	ExecutionID string            // optional: "" lets the store choose a new, never-used ID
	WorkflowID  string            // required
	Params      json.RawMessage   // optional JSON object; nil means "no params" (not the same as {})
	Context     map[string]string // optional

	// MaxAttempts bounds the deliveries in a row that end without an
	// outcome: when the lease of the last allowed one expires (the next claim
	// then fails the execution instead of delivering it again) or is
	// released, the execution fails with an error matching
	// ErrAttemptsExhausted, whose cause is the release's error
	// (ReleaseWithCause) or a lease-expired error. An acknowledged suspension
	// starts the count again: waiting is not failing. 0 (the default) means
	// no bound; at most MaxAttemptsLimit. A child started by Start runs under
	// its parent's bound.
	MaxAttempts int

	// Queue is the queue the execution is claimed from (see
	// ClaimRequest.Queues): "" (the default) is the queue named after
	// WorkflowID, so that a worker claiming the queues of the workflows it
	// runs is never handed another workflow's execution. Name a queue to
	// share one between workflows. A queue name follows the rules of an
	// ID: 1 to 200 bytes of UTF-8 without control characters.
	Queue string

	// Priority orders the claims of the execution's queue: within the
	// queues a claim serves, it takes every claimable execution of
	// PriorityFirst (1) before any of 2, and so on to PriorityLast (5), each
	// priority in due-time order. 0 means PriorityDefault (3). Priority is
	// strict: an execution waits as long as executions of a higher priority
	// are claimable in the queues its workers serve, so work that must move
	// whatever else is due needs a queue of its own. A child started by
	// Start runs at its parent's priority.
	Priority int

	// Deadline, when not zero, is when the execution fails unless it has
	// ended: the store's writer then ends it with an error matching
	// ErrDeadlineExceeded, stamped with the store's time, exactly as Cancel
	// would end it otherwise (its lease ends, so its worker's next write is
	// refused; every execution it started that has not ended is cancelled;
	// its parent, if any, is woken). It fires once, across restarts, at the
	// deadline or as soon after it as the writer runs (an admission already
	// past it ends at once). A child started with Start has no deadline of
	// its own (StartRequest.Deadline gives one), but ends with its parent.
	Deadline time.Time

	// ConcurrencyKey, when not "", groups the execution with the others of
	// its queue that have the same key, for the queue's key limit
	// (QueueSettings.KeyLimit): a customer, a tenant, an account or a
	// downstream resource. At most KeyLimit executions of one key hold a
	// slot at once; the others wait, in the order they became due, and
	// claims do not look at them until a slot is free. A key has no effect
	// in a queue without a key limit. 1 to MaxConcurrencyKeyBytes bytes of
	// UTF-8. A child started by Start has no key unless its StartRequest
	// gives one.
	ConcurrencyKey string
}

// MaxConcurrencyKeyBytes bounds AdmitRequest.ConcurrencyKey.
const MaxConcurrencyKeyBytes = fsm.MaxConcurrencyKeyBytes

// The priorities of AdmitRequest.Priority: 1 is claimed first.
const (
	PriorityFirst   = fsm.PriorityFirst
	PriorityDefault = fsm.PriorityDefault
	PriorityLast    = fsm.PriorityLast
)

// MaxAttemptsLimit is the largest AdmitRequest.MaxAttempts. It is part of the
// state machine (the record keeps the bound in 16 bits).
const MaxAttemptsLimit = fsm.MaxAttempts

// Admit creates the execution's record (status admitted) and its first wake
// (due now), all or nothing, and returns its ID once that is durable.
//
// Errors: ErrExecutionIDConflict (the ID was ever used; the existing record is
// untouched), ErrInvalidExecutionEvent (nothing is stored and nothing becomes
// due). A duplicate admission costs no write: it is refused against the
// applied state.
func (s *Store) Admit(ctx context.Context, req AdmitRequest) (string, error) {
	var gen string
	if req.ExecutionID == "" {
		gen = newID(s.idTime(), s.opts.IDRand)
	}
	c, err := admitCommand(&req, &s.limits, gen)
	if err != nil {
		return "", err
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

// Get returns the execution's record. Errors: ErrExecutionNotFound.
func (s *Store) Get(ctx context.Context, executionID string) (Record, error) {
	var (
		e            fsm.Execution
		archived, ok bool
		aerr         error
	)
	prio, deadline, key := 0, time.Time{}, ""
	if err := s.read(ctx, func(st *fsm.State) {
		e, archived, ok, aerr = s.getRecord(st, executionID)
		prio, deadline, key = st.PriorityOf(executionID), timeFromNanos(st.DeadlineOf(executionID)), st.ConcurrencyKeyOf(executionID)
	}); err != nil {
		return Record{}, err
	}
	if aerr != nil {
		return Record{}, aerr
	}
	if !ok {
		return Record{}, notFound(executionID)
	}
	rec := recordFromFSM(&e)
	rec.Archived = archived
	rec.Priority = prio
	rec.Deadline = deadline
	rec.ConcurrencyKey = key
	return rec, nil
}

// Await returns the execution's record once it is terminal (at once if it
// already is), or ctx's error. It reads the durable record, so it works
// across restarts: a new process can Await what an earlier one admitted.
// Errors: ErrExecutionNotFound, ErrClosed (also if the store closes while
// waiting).
func (s *Store) Await(ctx context.Context, executionID string) (Record, error) {
	entry := s.awaits.acquire(executionID)
	defer s.awaits.release(executionID, entry)
	rec, err := s.Get(ctx, executionID)
	if err != nil || rec.Status.Terminal() {
		return rec, err
	}
	select {
	case <-entry.ch:
		return s.Get(ctx, executionID)
	case <-ctx.Done():
		return Record{}, ctx.Err()
	case <-s.awaits.closed:
		return Record{}, ErrClosed
	}
}
