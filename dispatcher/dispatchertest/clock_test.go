package dispatchertest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/execstore/execstore/dispatcher/dispatchertest"
)

var t0 = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

func fired(c <-chan time.Time) (time.Time, bool) {
	select {
	case at := <-c:
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestATimerFiresOnceTheClockReachesItsDeadline(t *testing.T) {
	tests := []struct {
		name     string
		deadline time.Duration // after t0
		moves    []time.Duration
		want     bool
	}{
		{"a deadline in the past fires at once", -time.Second, nil, true},
		{"a deadline now fires at once", 0, nil, true},
		{"not before the deadline", time.Minute, []time.Duration{time.Minute - 1}, false},
		{"exactly at the deadline", time.Minute, []time.Duration{time.Minute}, true},
		{"past the deadline in steps", time.Minute, []time.Duration{30 * time.Second, 45 * time.Second}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dispatchertest.NewClock(t0)
			timer := c.TimerAt(t0.Add(tt.deadline))
			for _, d := range tt.moves {
				c.Advance(d)
			}
			at, ok := fired(timer.C())
			if ok != tt.want {
				t.Fatalf("fired = %v, want %v", ok, tt.want)
			}
			if ok && !at.Equal(c.Now()) {
				t.Fatalf("fired with %v, want the clock's time %v", at, c.Now())
			}
			if _, again := fired(timer.C()); again {
				t.Fatal("fired twice")
			}
		})
	}
}

func TestAStoppedTimerNeverFires(t *testing.T) {
	c := dispatchertest.NewClock(t0)
	timer := c.TimerAt(t0.Add(time.Minute))
	if !timer.Stop() || c.Timers() != 0 {
		t.Fatalf("Stop did not stop a pending timer (%d pending)", c.Timers())
	}
	c.Advance(time.Hour)
	if _, ok := fired(timer.C()); ok || timer.Stop() {
		t.Fatal("a stopped timer fired or stopped twice")
	}
}

func TestSettingTheClockBackFiresNothing(t *testing.T) {
	c := dispatchertest.NewClock(t0)
	timer := c.TimerAt(t0.Add(time.Minute))
	c.Set(t0.Add(-time.Hour))
	if _, ok := fired(timer.C()); ok || c.Timers() != 1 {
		t.Fatal("moving back fired the timer")
	}
	c.Set(t0.Add(time.Minute))
	if _, ok := fired(timer.C()); !ok {
		t.Fatal("the timer did not fire at its deadline")
	}
}

// Time moves only when told, and each move fires the timers it reaches.
func ExampleClock() {
	clock := dispatchertest.NewClock(time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC))
	wake := clock.TimerAt(clock.Now().Add(10 * time.Minute))
	clock.Advance(9 * time.Minute)
	fmt.Println("pending timers:", clock.Timers())
	clock.Advance(time.Minute)
	fmt.Println("fired at", (<-wake.C()).Format(time.TimeOnly))
	// Output:
	// pending timers: 1
	// fired at 12:10:00
}
