package execstore

import (
	"sync/atomic"
	"time"
)

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

// Now returns the store's time: the clock (Options.Now), but never earlier
// than the time of the latest applied command (Stats.Now). It writes
// nothing.
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
