package execstore

import (
	"sync/atomic"
	"time"
)

// Clock is the store's source of time and of the timers its writer waits on
// (Options.Clock): the next schedule occurrence's and the retention check's.
// The dispatcher takes the same interface (dispatcher.Options.Clock), so one
// clock can drive a store and its dispatchers.
//
// Timers are set for an instant, not a duration, so that a deadline computed
// from a time read earlier (the next occurrence, a lease's claim) does not
// shift if the clock moves between reading it and setting the timer. A
// manual clock (package dispatchertest) therefore fires exactly the timers
// whose deadlines it was moved past, whatever the goroutines' interleaving.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// TimerAt returns a timer whose channel receives once the clock reads
	// deadline or later (at once if it already does).
	TimerAt(deadline time.Time) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C returns the channel the timer fires on.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it stopped
	// the timer before it fired.
	Stop() bool
}

// systemClock is the clock of a store opened without Options.Clock: now
// (Options.Now, else time.Now) and the operating system's timers, each set
// for as long as now reads its deadline away. A now that does not move with
// real time (a test's) therefore sees a timer fire after the real time it
// showed, and the writer, woken, reads now again.
type systemClock struct{ now func() time.Time }

func (c systemClock) Now() time.Time { return c.now() }

func (c systemClock) TimerAt(deadline time.Time) Timer {
	return systemTimer{time.NewTimer(deadline.Sub(c.now()))}
}

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }

// clockOptions checks the options of the store's clock and of the writer's
// timers and fills in their defaults: afterwards Clock and Now are both set,
// Now being Clock's.
func clockOptions(o *Options) error {
	switch {
	case o.Clock != nil && o.Now != nil:
		return invalidArg("Options.Clock and Options.Now are both set: the store's time and its timers come from one clock; set one")
	case o.RetentionCheck < 0:
		return invalidArg("Options.RetentionCheck %v is negative (a store that retires only when it takes requests runs on a Clock whose timers never fire)", o.RetentionCheck)
	case o.ScheduleCheck < 0:
		return invalidArg("Options.ScheduleCheck %v is negative (a store that reaches occurrences only when it takes requests runs on a Clock whose timers never fire)", o.ScheduleCheck)
	}
	switch {
	case o.Clock != nil:
		o.Now = o.Clock.Now
	case o.Now != nil:
		o.Clock = systemClock{now: o.Now}
	default:
		o.Now = time.Now
		o.Clock = systemClock{now: time.Now}
	}
	if o.RetentionCheck == 0 {
		o.RetentionCheck = time.Second
	}
	if o.ScheduleCheck == 0 {
		o.ScheduleCheck = time.Second
	}
	return nil
}

// The store's time.
//
// The store stamps every batch of commands with now = max(latest stamped
// time, clock) (stamp, in store.go), and recovery starts from the latest
// time in the state, so the store's time never goes backwards, across
// restarts too. Due times, lease expiries and retry delays are all decided
// in that time. When the clock reads earlier than the store's time (it was
// stepped back, or it had jumped ahead, a command was stamped then, and the
// jump was corrected), the store's time stands still until the clock
// catches up; the store counts those stamps in Stats and logs a warning.
//
// Anything outside the store that decides whether a time has come (a
// workflow's Sleep, a retry's wait) MUST decide it with Now, not with a
// clock of its own: see Now.

// Now returns the store's time: the clock (Options.Now or Options.Clock),
// but never earlier than the time of the latest applied command (Stats.Now).
// It writes nothing.
//
// Decide whether a wake's time has come with Now. ClaimDue finds a wake due
// when its time is at or before the claim's time, and from the moment a
// claim returns a lease, Now is at or after the claim's time, so a delivery
// sees as reached every wake that made it due. A clock of the worker's own
// may read earlier than the store's time (after the store's clock jumped
// ahead and back, or on another machine): a rerun that decided with it would
// find the wake not yet due, request it again and suspend, and the store,
// finding it due, would deliver it again at once, in a loop until the clocks
// agreed.
func (s *Store) Now() time.Time {
	s.rw.RLock()
	last := s.state.Meta().Now
	s.rw.RUnlock()
	clock, ok := nanosFromTime(s.opts.Now())
	if !ok || clock < last {
		clock = last
	}
	return timeFromNanos(clock)
}

// clockWarnInterval is the least time, in the clock's readings, between two
// warnings about a clock behind the store's time.
const clockWarnInterval = time.Minute

// clockWatch counts and reports the stamps the clock would have put before
// the store's time.
type clockWatch struct {
	heldBack  atomic.Uint64 // stamps held back since Open
	behindMax atomic.Int64  // the largest gap seen since Open, in nanoseconds
	behind    atomic.Int64  // the gap at the latest stamp, in nanoseconds; 0 if none

	// Writer-owned.
	warned       bool
	warnedAt     int64 // the clock's reading at the latest warning
	episode      uint64
	episodeMaxNs int64
}

// watchClock compares the clock's reading with the store's time last before
// a stamp, counting and reporting a reading behind it. Writer goroutine only.
func (s *Store) watchClock(clock int64, ok bool, last int64) {
	w := &s.clock
	if !ok || clock >= last {
		if w.episode > 0 {
			s.logger.Info("execstore: the clock has caught up with the store's time",
				"held_back", w.episode, "max_behind", time.Duration(w.episodeMaxNs))
			w.episode, w.episodeMaxNs = 0, 0
			w.behind.Store(0)
		}
		return
	}
	gap := last - clock
	w.heldBack.Add(1)
	w.behind.Store(gap)
	if gap > w.behindMax.Load() {
		w.behindMax.Store(gap)
	}
	w.episode++
	w.episodeMaxNs = max(w.episodeMaxNs, gap)
	if w.warned && clock-w.warnedAt < int64(clockWarnInterval) && w.warnedAt-clock < int64(clockWarnInterval) {
		return
	}
	w.warned, w.warnedAt = true, clock
	s.logger.Warn("execstore: the clock reads earlier than the store's time (it was stepped back, or an earlier jump ahead was corrected); "+
		"commands are stamped with the store's time, which stands still until the clock catches up",
		"behind", time.Duration(gap), "clock", timeFromNanos(clock), "store_time", timeFromNanos(last),
		"held_back_since_open", w.heldBack.Load())
}
