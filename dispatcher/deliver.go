package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/mutant"
)

// result is what an invoker returned.
type result struct {
	outcome execstore.RunOutcome
	err     error
}

// errGoexit is the result of an invoker whose goroutine exited without
// returning (runtime.Goexit): the worker died before replying.
var errGoexit = fmt.Errorf("%w (its goroutine called runtime.Goexit)", ErrWorkerExited)

// deliver runs one claimed lease to its end: read the record, invoke, then
// acknowledge, release, or leave the lease to expire. The caller holds the
// lease's slot and frees it after deliver returns, unless chained: then the
// acknowledgement also claimed next for the same slot (see acknowledge).
func (d *Dispatcher) deliver(lease execstore.Lease, stop chan struct{}) (next execstore.Lease, chained bool) {
	log := deliveryLog{base: d.opts.logger, lease: lease}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	r := d.renew(lease, cancel, log)
	defer r.stop()

	rec, err := d.store.Get(context.Background(), lease.ExecutionID)
	if err != nil {
		// Expiry is always safe: it counts as an unacknowledged delivery, and
		// the store that just failed may not take a release either.
		log.Error("dispatcher: failed to read the claimed execution's record; the lease will expire and the execution will be redelivered", "err", err)
		return execstore.Lease{}, false
	}
	if rec.Status.Terminal() {
		// A finished execution never runs again. Reaching a terminal status
		// ended every lease, so there is nothing to acknowledge, and the
		// outcome is not this delivery's to publish: whoever recorded it did.
		return execstore.Lease{}, false
	}
	res, settled := d.invoke(ctx, r, deliveryOf(rec, lease), log)
	if !settled {
		return execstore.Lease{}, false // abandoned: the lease was lost, there is nothing to end
	}
	current, lost := r.stop()
	if lost && !mutant.DispatcherIgnoresLostLease {
		return execstore.Lease{}, false // another claim took over: neither acknowledge nor release
	}
	if res.err != nil {
		d.fail(current, rec.Attempts, res.err, log)
		return execstore.Lease{}, false
	}
	ack, next, chained, err := d.acknowledge(current, res.outcome, stop)
	if err != nil {
		d.endFailed("acknowledge", err, log)
		if mutant.DispatcherDropsClaimOnAckError {
			return execstore.Lease{}, false
		}
		return next, chained // a lease the round claimed for this slot is delivered all the same
	}
	// Publish only the outcome this acknowledgement recorded. One that found
	// the execution terminal already (its lease was taken over, and the new
	// holder ended it) gets the recorded outcome back, not applied: the
	// delivery that recorded it has published it.
	if ack.Record.Status.Terminal() && (ack.Applied || mutant.DispatcherPublishesUnapplied) {
		d.publish(ack.Record)
	}
	return next, chained
}

// acknowledge acknowledges one delivery's outcome and says whether it was
// the one recorded (execstore.AckResult.Applied). Unless stop is closed, a
// store that offers AckClaimer takes it together with the acknowledgements
// of the deliveries ending at the same time, in one call that also claims
// the next due execution for each of their slots (see acks): a busy
// dispatcher then pays one write (one fsync) for a round of deliveries, not
// one for each acknowledgement and more for the claims that refill their
// slots. chained says whether it claimed one for this slot (next).
func (d *Dispatcher) acknowledge(lease execstore.Lease, outcome execstore.RunOutcome, stop chan struct{}) (res execstore.AckResult, next execstore.Lease, chained bool, err error) {
	ack := execstore.Ack{Lease: lease, Outcome: outcome}
	if ac, ok := d.store.(AckClaimer); ok && !closed(stop) {
		r := d.acks.acknowledge(d, ac, ack, stop)
		return r.res, r.next, r.chained, r.err
	}
	res, err = d.acknowledgeOne(ack)
	return res, execstore.Lease{}, false, err
}

// acknowledgeOne acknowledges ack alone.
func (d *Dispatcher) acknowledgeOne(ack execstore.Ack) (execstore.AckResult, error) {
	results, err := d.store.AcknowledgeBatch(context.Background(), []execstore.Ack{ack})
	if err != nil {
		return execstore.AckResult{}, err
	}
	return results[0], results[0].Err
}

// ackCombiner gathers the acknowledgements of deliveries that end while
// another round is being written, so that they are written together. The
// first delivery to find no round in flight leads one: it takes every
// acknowledgement queued (its own among them), calls AcknowledgeAndClaim
// once for all of them with a claim of one execution per slot, answers each,
// and passes the lead to the first delivery queued meanwhile, if any, before
// it goes on with its own next delivery. No delivery leads more than one
// round in a row, so none is held up while others keep arriving.
type ackCombiner struct {
	mu     sync.Mutex
	queue  []*ackWait
	spare  []*ackWait // the previous round's queue, reused
	leader bool       // a round is being led
}

// ackWait is one delivery's acknowledgement waiting for its round.
type ackWait struct {
	ack  execstore.Ack
	done chan ackMsg // capacity 1: the lead, or the answer
}

type ackMsg struct {
	lead  bool // lead the next round; the answer follows it
	alone bool // the round was refused as a whole: acknowledge alone
	ackAnswer
}

// answer is a round's answer to d's acknowledgement ack: m's, or with
// m.alone, ack's own written alone.
func (m ackMsg) answer(d *Dispatcher, ack execstore.Ack) ackAnswer {
	if m.alone {
		res, err := d.acknowledgeOne(ack)
		return ackAnswer{res: res, err: err}
	}
	return m.ackAnswer
}

type ackAnswer struct {
	res     execstore.AckResult
	next    execstore.Lease
	chained bool
	err     error
}

func (c *ackCombiner) acknowledge(d *Dispatcher, ac AckClaimer, ack execstore.Ack, stop chan struct{}) ackAnswer {
	w := &ackWait{ack: ack, done: make(chan ackMsg, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, w)
	lead := !c.leader
	c.leader = true
	c.mu.Unlock()
	if !lead {
		m := <-w.done
		if !m.lead {
			return m.answer(d, ack)
		}
	}
	c.mu.Lock()
	round := c.queue
	c.queue, c.spare = c.spare[:0], nil
	c.mu.Unlock()
	d.writeRound(ac, round, stop)
	c.mu.Lock()
	clear(round)
	c.spare = round[:0]
	if len(c.queue) > 0 {
		c.queue[0].done <- ackMsg{lead: true} // it is in the queue: nothing else was sent to it
	} else {
		c.leader = false
	}
	c.mu.Unlock()
	m := <-w.done
	return m.answer(d, ack)
}

// writeRound acknowledges a round's acknowledgements in one call that also
// claims up to one execution for each of their slots (none once stop is
// closed), and answers each of them.
func (d *Dispatcher) writeRound(ac AckClaimer, round []*ackWait, stop chan struct{}) {
	acks := make([]execstore.Ack, len(round))
	for i, w := range round {
		acks[i] = w.ack
	}
	var results []execstore.AckResult
	var leases []execstore.Lease
	var err error
	if closed(stop) {
		results, err = d.store.AcknowledgeBatch(context.Background(), acks)
	} else {
		if d.queues != nil {
			req := execstore.ClaimRequest{Limit: len(acks), LeaseDuration: d.opts.LeaseDuration, Queues: d.opts.Queues}
			results, leases, err = d.queues.AcknowledgeAndClaimWith(context.Background(), acks, req)
		} else {
			results, leases, err = ac.AcknowledgeAndClaim(context.Background(), acks, len(acks), d.opts.LeaseDuration)
		}
	}
	if len(round) > 1 && results == nil && leases == nil &&
		(errors.Is(err, execstore.ErrInvalidArgument) || errors.Is(err, execstore.ErrLimitExceeded)) {
		// Refused as a whole, and nothing was written: together they are
		// more than one call may carry (Limits.AcknowledgeBatchBytes). Each
		// delivery acknowledges alone, at once and side by side (the store
		// still shares their fsync), and gets the answer it would have had
		// without the others; the lead passes on meanwhile.
		for _, w := range round {
			w.done <- ackMsg{alone: true}
		}
		return
	}
	for i, w := range round {
		var a ackAnswer
		if i < len(leases) {
			// A claim that returned a lease took it, whatever else failed:
			// it is delivered in this slot.
			a.next, a.chained = leases[i], true
		}
		switch {
		case i < len(results):
			a.res, a.err = results[i], results[i].Err
		case err != nil:
			a.err = err
		default:
			a.err = errors.New("dispatcher: the store answered an acknowledgement with no result")
		}
		w.done <- ackMsg{ackAnswer: a}
	}
}

// deliveryLog logs for one delivery, with its lease's attributes first, as
// a logger made With them would; it makes none, since most deliveries log
// nothing. The delivery's goroutines share it by value.
type deliveryLog struct {
	base  *slog.Logger
	lease execstore.Lease
}

func (dl deliveryLog) Error(msg string, args ...any) { dl.base.Error(msg, dl.with(args)...) }
func (dl deliveryLog) Warn(msg string, args ...any)  { dl.base.Warn(msg, dl.with(args)...) }

func (dl deliveryLog) with(args []any) []any {
	return append([]any{"execution_id", dl.lease.ExecutionID, "token", dl.lease.Token}, args...)
}

func deliveryOf(rec execstore.Record, lease execstore.Lease) Delivery {
	return Delivery{
		ExecutionID: rec.ExecutionID,
		WorkflowID:  rec.WorkflowID,
		Params:      rec.Params,
		Context:     rec.Context,
		Lease:       lease,
		Attempt:     rec.Attempts,
		Parent:      rec.Parent,
	}
}

// invoke runs the invoker on its own goroutine and waits for its result. If
// the lease is lost first, it waits AbortGracePeriod more, counted from the
// moment the loss was seen, then abandons the delivery: settled is false and
// the late result is logged and ignored.
func (d *Dispatcher) invoke(ctx context.Context, r *renewal, del Delivery, log deliveryLog) (res result, settled bool) {
	done := make(chan result, 1)
	go func() {
		res := result{err: errGoexit}
		defer func() {
			if p := recover(); p != nil {
				log.Error("dispatcher: the invoker panicked", "panic", p, "stack", string(debug.Stack()))
				res = result{err: fmt.Errorf("dispatcher: the invoker panicked: %v", p)}
			}
			done <- res
		}()
		res.outcome, res.err = d.inv.Invoke(ctx, del)
	}()
	select {
	case res = <-done:
		return res, true
	case <-ctx.Done():
	}
	grace := d.opts.Clock.TimerAt(r.lostAt().Add(d.opts.AbortGracePeriod))
	defer grace.Stop()
	select {
	case res = <-done:
		return res, true
	case <-grace.C():
	}
	log.Warn("dispatcher: the delivery did not stop within the abort grace period after its lease was lost; abandoning it")
	go func() {
		late := <-done
		log.Warn("dispatcher: an abandoned delivery returned late; its result is ignored", "status", late.outcome.Status, "err", late.err)
	}()
	return result{}, false
}

// fail ends a delivery that returned an error instead of an outcome.
func (d *Dispatcher) fail(lease execstore.Lease, attempts int, cause error, log deliveryLog) {
	if errors.Is(cause, ErrWorkerExited) {
		// The worker may have died mid-write: let the lease expire rather
		// than invite a new holder while its last writes may still land.
		log.Error("dispatcher: the worker exited without replying; the lease will expire and the execution will be redelivered", "err", cause)
		return
	}
	delay := retryDelay(attempts, d.opts.RetryBaseDelay, d.opts.RetryMaxDelay)
	log.Error("dispatcher: the delivery failed without an outcome; releasing its lease for redelivery", "err", cause, "retry_after", delay)
	var err error
	if cr, ok := d.store.(CauseReleaser); ok {
		err = cr.ReleaseWithCause(context.Background(), lease, delay, cause)
	} else {
		err = d.store.Release(context.Background(), lease, delay)
	}
	if err != nil {
		d.endFailed("release", err, log)
	}
}

// endFailed logs a failed acknowledgement or release. Either way the lease is
// left to expire: the execution is delivered again after it.
func (d *Dispatcher) endFailed(op string, err error, log deliveryLog) {
	if errors.Is(err, execstore.ErrLeaseLost) {
		warnLost(log)
		return
	}
	log.Error("dispatcher: failed to "+op+"; the lease will expire and the execution will be redelivered", "err", err)
}

func warnLost(log deliveryLog) {
	log.Warn("dispatcher: the lease was lost to another claim; this delivery stops without an outcome")
}

func (d *Dispatcher) publish(rec execstore.Record) {
	if d.opts.OnOutcome != nil {
		d.opts.OnOutcome(rec)
	}
}

// renewal renews one delivery's lease every RenewInterval until stopped or
// lost.
type renewal struct {
	stopc    chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	mu    sync.Mutex
	lease execstore.Lease // the latest renewed lease (same token)
	lost  bool
	when  time.Time // when the loss was seen
}

// renew starts renewing lease. When a renewal finds the lease lost it stops
// renewing and cancels the delivery with execstore.ErrLeaseLost as the cause,
// or with the renewal's error, which matches ErrLeaseLost and
// ErrCancelled, when the execution was cancelled.
func (d *Dispatcher) renew(lease execstore.Lease, cancel context.CancelCauseFunc, log deliveryLog) *renewal {
	r := &renewal{stopc: make(chan struct{}), done: make(chan struct{}), lease: lease}
	go r.run(d, cancel, log)
	return r
}

func (r *renewal) run(d *Dispatcher, cancel context.CancelCauseFunc, log deliveryLog) {
	defer close(r.done)
	clock, every := d.opts.Clock, d.opts.RenewInterval
	// Renewals fall on a grid that starts at the claim (the store's time of
	// it), so each deadline is known before the clock gets there.
	start := r.lease.ExpiresAt.Add(-d.opts.LeaseDuration)
	next := start.Add(every)
	for {
		t := clock.TimerAt(next)
		var fired time.Time
		select {
		case fired = <-t.C():
		case <-r.stopc:
			t.Stop()
			return
		}
		if closed(r.stopc) {
			return
		}
		l, err := d.store.Renew(context.Background(), r.current(), d.opts.LeaseDuration)
		switch {
		case err == nil:
			r.mu.Lock()
			r.lease = l
			r.mu.Unlock()
		case errors.Is(err, execstore.ErrLeaseLost):
			r.mu.Lock()
			r.lost, r.when = true, clock.Now()
			r.mu.Unlock()
			if errors.Is(err, execstore.ErrCancelled) {
				// The cause says why: the execution was cancelled (and it
				// matches ErrLeaseLost too).
				log.Warn("dispatcher: the execution was cancelled; this delivery stops without an outcome")
				cancel(err)
				return
			}
			warnLost(log)
			cancel(execstore.ErrLeaseLost)
			return
		default:
			// Keep trying: the lease stays current until another claim
			// supersedes it, even after it expires.
			log.Error("dispatcher: failed to renew the lease; retrying at the next interval", "err", err)
		}
		// The next deadline follows from when this one fired, not from the
		// clock after the renewal, which may have moved meanwhile.
		next = nextTick(start, every, fired)
	}
}

// nextTick returns the first instant start + k·every (k ≥ 1) after now.
func nextTick(start time.Time, every time.Duration, now time.Time) time.Time {
	k := int64(1)
	if now.After(start) {
		k = int64(now.Sub(start)/every) + 1
	}
	return start.Add(time.Duration(k) * every)
}

func (r *renewal) current() execstore.Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lease
}

func (r *renewal) lostAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.when
}

// stop stops renewing, waits for a renewal in flight, and returns the latest
// lease and whether it was lost.
func (r *renewal) stop() (execstore.Lease, bool) {
	r.stopOnce.Do(func() { close(r.stopc) })
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lease, r.lost
}
