package execstore

import (
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/mutant"
)

// writer is the writer goroutine and what it alone touches: the store's
// latest stamped time, the planner, the group-commit estimate and its
// timers. Each round it takes a batch from the inbox; commits its own
// commands first (retirement, schedule fires: requests like any caller's,
// each a batch of its own) when the round may make them (ownCommands), then
// the batch, through the committer chosen at Open; and sleeps until woken by
// a request, one of its timers or the committer.
type writer struct {
	s *Store
	c committer

	last    int64 // the latest time stamped, never decreasing
	planner planner
	group   groupCommit // how many callers a batch waits for (group.go)
	sched   writerTimer // the timer for the next schedule occurrence (schedules.go)
	retain  writerTimer // the timer for the next retention check
	// deadline is the timer for the next deadline (deadlines.go).
	deadline writerTimer
	taken    []*request
}

// run is the writer goroutine.
func (w *writer) run() {
	s := w.s
	defer close(s.stopped)
	defer w.sched.stop()
	defer w.retain.stop()
	defer w.deadline.stop()
	timed := false // a timer of the writer's woke it
	for {
		// The committer's own work (snapshot requests and a finished
		// background snapshot) is taken on every round, so that a steady
		// stream of writes never starves it.
		w.c.poll(w)
		w.awaitGroup()
		var calls, rest int
		var closing bool
		w.taken, calls, rest, closing = s.in.take(w.taken[:0], s.opts.MaxBatch, s.opts.MaxBatchBytes)
		n := len(w.taken)
		if n > 0 || timed {
			w.ownCommands()
		}
		timed = false
		if n > 0 {
			w.c.commit(w, w.taken)
			w.noteGroup(calls)
			clear(w.taken)
			if cap(w.taken) > queueCapMax {
				w.taken = nil
			}
		}
		w.c.afterRound(w)
		switch {
		case rest > 0:
			continue
		case closing && n == 0:
			w.c.finish(w)
			return
		case closing:
			continue
		}
		select {
		case <-s.in.kick:
		case <-w.armScheduleTimer():
			w.sched.fired()
			timed = true
		case <-w.armRetentionTimer():
			w.retain.fired()
			timed = true
		case <-w.armDeadlineTimer():
			w.deadline.fired()
			timed = true
		}
	}
}

// ownCommands commits the writer's own commands that are due, each a batch
// of its own, before the batch the round took. The rule is one: a round
// makes them when it took requests or when one of the writer's timers (the
// next occurrence's, the retention check's) woke it; never otherwise (a
// round a snapshot woke, say). On a clock whose timers never fire, only
// requests bring the writer here, so what it does depends on the requests
// alone.
//
// Retirement comes first, all that is due (retire commands in a row until
// one retires fewer than it may), so that a write that follows a
// retention's deadline answers after the retirement; then the executions'
// deadlines that have come, all of them, likewise; then one fire of the
// schedules' occurrences that have come, so that a write stamped at or after
// an occurrence answers after it. When more have come than one fire command
// holds, the schedule timer, set for a time that has come, wakes the writer
// again at once; on a clock whose timers never fire, the next request does.
func (w *writer) ownCommands() {
	for w.own(w.retirement) {
	}
	for w.own(w.forgetting) { // archived.go
	}
	for w.own(w.deadlineExpiry) { // deadlines.go
	}
	w.own(w.scheduleFires)
}

// own commits one of the writer's own commands when next makes one, as a
// batch of its own, and returns what next's done says of it: whether more
// may be due (a nil done: no).
func (w *writer) own(next func() (r *request, done func() bool)) bool {
	if w.s.failed() != nil || !w.c.leads() {
		return false
	}
	r, done := next()
	if r == nil {
		return false
	}
	w.c.commit(w, []*request{r})
	<-r.done
	more := done != nil && done()
	r.free()
	return more
}

// stamp returns the time for the next batch: the clock, but never earlier
// than any time already stamped (across restarts too: recovery starts from
// the state's latest time).
func (w *writer) stamp() int64 {
	now, ok := nanosFromTime(w.s.opts.Now())
	w.s.watchClock(now, ok, w.last)
	if !ok || now < w.last {
		now = w.last
	}
	w.last = now
	return now
}

// stampAt records a time the committer stamped a batch with (a replica's
// node stamps it): at least the state's time st, which it follows.
func (w *writer) stampAt(now, st int64) {
	clock, ok := nanosFromTime(w.s.opts.Now())
	w.last = max(w.last, st)
	w.s.watchClock(clock, ok, w.last)
	w.last = now
}

// ---- The writer's own commands ------------------------------------------------

// retireLimit bounds the executions one retire command retires, so that one
// command never holds the writer long.
const retireLimit = 1024

// armRetentionTimer sets the retention check's timer, RetentionCheck from
// now, unless it is set already, and returns its channel; nil (never ready)
// without retention.
func (w *writer) armRetentionTimer() <-chan time.Time {
	o := &w.s.opts
	if o.Retention <= 0 {
		return nil
	}
	if w.retain.t == nil {
		return w.retain.set(o.Clock, o.Clock.Now().Add(o.RetentionCheck))
	}
	return w.retain.t.C()
}

// writerTimer is one of the writer's timers. Writer goroutine only.
type writerTimer struct {
	t  Timer     // nil: not set
	at time.Time // t's deadline
}

// set makes the timer fire by deadline: a timer already set for no later
// stays (a timer set each round would cost one each round), any other is
// replaced. It returns the timer's channel.
func (wt *writerTimer) set(c Clock, deadline time.Time) <-chan time.Time {
	if wt.t != nil && !wt.at.After(deadline) {
		return wt.t.C()
	}
	wt.stop()
	wt.t, wt.at = c.TimerAt(deadline), deadline
	return wt.t.C()
}

// fired forgets a timer whose channel was received from.
func (wt *writerTimer) fired() { wt.t = nil }

// stop stops the timer, if it is set.
func (wt *writerTimer) stop() {
	if wt.t != nil {
		wt.t.Stop()
		wt.t = nil
	}
}

// retirement makes a retire command when some terminal execution is older
// than the retention; its cutoff follows the batch's time.
func (w *writer) retirement() (*request, func() bool) {
	s := w.s
	if s.opts.Retention <= 0 {
		return nil, nil
	}
	var oldest int64
	ok := false
	w.c.view(func(st *fsm.State) { oldest, ok = st.NextRetirable() })
	if !ok {
		return nil, nil
	}
	now, _ := nanosFromTime(s.opts.Now())
	if oldest >= w.retireCutoff(max(now, w.last)) {
		return nil, nil
	}
	r := newRequest()
	r.cmd = fsm.Command{Kind: fsm.KindRetire, Limit: retireLimit}
	r.fill = func(c *fsm.Command, _ *fsm.State) bool {
		c.At = w.retireCutoff(c.Now)
		return true
	}
	return r, func() bool { return r.err == nil && r.res.Count == retireLimit }
}

// retireCutoff is the time before which a terminal execution is retired, at
// the store's time now.
func (w *writer) retireCutoff(now int64) int64 {
	cutoff := now - int64(w.s.opts.Retention)
	if mutant.RetireAtCutoff {
		cutoff++
	}
	return cutoff
}

// scheduleFires makes a fire-schedules command when some schedule's next
// occurrence has come; what it fires is planned at the batch's time.
func (w *writer) scheduleFires() (*request, func() bool) {
	if !w.come((*fsm.State).NextOccurrence) {
		return nil, nil
	}
	r := newRequest()
	r.cmd = fsm.Command{Kind: fsm.KindFireSchedules}
	r.fill = func(c *fsm.Command, st *fsm.State) bool {
		c.Fires = w.s.planFires(c.Now, st)
		return len(c.Fires) > 0
	}
	return r, nil // occurrences still due set the schedule timer for now
}
