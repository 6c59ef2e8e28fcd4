// Package untimed provides a clock whose timers never fire.
//
// A store on it makes its own commands (retirement, the schedules'
// occurrences) only in the rounds that take requests, before their batch:
// what it does then depends on its requests and their times alone, never on
// when a timer happened to fire. The crash simulator runs its stores so,
// replaying a seed byte for byte while its clock moves by ticks and leaps;
// tests that decide when an occurrence or a retirement is reached (at their
// next write) do too; and execstore inspect opens its copy of a store so,
// so that the copy does nothing of its own while it is being read.
//
// It is internal: a user's test that wants the store's timers under its
// control moves a manual clock (dispatchertest.Clock), whose timers fire
// when it is moved past them.
package untimed

import (
	"time"

	"github.com/execstore/execstore"
)

// Clock returns a clock that reads now and whose timers never fire.
func Clock(now func() time.Time) execstore.Clock { return clock{now: now} }

type clock struct{ now func() time.Time }

func (c clock) Now() time.Time { return c.now() }

func (clock) TimerAt(time.Time) execstore.Timer { return never{} }

// never is a timer that never fires: its channel is nil, on which a receive
// waits forever.
type never struct{}

func (never) C() <-chan time.Time { return nil }
func (never) Stop() bool          { return true }
