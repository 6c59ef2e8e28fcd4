package dispatcher

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/execstore/execstore"
)

// Defaults of Options. They follow @yieldstar/core 0.6.0's dispatcher, except
// the poll interval, which here is only a fallback (see Options.PollInterval).
const (
	DefaultConcurrency      = 10
	DefaultLeaseDuration    = 30 * time.Second
	DefaultAbortGracePeriod = time.Second
	DefaultPollInterval     = time.Second
	DefaultRetryBaseDelay   = time.Second
	DefaultRetryMaxDelay    = 5 * time.Minute
)

// Options configure a Dispatcher. The zero value takes every default; New
// refuses a value outside its range with an error matching
// execstore.ErrInvalidArgument.
type Options struct {
	// Concurrency is the most deliveries that run at once. It must not exceed
	// the store's claim limit (execstore.Limits.ClaimLimit). Default 10.
	Concurrency int
	// LeaseDuration is how long each lease lasts unless renewed. It must not
	// exceed the store's lease limit (execstore.Limits.LeaseDuration).
	// Default 30 s.
	LeaseDuration time.Duration
	// RenewInterval is the time between renewals of a delivery's lease. It
	// must be shorter than LeaseDuration. Default LeaseDuration / 3.
	RenewInterval time.Duration
	// AbortGracePeriod is how long a delivery whose lease was lost may take to
	// return after its context is cancelled. After that it is abandoned: its
	// slot is freed and its late result is logged and ignored. Zero means the
	// default, 1 s; a negative value is refused (use a nanosecond to abandon
	// at once).
	AbortGracePeriod time.Duration
	// PollInterval is the fallback claim interval while idle. An idle
	// dispatcher does not poll for work: the store tells it when something
	// may have become due (Store.DueChanged) and when the next wake or lease
	// expiry falls (Stats.NextDue). The poll only bounds how long a missed
	// signal, or a claim that failed, could delay work. Default 1 s.
	PollInterval time.Duration
	// RetryBaseDelay and RetryMaxDelay shape the delay before a delivery that
	// returned an error (other than ErrWorkerExited) is due again: the n-th
	// attempt (execstore.Record.Attempts) waits RetryBaseDelay·2^(n-1), at
	// most RetryMaxDelay, with no jitter (so tests and replays are exact).
	// Defaults 1 s and 5 min; RetryMaxDelay must not be below RetryBaseDelay.
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration // see RetryBaseDelay
	// Logger receives the dispatcher's logs. Nil discards them.
	Logger *slog.Logger
	// Clock reads the time and runs the dispatcher's timers (renewals, the
	// abort grace period, the next due time, the poll). Nil means the system
	// clock; tests inject a manual one (package dispatchertest) so that time
	// moves only when they say.
	Clock Clock
	// OnOutcome is called with the record of every execution this dispatcher
	// ended: after an acknowledgement of a completed or failed outcome that
	// was applied (execstore.AckResult.Applied), once per outcome across
	// every dispatcher of the store. An outcome recorded otherwise (by a
	// cancellation, a release of the last allowed attempt, an acknowledgement
	// outside any dispatcher) is not published. It runs on the delivery's
	// goroutine and holds its slot, and the execution claimed for that slot
	// in the same round waits for it, its lease not yet renewed: it should
	// return quickly. Nil means no
	// hook.
	OnOutcome func(execstore.Record)
	// Queues names the queues the dispatcher claims from
	// (execstore.ClaimRequest.Queues): at most execstore.MaxClaimQueues;
	// none (the default) claims from every queue. An execution's queue is
	// by default its workflow ID, so a dispatcher for a workflow.Worker
	// passes the worker's Queues. The store must be a QueueClaimer.
	Queues []string
}

// resolved is Options with every default applied.
type resolved struct {
	Options
	logger *slog.Logger
}

// resolve applies the defaults and checks every range.
func (o Options) resolve() (resolved, error) {
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = o.LeaseDuration / 3
	}
	if o.AbortGracePeriod == 0 {
		o.AbortGracePeriod = DefaultAbortGracePeriod
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.RetryBaseDelay == 0 {
		o.RetryBaseDelay = DefaultRetryBaseDelay
	}
	if o.RetryMaxDelay == 0 {
		o.RetryMaxDelay = max(DefaultRetryMaxDelay, o.RetryBaseDelay)
	}
	if o.Clock == nil {
		o.Clock = SystemClock()
	}
	if err := o.check(); err != nil {
		return resolved{}, err
	}
	r := resolved{Options: o, logger: o.Logger}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

func (o *Options) check() error {
	switch {
	case o.Concurrency < 1:
		return invalid("concurrency %d must be positive", o.Concurrency)
	case o.LeaseDuration <= 0:
		return invalid("lease duration %v must be positive", o.LeaseDuration)
	case o.RenewInterval <= 0 || o.RenewInterval >= o.LeaseDuration:
		return invalid("renew interval %v must be positive and shorter than the lease duration %v", o.RenewInterval, o.LeaseDuration)
	case o.AbortGracePeriod < 0:
		return invalid("abort grace period %v must not be negative", o.AbortGracePeriod)
	case o.PollInterval < 0:
		return invalid("poll interval %v must be positive", o.PollInterval)
	case o.RetryBaseDelay < 0:
		return invalid("retry base delay %v must be positive", o.RetryBaseDelay)
	case o.RetryMaxDelay < o.RetryBaseDelay:
		return invalid("retry max delay %v must not be below the base delay %v", o.RetryMaxDelay, o.RetryBaseDelay)
	case len(o.Queues) > execstore.MaxClaimQueues:
		return invalid("%d queues, more than the limit of %d", len(o.Queues), execstore.MaxClaimQueues)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("dispatcher: "+format+": %w", append(args, execstore.ErrInvalidArgument)...)
}

// retryDelay is the delay before the attempts-th delivery of an execution is
// due again after it returned an error: base·2^(attempts-1), at most maxDelay.
func retryDelay(attempts int, base, maxDelay time.Duration) time.Duration {
	d := base
	for i := 1; i < attempts && d < maxDelay; i++ {
		if d > maxDelay/2 {
			return maxDelay
		}
		d *= 2
	}
	return min(d, maxDelay)
}
