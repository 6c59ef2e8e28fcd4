// Package tune holds sizes of internal structures that the crash simulator
// makes small, so that its small states reach the code paths a large state
// reaches: a structure that only compacts itself past a few hundred entries
// would never compact within a simulated run.
//
// Production code never changes them: the package is internal to the
// module, and the simulator sets them once, before it opens any store. They
// change no result, no encoding and no replay, only how a structure is cut
// into pieces; the simulator's trace is the same with either size.
package tune

// FeedChunk is the most entries a chunk of the state machine's change log
// holds (fsm/feed.go).
var FeedChunk = 256

// FeedSweep: the change log is swept when it holds more than FeedSweep
// times as many entries as there are records, plus a quarter chunk.
var FeedSweep = 2
