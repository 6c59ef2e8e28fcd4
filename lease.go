package execstore

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/jsonv"
)

// WakeResult says whether a wake (or a watch) took effect.
type WakeResult string

const (
	WakeRequested WakeResult = "requested"
	WakeIgnored   WakeResult = "ignored" // the execution is terminal: nothing becomes due
)

func wakeResultFromFSM(w fsm.WakeResult) WakeResult {
	if w == fsm.WakeIgnored {
		return WakeIgnored
	}
	return WakeRequested
}

// RequestWake asks for the execution to be delivered at (or after) at. Wakes
// not covered by a current lease merge into one due time: the earliest. A
// wake during a delivery is kept for after it. A time before the Unix epoch
// means "now"; one after the year 2262 is ErrInvalidArgument.
// Errors: ErrExecutionNotFound (no record is created).
func (s *Store) RequestWake(ctx context.Context, executionID string, at time.Time) (WakeResult, error) {
	ns, ok := nanosFromTime(at)
	if !ok {
		return "", invalidArg("wake time %v is after the latest representable time", at)
	}
	c := fsm.Command{Kind: fsm.KindWake, ExecutionID: executionID, At: ns}
	if checkID("", executionID) != "" {
		return "", notFound(executionID)
	}
	res, err := s.do(ctx, &c)
	if err != nil {
		return "", err
	}
	if err := resultErr(&res, &c); err != nil {
		return "", err
	}
	return wakeResultFromFSM(res.Wake), nil
}

// ClaimDue leases up to limit executions whose due time is at or before now,
// earliest first (ties by execution ID). One execution appears at most once.
// A claimed lease covers every wake pending at the claim. A claim that finds
// nothing due writes nothing.
//
// An execution whose expired lease was the last attempt its admission allows
// (AdmitRequest.MaxAttempts) is not leased: the claim fails it with
// ErrAttemptsExhausted instead, and it takes no place among the leases. A
// claim fails at most max(limit, 64) of them, in the same order, and stops
// there.
//
// limit must be 1 to Limits.ClaimLimit and leaseDuration positive and at most
// Limits.LeaseDuration (ErrInvalidArgument).
func (s *Store) ClaimDue(ctx context.Context, limit int, leaseDuration time.Duration) ([]Lease, error) {
	return s.Claim(ctx, ClaimRequest{Limit: limit, LeaseDuration: leaseDuration})
}

// ClaimRequest is a claim's arguments, for Claim and AcknowledgeAndClaimWith.
type ClaimRequest struct {
	// Limit is the most executions to lease: 1 to Limits.ClaimLimit.
	Limit int
	// LeaseDuration is how long each lease lasts unless renewed: positive,
	// at most Limits.LeaseDuration.
	LeaseDuration time.Duration
	// RequestKey, when not empty (at most MaxRequestKeyLen bytes), names the
	// claim so that a retry whose first answer was lost gets the same
	// leases instead of stranding them until they expire. The store
	// remembers what a keyed claim leased for its LeaseDuration: a claim
	// repeated with the key in that time leases nothing new and writes
	// nothing; it answers the leases the first granted that are still
	// current (not acknowledged, released or superseded since), with their
	// expiries as they are now. A repeat with another Limit or
	// LeaseDuration is ErrInvalidArgument; one that names other Queues gets
	// the first claim's leases all the same (the key, not the queues, names
	// the claim). A keyed claim that leased
	// nothing is not remembered, so its repeat claims afresh. Keys are
	// remembered for at most 131,072 leases in all, the earliest to expire
	// forgotten first; a forgotten key's repeat claims afresh, as a claim
	// without a key would. Make keys unique per claim (a random ID per
	// round): whoever repeats a key gets its leases.
	RequestKey string
	// Queues names the queues the claim serves, at most MaxClaimQueues;
	// none (the default) serves every queue. A claim takes the executions
	// due in these queues in the order of their due time (a lease's expiry
	// for a redelivery), then ID, as if they were one queue; an execution
	// of any other queue is never leased. A name nothing was ever admitted
	// to is not an error: it serves nothing until something is. An
	// execution's queue is AdmitRequest.Queue, by default its workflow ID,
	// so naming the workflows a worker runs serves exactly their
	// executions.
	Queues []string
}

// MaxClaimQueues bounds ClaimRequest.Queues.
const MaxClaimQueues = fsm.MaxClaimQueues

// MaxRequestKeyLen bounds ClaimRequest.RequestKey, in bytes.
const MaxRequestKeyLen = fsm.MaxRequestKeyLen

// Claim is ClaimDue with its arguments in a ClaimRequest, which may carry a
// request key that makes a retry safe.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) ([]Lease, error) {
	c, err := s.claimCommand(req)
	if err != nil {
		return nil, err
	}
	r, err := s.doRequest(ctx, &c)
	if err != nil {
		return nil, err
	}
	defer r.free()
	return claimAnswer(r)
}

// claimCommand validates a claim's arguments and returns its command.
func (s *Store) claimCommand(req ClaimRequest) (fsm.Command, error) {
	limit, leaseDuration := req.Limit, req.LeaseDuration
	if len(req.RequestKey) > MaxRequestKeyLen {
		return fsm.Command{}, overLimit(ErrInvalidArgument, "request key of %d bytes, more than the limit of %d", len(req.RequestKey), MaxRequestKeyLen)
	}
	if limit < 1 {
		return fsm.Command{}, invalidArg("claim limit %d is outside 1..%d", limit, s.limits.ClaimLimit)
	}
	if limit > s.limits.ClaimLimit {
		return fsm.Command{}, overLimit(ErrInvalidArgument, "claim limit %d is outside 1..%d", limit, s.limits.ClaimLimit)
	}
	if err := checkDuration("lease duration", leaseDuration, true, s.limits.LeaseDuration); err != nil {
		return fsm.Command{}, err
	}
	queues, err := claimQueues(req.Queues)
	if err != nil {
		return fsm.Command{}, err
	}
	return fsm.Command{Kind: fsm.KindClaim, Limit: limit, Duration: int64(leaseDuration), RequestKey: req.RequestKey, Queues: queues}, nil
}

// claimQueues validates a claim's queue names and returns them sorted and
// without repeats, as the claim command holds them (a copy: the caller's
// slice is left as it was).
func claimQueues(names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	if len(names) > MaxClaimQueues {
		return nil, overLimit(ErrInvalidArgument, "%d queues, more than the limit of %d", len(names), MaxClaimQueues)
	}
	for _, n := range names {
		if err := idError(ErrInvalidArgument, "queue", n); err != nil {
			return nil, err
		}
	}
	if slices.IsSorted(names) && len(slices.Compact(slices.Clone(names))) == len(names) {
		return names, nil
	}
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// claimAnswer reads a claim request's leases (before the request is freed:
// they are in its buffer).
func claimAnswer(r *request) ([]Lease, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.res.Code == fsm.CodeMismatch {
		return nil, invalidArg("request key %q was used by a claim with another limit or lease duration", r.cmd.RequestKey)
	}
	leases := make([]Lease, len(r.res.Leases))
	for i, l := range r.res.Leases {
		leases[i] = leaseFromFSM(l)
	}
	return leases, nil
}

// Renew extends a current lease to now+leaseDuration and returns it.
// ErrLeaseLost if a later claim superseded it or its delivery ended. A lease
// stays current after ExpiresAt until another claim supersedes it, so a
// late renewal still succeeds if nobody else took over.
func (s *Store) Renew(ctx context.Context, lease Lease, leaseDuration time.Duration) (Lease, error) {
	if err := checkLease(lease); err != nil {
		return Lease{}, err
	}
	if err := checkDuration("lease duration", leaseDuration, true, s.limits.LeaseDuration); err != nil {
		return Lease{}, err
	}
	c := fsm.Command{Kind: fsm.KindRenew, ExecutionID: lease.ExecutionID, Token: lease.Token, Duration: int64(leaseDuration)}
	res, err := s.do(ctx, &c)
	if err != nil {
		return Lease{}, err
	}
	if err := resultErr(&res, &c); err != nil {
		return Lease{}, err
	}
	return leaseFromFSM(res.Lease), nil
}

// Release ends a current lease without an outcome (a retryable failure): the
// covered wakes stay pending and the execution is due again at
// max(earliest pending wake, now+retryAfter). ErrLeaseLost if the lease is
// not current. If the lease was the last attempt AdmitRequest.MaxAttempts
// allows, the execution fails instead (ErrAttemptsExhausted); Release
// returns nil, as the lease did end.
func (s *Store) Release(ctx context.Context, lease Lease, retryAfter time.Duration) error {
	return s.ReleaseWithCause(ctx, lease, retryAfter, nil)
}

// ReleaseWithCause is Release with the error that ended the delivery. The
// cause is logged with the release (recorded as a failed outcome's error is,
// within Limits.ErrorMessageBytes and Limits.ErrorCauseDepth) and becomes
// the cause of the ErrAttemptsExhausted error if this was the last allowed
// attempt; otherwise it is not kept. A nil cause is Release.
func (s *Store) ReleaseWithCause(ctx context.Context, lease Lease, retryAfter time.Duration, cause error) error {
	if err := checkLease(lease); err != nil {
		return err
	}
	if err := checkDuration("retry delay", retryAfter, false, s.limits.RetryAfter); err != nil {
		return err
	}
	c := fsm.Command{Kind: fsm.KindRelease, ExecutionID: lease.ExecutionID, Token: lease.Token, Duration: int64(retryAfter),
		Cause: errorInfo(cause, &s.limits, 0)}
	res, err := s.do(ctx, &c)
	if err != nil {
		return err
	}
	return resultErr(&res, &c)
}

// Acknowledge records how a delivery ended and returns the record afterwards.
//   - suspended: status suspended; the covered wakes are cleared; the
//     execution is due at the earliest wake requested after the claim, or not
//     at all.
//   - completed / failed: terminal and immutable; every pending wake is
//     cleared; never due again. If the execution has a Parent, the parent is
//     woken at that time in the same command (nothing happens if the parent
//     is terminal). A completed result that is not valid JSON is recorded as
//     failed, Code "INVALID_STEP_VALUE".
//   - with a lease that is no longer current: if the record is terminal,
//     nothing changes and the terminal record is returned with a nil error;
//     if it is a suspension and the lease's own acknowledgement suspended
//     the execution, with no claim since (a retry whose answer was lost),
//     nothing changes and the record is returned with a nil error;
//     otherwise ErrLeaseLost.
func (s *Store) Acknowledge(ctx context.Context, lease Lease, outcome RunOutcome) (Record, error) {
	if err := checkLease(lease); err != nil {
		return Record{}, err
	}
	out, err := outcomeToFSM(outcome, &s.limits)
	if err != nil {
		return Record{}, err
	}
	c := fsm.Command{Kind: fsm.KindAcknowledge, ExecutionID: lease.ExecutionID, Token: lease.Token, Outcome: out}
	res, err := s.do(ctx, &c)
	if err != nil {
		return Record{}, err
	}
	if err := resultErr(&res, &c); err != nil {
		return Record{}, err
	}
	rec := recordFromFSM(&res.Exec)
	rec.Priority, rec.Deadline, rec.ConcurrencyKey = int(res.Priority), timeFromNanos(res.Deadline), res.ConcurrencyKey
	return rec, nil
}

// Ack is one delivery's acknowledgement, for AcknowledgeBatch.
type Ack struct {
	Lease   Lease
	Outcome RunOutcome
}

// AckResult is one acknowledgement's answer: the record afterwards, or the
// error Acknowledge would have returned for it alone.
type AckResult struct {
	Record Record
	Err    error
	// Applied says, with a nil Err, whether the outcome recorded is this
	// acknowledgement's. It is false for a late one that found the execution
	// terminal already with another outcome: Record then holds the outcome
	// recorded before, and the acknowledgement's own was not kept.
	Applied bool
	// Replayed says, with Applied, that this acknowledgement repeats one
	// under the same lease that was applied (a retry whose first answer was
	// lost): the execution was terminal already with this very outcome,
	// recorded under this lease (results compare in canonical form, key
	// order and whitespace aside; errors as recorded), or this is a
	// suspension and the lease's own acknowledgement suspended the
	// execution, with no claim since (Record is the record as it is now,
	// with the wakes requested since). A suspension repeated after a later
	// claim is a stale worker's: ErrLeaseLost.
	Replayed bool
}

// AcknowledgeBatch acknowledges several deliveries at once: they are logged
// together (as few WAL entries as their size allows, one fsync), but each
// gets its own result exactly as Acknowledge would give it, in order (one
// lost lease fails only its own acknowledgement). At most Limits.ClaimLimit
// acknowledgements of at most Limits.AcknowledgeBatchBytes in all
// (ErrInvalidArgument, and none is written). The returned error is for the call
// as a whole: the store is closed or failed, or ctx ended while waiting (then
// some of the acknowledgements may still take effect).
func (s *Store) AcknowledgeBatch(ctx context.Context, acks []Ack) ([]AckResult, error) {
	results, _, err := s.acknowledgeAndClaim(ctx, acks, nil)
	return results, err
}

// AcknowledgeAndClaim is AcknowledgeBatch and then ClaimDue in one batch of
// the log: one write and one fsync for both, where the two calls one after
// the other take two. A claimer that acknowledges what it ran and claims
// more in each round pays one fsync per round, not two.
//
// The acknowledgements are answered as AcknowledgeBatch answers them, and
// the claim as ClaimDue answers it (its arguments are checked first: if
// they are invalid, nothing is queued). The claim follows the
// acknowledgements in the log, but it takes what was due when the batch was
// taken: an execution that one of these acknowledgements makes due again (a
// suspension whose wake has come) is claimed by a later call. The error is
// for the call as a whole, as AcknowledgeBatch's; when the store failed
// while the batch was written, it is the claim's, and each acknowledgement's
// result says the same.
func (s *Store) AcknowledgeAndClaim(ctx context.Context, acks []Ack, limit int, leaseDuration time.Duration) ([]AckResult, []Lease, error) {
	return s.AcknowledgeAndClaimWith(ctx, acks, ClaimRequest{Limit: limit, LeaseDuration: leaseDuration})
}

// AcknowledgeAndClaimWith is AcknowledgeAndClaim with the claim's arguments
// in a ClaimRequest, which may carry a request key: a retry of the whole
// call after a lost answer then answers each acknowledgement as a repeat
// (replayed where it was applied) and the claim's leases as they were
// granted.
func (s *Store) AcknowledgeAndClaimWith(ctx context.Context, acks []Ack, req ClaimRequest) ([]AckResult, []Lease, error) {
	c, err := s.claimCommand(req)
	if err != nil {
		return nil, nil, err
	}
	return s.acknowledgeAndClaim(ctx, acks, &c)
}

// acknowledgeAndClaim acknowledges acks and, when claim is not nil, queues
// the claim right after them, so that they share a batch.
func (s *Store) acknowledgeAndClaim(ctx context.Context, acks []Ack, claim *fsm.Command) ([]AckResult, []Lease, error) {
	if len(acks) > s.limits.ClaimLimit {
		return nil, nil, overLimit(ErrInvalidArgument, "%d acknowledgements, more than the limit of %d", len(acks), s.limits.ClaimLimit)
	}
	results := make([]AckResult, len(acks))
	sc := ackScratchPool.Get().(*ackScratch)
	valid, slot := sc.valid[:0], sc.slot[:0] // valid[j] answers results[slot[j]]
	if cap(valid) < len(acks) {
		valid, slot = make([]fsm.Ack, 0, len(acks)), make([]int, 0, len(acks)) // sized once, not grown
	}
	size := 0
	for i, a := range acks {
		if err := checkLease(a.Lease); err != nil {
			results[i].Err = err
			continue
		}
		out, err := outcomeToFSM(a.Outcome, &s.limits)
		if err != nil {
			results[i].Err = err
			continue
		}
		valid = append(valid, fsm.Ack{ExecutionID: a.Lease.ExecutionID, Token: a.Lease.Token, Outcome: out})
		slot = append(slot, i)
		if size += ackBytes(a.Lease.ExecutionID, &out); size > s.limits.AcknowledgeBatchBytes {
			sc.put(valid, slot)
			return nil, nil, overLimit(ErrInvalidArgument, "acknowledgements of more than %d bytes in all, the limit of one batch", s.limits.AcknowledgeBatchBytes)
		}
	}
	reqs := ackRequests(valid)
	acked := len(reqs)
	if claim != nil {
		r := newRequest()
		r.cmd = *claim
		reqs = append(reqs, r)
	}
	if err := s.submit(ctx, reqs); err != nil {
		// Unless the requests were refused, the writer may still read valid:
		// it is not reused.
		return nil, nil, err
	}
	// The answers' outcomes, allocated together: one allocation per call,
	// not one per acknowledgement. Each is its caller's to change.
	outcomes := make([]Outcome, len(valid))
	j := 0
	for _, r := range reqs[:acked] {
		if r.cmd.Kind == fsm.KindAcknowledge {
			setAckResult(&results[slot[j]], r.err, &r.res, &valid[j], &outcomes[j])
			j++
		} else {
			for k := range r.cmd.Acks {
				var res *fsm.Result
				if r.err == nil {
					res = &r.res.Acks[k]
				}
				setAckResult(&results[slot[j]], r.err, res, &valid[j], &outcomes[j])
				j++
			}
		}
		r.free()
	}
	sc.put(valid, slot)
	if claim == nil {
		return results, nil, nil
	}
	r := reqs[acked]
	leases, err := claimAnswer(r)
	r.free()
	return results, leases, err
}

// ackScratch is AcknowledgeBatch's working memory, pooled so that a steady
// stream of batches does not allocate it for each one.
type ackScratch struct {
	valid []fsm.Ack
	slot  []int
}

var ackScratchPool = sync.Pool{New: func() any { return new(ackScratch) }}

// put returns the scratch to the pool with valid and slot as its buffers;
// large ones are not kept. Like a pooled request's buffers (free), they are
// overwritten, not cleared.
func (sc *ackScratch) put(valid []fsm.Ack, slot []int) {
	if cap(valid) > reusedResultsMax || cap(slot) > reusedResultsMax {
		return
	}
	sc.valid, sc.slot = valid[:0], slot[:0]
	ackScratchPool.Put(sc)
}

// ackCommandBytes bounds the encoded size of one acknowledge-batch command,
// so that large results do not make one WAL entry of everything.
const ackCommandBytes = fsm.AckCommandBytes

// ackRequests packs acknowledgements, in order, into as few commands as
// fsm.MaxAcksPerCommand and ackCommandBytes allow. A lone acknowledgement is
// an acknowledge command.
func ackRequests(acks []fsm.Ack) []*request {
	var reqs []*request
	for len(acks) > 0 {
		n := ackRunLen(len(acks), func(i int) (string, *fsm.Outcome) { return acks[i].ExecutionID, &acks[i].Outcome })
		r := newRequest()
		if a := &acks[0]; n == 1 {
			r.cmd = fsm.Command{Kind: fsm.KindAcknowledge, ExecutionID: a.ExecutionID, Token: a.Token, Outcome: a.Outcome}
		} else {
			r.cmd = fsm.Command{Kind: fsm.KindAcknowledgeBatch, Acks: acks[:n:n]}
		}
		reqs = append(reqs, r)
		acks = acks[n:]
	}
	return reqs
}

// ackRunLen returns how many of n acknowledgements, the first ones, one
// acknowledge-batch command holds: at least one, at most
// fsm.MaxAcksPerCommand, and no more than about ackCommandBytes of them.
// ack returns the i-th one's ID and outcome.
func ackRunLen(n int, ack func(i int) (string, *fsm.Outcome)) int {
	size := 0
	for i := 0; i < min(n, fsm.MaxAcksPerCommand); i++ {
		if size += ackBytes(ack(i)); i > 0 && size > ackCommandBytes {
			return i
		}
	}
	return min(n, fsm.MaxAcksPerCommand)
}

// ackBytes is the encoded size of an acknowledgement inside a command, with
// its token counted at its widest.
func ackBytes(id string, o *fsm.Outcome) int {
	return fsm.AckLen(id, 1<<63, o)
}

// setAckResult fills one acknowledgement's answer from its command's error
// (the store failed) or its result, its record's outcome in o.
func setAckResult(out *AckResult, err error, res *fsm.Result, a *fsm.Ack, o *Outcome) {
	switch {
	case err != nil:
		out.Err = err
	case res.Code == fsm.CodeOK:
		out.Record = recordInto(&res.Exec, o)
		out.Record.Priority, out.Record.Deadline, out.Record.ConcurrencyKey = int(res.Priority), timeFromNanos(res.Deadline), res.ConcurrencyKey
		out.Applied = !res.Unchanged
		if res.Unchanged && repeats(&res.Exec, a) {
			out.Applied, out.Replayed = true, true
		}
	default:
		c := fsm.Command{Kind: fsm.KindAcknowledge, ExecutionID: a.ExecutionID, Token: a.Token}
		out.Err = resultErr(res, &c)
	}
}

// repeats reports whether a repeats the acknowledgement that suspended rec,
// with no claim since, or the one that made rec terminal: rec's last lease
// is a's (no claim came after it) and rec's outcome is a's, results in
// canonical form. Only an acknowledgement records
// a completed or failed outcome under a lease with the worker's own content;
// a cancellation's status and an exhausted attempt's error are the store's.
func repeats(rec *fsm.Execution, a *fsm.Ack) bool {
	if a.Outcome.Status == fsm.StatusSuspended {
		return rec.SuspendedBy(a.Token)
	}
	o := rec.Outcome
	if o == nil || rec.LastToken != a.Token || o.Status != a.Outcome.Status || o.HasRes != a.Outcome.HasRes {
		return false
	}
	if o.Status != fsm.StatusCompleted && o.Status != fsm.StatusFailed {
		return false
	}
	if o.HasRes && o.Result != a.Outcome.Result {
		x, errx := jsonv.Canonical(nil, []byte(o.Result))
		y, erry := jsonv.Canonical(nil, []byte(a.Outcome.Result))
		if errx != nil || erry != nil || !bytes.Equal(x, y) {
			return false
		}
	}
	return sameError(o.Error, a.Outcome.Error)
}

// sameError reports whether two recorded errors are the same, causes too.
func sameError(x, y *fsm.ErrorInfo) bool {
	for ; x != nil && y != nil; x, y = x.Cause, y.Cause {
		if x.Name != y.Name || x.Message != y.Message || x.Code != y.Code {
			return false
		}
	}
	return x == nil && y == nil
}
