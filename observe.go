package execstore

import (
	"context"
	"log/slog"
	"time"

	"github.com/execstore/execstore/fsm"
)

// Metrics receives the store's measurements as they happen, for a
// monitoring system (the metrics package adapts it to Prometheus). The
// writer goroutine calls every method but Snapshot's caller, one call at a
// time, so an implementation needs no locking of its own beyond what its
// readers need; it MUST return quickly, since the writer waits for it. A
// store without Metrics (the default) measures nothing and costs nothing.
//
// Gauges (executions by status, the backlog, leases, the log and the
// snapshots) are not pushed here: read them with Store.Gauges when they are
// wanted.
type Metrics interface {
	// Commands counts n commands of one kind that ended with one result:
	// "ok", "conflict", "not_found", "lease_lost", "lease_cancelled",
	// "mismatch", "limit_exceeded", or "error" (the store failed, or the log
	// refused the batch). Kinds are the state machine's command names
	// ("admit", "claim", "acknowledge", ...); the acknowledgements of one
	// AcknowledgeBatch call count one by one as "acknowledge". Commands
	// answered without a write (an idle claim, a duplicate admission, a
	// stale lease) count as well. Called once per batch for each kind and
	// result seen in it, after the batch's callers are answered: a count may
	// show a moment after the call it counts has returned.
	Commands(kind, result string, n int)
	// Batch reports one write to the log: its entries, their encoded bytes,
	// the time of the whole write and, of it, the time spent in fsync (zero
	// with NoSync).
	Batch(entries, bytes int, write, fsync time.Duration)
	// Claimed reports a first delivery: the store's time from the
	// execution's admission to its first claim.
	Claimed(sinceAdmission time.Duration)
	// Acknowledged reports an acknowledgement of a current lease: the
	// store's time from the claim that issued the lease to the
	// acknowledgement.
	Acknowledged(sinceClaim time.Duration)
	// LeasesLost counts fenced writes (renew, release, acknowledge, step,
	// start) refused because their lease is no longer current; once per
	// batch, as Commands.
	LeasesLost(n int)
	// Snapshot reports a finished snapshot: its bytes, how long it took to
	// write, check, prune and compact, and its error (nil when it is
	// durable).
	Snapshot(bytes int64, took time.Duration, err error)
}

// resultNames are the result labels of Metrics.Commands, by fsm.Code; the
// last is "error".
var resultNames = [...]string{
	fsm.CodeOK:             "ok",
	fsm.CodeConflict:       "conflict",
	fsm.CodeNotFound:       "not_found",
	fsm.CodeLeaseLost:      "lease_lost",
	fsm.CodeMismatch:       "mismatch",
	fsm.CodeLimitExceeded:  "limit_exceeded",
	fsm.CodeLeaseCancelled: "lease_cancelled",
	resultError:            "error",
}

const (
	resultError = fsm.CodeLeaseCancelled + 1
	resultSlots = int(resultError) + 1
	kindSlots   = 32 // above every fsm.Kind
)

// lostLeaseLogInterval bounds how often the store logs lost leases: a
// storm of stale workers must not flood the log.
const lostLeaseLogInterval = 10 * time.Second

// observer is the writer's bookkeeping for Options.Metrics and the lost
// leases' log lines. The store has one only when some of it is wanted, so
// that a store without metrics pays a nil check per answer. Writer goroutine
// only.
type observer struct {
	metrics Metrics // may be nil: only the log lines are wanted
	logger  *slog.Logger
	warn    bool // the logger takes warnings

	counts  [kindSlots][resultSlots]int
	touched []cell // the cells of counts this batch made non-zero

	lost         int       // lost leases in this batch
	lostUnlogged int       // lost leases since the latest log line
	lostLogged   time.Time // the clock at the latest log line
	logged       bool

	// claimedAt holds each lease's claim time, by execution, to measure
	// claim-to-acknowledge; only with metrics. Entries of leases that end
	// without an acknowledgement (a cancellation, a failed last attempt)
	// are dropped when it doubles.
	claimedAt map[string]claimMark
	pruneAt   int
}

type cell struct{ kind, code uint8 }

type claimMark struct {
	token uint64
	at    int64
}

// newObserver returns the observer the options ask for, or nil.
func newObserver(m Metrics, logger *slog.Logger) *observer {
	warn := logger.Enabled(context.Background(), slog.LevelWarn)
	if m == nil && !warn {
		return nil
	}
	o := &observer{metrics: m, logger: logger, warn: warn, pruneAt: 1024}
	if m != nil {
		o.claimedAt = make(map[string]claimMark)
	}
	return o
}

// observe accounts for one answered request, BEFORE its caller is told (the
// caller then owns it again). Writer goroutine only.
func (s *Store) observe(r *request) {
	o := s.obs
	if r.err != nil {
		o.count(r.cmd.Kind, resultError)
		return
	}
	if r.cmd.Kind == fsm.KindAcknowledgeBatch {
		for i := range r.res.Acks {
			s.observeResult(fsm.KindAcknowledge, r.cmd.Acks[i].ExecutionID, r.cmd.Acks[i].Token, r.cmd.Now, &r.res.Acks[i])
		}
		return
	}
	s.observeResult(r.cmd.Kind, r.cmd.ExecutionID, r.cmd.Token, r.cmd.Now, &r.res)
}

func (s *Store) observeResult(kind fsm.Kind, id string, token uint64, now int64, res *fsm.Result) {
	o := s.obs
	o.count(kind, res.Code)
	switch {
	case res.Code == fsm.CodeLeaseLost || res.Code == fsm.CodeLeaseCancelled:
		o.lost++
		if o.warn {
			s.logLostLease(kind, id)
		}
	case o.metrics == nil || res.Code != fsm.CodeOK:
	case kind == fsm.KindClaim && res.Unchanged: // a keyed claim's repeat leased nothing new
	case kind == fsm.KindClaim:
		for _, l := range res.Leases {
			o.claimedAt[l.ExecutionID] = claimMark{token: l.Token, at: now}
			if l.Token == 1 {
				if e, ok := s.state.Get(l.ExecutionID); ok {
					o.metrics.Claimed(time.Duration(now - e.AdmittedAt))
				}
			}
		}
		if len(o.claimedAt) > o.pruneAt {
			s.pruneClaimMarks()
		}
	case kind == fsm.KindAcknowledge:
		if m, ok := o.claimedAt[id]; ok && m.token == token {
			o.metrics.Acknowledged(time.Duration(now - m.at))
			delete(o.claimedAt, id)
		}
	case kind == fsm.KindRelease:
		if m, ok := o.claimedAt[id]; ok && m.token == token {
			delete(o.claimedAt, id)
		}
	}
}

func (o *observer) count(kind fsm.Kind, code fsm.Code) {
	if int(kind) >= kindSlots || int(code) >= resultSlots {
		code, kind = resultError, 0
	}
	if o.counts[kind][code] == 0 {
		o.touched = append(o.touched, cell{uint8(kind), uint8(code)})
	}
	o.counts[kind][code]++
}

// pruneClaimMarks drops the claim times of leases that are no longer
// current.
func (s *Store) pruneClaimMarks() {
	o := s.obs
	for id, m := range o.claimedAt {
		if e, ok := s.state.Get(id); !ok || e.LeaseToken != m.token {
			delete(o.claimedAt, id)
		}
	}
	o.pruneAt = max(1024, 2*len(o.claimedAt))
}

// flushObserved hands the batch's counts and lost leases to Metrics, once
// its callers are answered. Writer goroutine only.
func (s *Store) flushObserved() {
	o := s.obs
	for _, c := range o.touched {
		n := o.counts[c.kind][c.code]
		o.counts[c.kind][c.code] = 0
		if o.metrics != nil {
			o.metrics.Commands(fsm.Kind(c.kind).String(), resultNames[c.code], n)
		}
	}
	o.touched = o.touched[:0]
	if o.lost == 0 {
		return
	}
	n := o.lost
	o.lost = 0
	if o.metrics != nil {
		o.metrics.LeasesLost(n)
	}
}

// logLostLease counts a lost lease and logs the count, at most once per
// lostLeaseLogInterval of the clock. It runs before the caller is answered,
// so that the line is written when the refusal returns. Writer goroutine
// only.
func (s *Store) logLostLease(kind fsm.Kind, id string) {
	o := s.obs
	o.lostUnlogged++
	now := s.opts.Now() // the clock, not the store's time: this counts real time
	if o.logged && now.Sub(o.lostLogged) < lostLeaseLogInterval {
		return
	}
	o.logger.Warn("execstore: fenced writes refused: their lease is no longer current (a later claim superseded it, it ended, or the execution was cancelled)",
		"count", o.lostUnlogged, "example_execution", id, "example_command", kind.String())
	o.lostUnlogged, o.lostLogged, o.logged = 0, now, true
}
