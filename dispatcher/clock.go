package dispatcher

import "time"

// Clock is the dispatcher's source of time and timers.
//
// Timers are set for an instant, not a duration, so that a deadline computed
// from a recorded time (a lease's claim, the moment a lease was lost) does not
// shift if the clock moves between reading it and setting the timer. A
// manual clock in a test therefore fires exactly the timers whose deadlines
// it passed, whatever the goroutines' interleaving.
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

// SystemClock returns the clock of the operating system (time.Now and
// time.Timer).
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) TimerAt(deadline time.Time) Timer {
	return systemTimer{time.NewTimer(time.Until(deadline))}
}

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
