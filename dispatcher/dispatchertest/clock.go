package dispatchertest

import (
	"sync"
	"time"

	"github.com/execstore/execstore/dispatcher"
)

// Clock is a manual execstore.Clock (and so dispatcher.Clock). It is safe
// for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*timer]struct{}
}

// NewClock returns a clock that reads start until it is moved.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, timers: make(map[*timer]struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires every timer it reached.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.fireLocked()
	c.mu.Unlock()
}

// Set moves the clock to t (backwards too, which fires nothing) and fires
// every timer it reached.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.fireLocked()
	c.mu.Unlock()
}

// Timers returns the number of timers set and not yet fired or stopped.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// TimerAt returns a timer that fires once the clock reads deadline or later;
// at once if it already does.
func (c *Clock) TimerAt(deadline time.Time) dispatcher.Timer {
	t := &timer{c: c, deadline: deadline, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !deadline.After(c.now) {
		t.ch <- c.now
		return t
	}
	c.timers[t] = struct{}{}
	return t
}

func (c *Clock) fireLocked() {
	for t := range c.timers {
		if !t.deadline.After(c.now) {
			delete(c.timers, t)
			t.ch <- c.now // capacity 1, sent at most once
		}
	}
}

type timer struct {
	c        *Clock
	deadline time.Time
	ch       chan time.Time
}

// C returns the channel the timer fires on.
func (t *timer) C() <-chan time.Time { return t.ch }

// Stop stops the timer; it reports whether the timer was still pending.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, pending := t.c.timers[t]
	delete(t.c.timers, t)
	return pending
}
