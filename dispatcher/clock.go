package dispatcher

import (
	"time"

	"github.com/execstore/execstore"
)

// Clock is the dispatcher's source of time and timers: the store's own
// interface (execstore.Clock), so that one clock (a manual one in a test,
// package dispatchertest) drives a store and its dispatchers.
//
// Timers are set for an instant, not a duration, so that a deadline computed
// from a recorded time (a lease's claim, the moment a lease was lost) does not
// shift if the clock moves between reading it and setting the timer. A
// manual clock in a test therefore fires exactly the timers whose deadlines
// it passed, whatever the goroutines' interleaving.
type Clock = execstore.Clock

// Timer is a one-shot timer made by a Clock (execstore.Timer).
type Timer = execstore.Timer

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
