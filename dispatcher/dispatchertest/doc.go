// Package dispatchertest provides a manual clock for deterministic tests of
// dispatchers, workflows and anything else that takes a dispatcher.Clock.
//
// Time moves only when the test calls Advance or Set, and each move fires,
// before it returns, exactly the timers whose deadlines it reached. Give the
// same clock's Now to execstore.Options.Now so that the store, the dispatcher
// and the workflows agree on the time: then "wait ten minutes" is one
// Advance, and no test waits on a wall clock.
package dispatchertest
