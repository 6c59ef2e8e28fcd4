// Package lockstep drives a store, for tests, with the load the writer's
// wait for its callers (execstore.Options.GroupWait) is for: callers that
// each wait for their answer before they send the next command. Without the
// wait such callers split into groups that take turns, each fsync carrying
// part of them; tests of the wait, of its counters in the metrics and of
// the HTTP stats use this load, so they all exercise the same behaviour.
package lockstep
