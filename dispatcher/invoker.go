package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/execstore/execstore"
)

// Invoker runs one delivery of an execution and reports how it ended.
//
// ctx is cancelled, with execstore.ErrLeaseLost as its cause
// (context.Cause), once the delivery's lease is lost to another claim; when
// the execution was cancelled (execstore.Store.Cancel), the cause matches
// execstore.ErrCancelled as well as ErrLeaseLost (errors.Is). Either is seen
// at the next renewal, so within RenewInterval. From then on every write
// fenced by the lease is refused, and the dispatcher neither acknowledges
// nor releases: the invoker should stop promptly. One that has not returned
// AbortGracePeriod after the cancel is abandoned.
//
// Returning an outcome acknowledges it (execstore.Store.AcknowledgeAndClaim
// with the other deliveries ending at the same time, or
// execstore.Store.AcknowledgeBatch on a store that is no AckClaimer).
// Returning an error acknowledges nothing: ErrWorkerExited leaves the lease
// to expire; any other error releases it with a retry delay, and with the
// error as the release's cause (see Store). Either way the execution's
// wakes stay pending and it is delivered again, unless that was the last
// attempt its admission allows (execstore.AdmitRequest.MaxAttempts): then
// it fails with execstore.ErrAttemptsExhausted, caused by that error.
type Invoker interface {
	Invoke(ctx context.Context, d Delivery) (execstore.RunOutcome, error)
}

// InvokerFunc adapts a function to Invoker.
type InvokerFunc func(ctx context.Context, d Delivery) (execstore.RunOutcome, error)

// Invoke calls f(ctx, d).
func (f InvokerFunc) Invoke(ctx context.Context, d Delivery) (execstore.RunOutcome, error) {
	return f(ctx, d)
}

// Delivery is one delivery of an execution: its event, read from the
// execution's record when it was claimed (never from the wake that made it
// due), and the lease that fences every write made on its behalf.
type Delivery struct {
	ExecutionID string            // the execution delivered
	WorkflowID  string            // the workflow it runs
	Params      json.RawMessage   // byte-identical to what was admitted; nil if none
	Context     map[string]string // the admitted context (a copy)
	// Lease fences the delivery's writes (SaveStep, Start, Acknowledge...).
	// Renewals keep its token, so it stays valid for the whole delivery.
	Lease execstore.Lease
	// Attempt counts the deliveries of this execution claimed so far, this
	// one included (execstore.Record.Attempts).
	Attempt int
	// Parent is set when another execution started this one.
	Parent *execstore.Parent
}

// ErrWorkerExited is returned by an Invoker whose worker died before
// replying, possibly in the middle of a write. The dispatcher then leaves the
// lease to expire instead of releasing it: releasing would invite a new
// delivery while the dead worker's last writes may still land, whereas until
// the lease expires those writes are either fenced out or finished.
var ErrWorkerExited = errors.New("dispatcher: the worker exited before replying")

// Store is what a Dispatcher needs of a store. *execstore.Store implements
// it; tests wrap it to inject failures.
type Store interface {
	ClaimDue(ctx context.Context, limit int, leaseDuration time.Duration) ([]execstore.Lease, error)
	Get(ctx context.Context, executionID string) (execstore.Record, error)
	Renew(ctx context.Context, lease execstore.Lease, leaseDuration time.Duration) (execstore.Lease, error)
	Release(ctx context.Context, lease execstore.Lease, retryAfter time.Duration) error
	// AcknowledgeBatch is how a delivery acknowledges when the store is no
	// AckClaimer, once the dispatcher is stopping, or alone when its round
	// was refused as a whole (AckClaimer): its answer says
	// whether the outcome was the one recorded (execstore.AckResult.Applied),
	// which decides whether it is published.
	AcknowledgeBatch(ctx context.Context, acks []execstore.Ack) ([]execstore.AckResult, error)
	Stats(ctx context.Context) (execstore.Stats, error)
	DueChanged() <-chan struct{}
}

var _ Store = (*execstore.Store)(nil)

// CauseReleaser is what a Store offers when it can keep the error that ended
// a delivery with the release (*execstore.Store does): the dispatcher then
// releases with ReleaseWithCause instead of Release, so that the error
// becomes the cause of the failure when the release ends the last allowed
// attempt. A wrapper of a store that overrides Release should override
// ReleaseWithCause too (or not offer it).
type CauseReleaser interface {
	ReleaseWithCause(ctx context.Context, lease execstore.Lease, retryAfter time.Duration, cause error) error
}

var _ CauseReleaser = (*execstore.Store)(nil)

// NextDuer is what a Store offers when it can say when the next execution
// becomes claimable without building its Stats (*execstore.Store does): the
// dispatcher asks it on every idle loop, and falls back to Stats.NextDue
// otherwise.
type NextDuer interface {
	NextDue(ctx context.Context) (time.Time, error)
}

var _ NextDuer = (*execstore.Store)(nil)

// AckClaimer is what a Store offers when it can acknowledge and claim in one
// call (*execstore.Store does, with AcknowledgeAndClaim: one write and one
// fsync for both). The deliveries that end with an outcome meanwhile are then
// acknowledged in one call that also claims the next due execution for each
// of their slots, each delivered on the goroutine of the delivery it
// follows; a slot its claim found nothing for is freed, and the claiming
// loop takes over. A wrapper of a store that overrides ClaimDue or
// AcknowledgeBatch should override AcknowledgeAndClaim too (or not offer it).
type AckClaimer interface {
	AcknowledgeAndClaim(ctx context.Context, acks []execstore.Ack, limit int, leaseDuration time.Duration) ([]execstore.AckResult, []execstore.Lease, error)
}

var _ AckClaimer = (*execstore.Store)(nil)

// QueueClaimer is what a Store must offer for a dispatcher that claims from
// named queues (Options.Queues): a claim, a claim after acknowledgements and
// the next due time, each for those queues (*execstore.Store does). A
// wrapper of a store that overrides ClaimDue, AcknowledgeAndClaim or
// NextDue should override these too.
type QueueClaimer interface {
	Claim(ctx context.Context, req execstore.ClaimRequest) ([]execstore.Lease, error)
	AcknowledgeAndClaimWith(ctx context.Context, acks []execstore.Ack, req execstore.ClaimRequest) ([]execstore.AckResult, []execstore.Lease, error)
	NextDueIn(ctx context.Context, queues []string) (time.Time, error)
}

var _ QueueClaimer = (*execstore.Store)(nil)
