// Package dispatchertest provides a manual clock for deterministic tests of
// stores, dispatchers, workflows and anything else that takes an
// execstore.Clock (which dispatcher.Clock is).
//
// Time moves only when the test calls Advance or Set, and each move fires,
// before it returns, exactly the timers whose deadlines it reached. Give the
// same clock to execstore.Options.Clock and dispatcher.Options.Clock so that
// the store, the dispatcher and the workflows agree on the time, and the
// store's own timers (a schedule's next occurrence, the retention check)
// fire when the clock is moved past them: then "wait ten minutes" is one
// Advance, and no test waits on a wall clock.
package dispatchertest
