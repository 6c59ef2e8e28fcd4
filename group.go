package execstore

import (
	"runtime"
	"sync/atomic"
	"time"
)

// groupCommit is the writer's estimate of how many callers take part in its
// batches, and how well waiting for them has paid.
//
// Callers that each wait for their answer before they send again (claimers
// in a loop, goroutines admitting one execution after another, a
// dispatcher's rounds) otherwise split into groups that take turns: the group
// batch k answers sends again while batch k+1, made of the callers that
// queued during k's fsync, is being written, so each fsync carries only part
// of them. Waiting briefly for the answered callers to come back lets one
// fsync carry them all. A wait that ends at its bound with none of them back
// makes the writer skip waiting for twice as many batches as the one before
// (up to groupSkipMax), so that callers who do not send again at once
// (independent requests at a moderate rate) do not pay the wait on every
// batch; a wait that all of them ended takes one such miss back.
type groupCommit struct {
	// Writer-owned.
	expect int // the calls of the latest batch plus those that queued while it was written
	base   int // the calls queued when the latest batch was answered
	misses int // waits that none of the answered callers ended, less those that all of them did
	skip   int // batches left to take without waiting

	waited atomic.Uint64 // waits that ended with the expected calls queued (Stats)
	missed atomic.Uint64 // waits that ended at their bound (Stats)
	// looks counts the times a wait looked at the queue and went on
	// waiting: a test queues its calls once the wait has begun.
	looks atomic.Uint64
}

// groupWaitMax bounds a batch's wait for its callers when Options.GroupWait
// is zero, whatever the fsync takes; groupSkipMax bounds the batches taken
// without waiting after misses.
const (
	groupWaitMax = 500 * time.Microsecond
	groupSkipMax = 64
)

// GroupWaitMax is the longest Options.GroupWait Open accepts: longer than
// the slowest disk's fsync, so longer than any wait that could save one. A
// wait holds the callers already queued and spins a core, so it has a limit
// like everything else.
const GroupWaitMax = time.Second

// awaitGroup waits, before a batch is taken, until the calls the writer
// expects have queued, for at most groupBound. It waits only when something
// is queued already but fewer calls than expected, and while the batch
// could take more. The wait spins, yielding the processor to the callers
// coming back: a timer would wake it late (Go rounds sleeps under a
// millisecond up when nothing else runs), and the wait is shorter than the
// fsync it saves. Writer goroutine only.
func (w *writer) awaitGroup() {
	g := &w.group
	if g.expect < 2 {
		return
	}
	if g.skip > 0 {
		g.skip--
		return
	}
	bound := w.c.groupBound(&w.s.opts)
	if bound <= 0 {
		return
	}
	var deadline time.Time
	for {
		calls, queued, closing := w.s.in.state()
		if calls == 0 || closing || queued >= w.s.opts.MaxBatch {
			return
		}
		if calls >= g.expect {
			if !deadline.IsZero() {
				g.waited.Add(1)
				g.misses = max(g.misses-1, 0)
			}
			return
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(bound)
		} else if !now.Before(deadline) {
			g.missed.Add(1)
			if calls <= g.base {
				// None of the callers answered came back: they do not send
				// again as soon as they are answered.
				g.misses++
				g.skip = min(1<<min(g.misses, 30), groupSkipMax)
			}
			return
		}
		g.looks.Add(1)
		runtime.Gosched()
	}
}

// noteGroup records, once a batch of calls has been written and answered,
// how many calls the next batch should wait for. Writer goroutine only.
func (w *writer) noteGroup(calls int) {
	queued, _, _ := w.s.in.state()
	w.group.expect, w.group.base = calls+queued, queued
}
