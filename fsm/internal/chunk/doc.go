// Package chunk holds the chunks of the state machine's listing indexes
// (package fsm): the admission table (Table, a list of Slots), the postings
// lists of workflows and parents (Postings, a list of Runs) and the change
// log's chunks (Feed, of Entry).
//
// A state and its copies (fsm.State.Copy) share these chunks until one of
// them writes: a state may write a chunk in place only when no copy can see
// it, that is when the chunk carries the state's generation (it was made
// since the state's latest copy), and must otherwise write a copy of it.
// That rule is this package's, as the record's is package record's: every
// field is unexported and read through methods that inline, and every write
// takes the writer's generation and either returns the writable chunk (the
// chunk itself when it carries that generation, else a copy that does:
// Table.Writable, Postings.Own, Feed.Own) or refuses, by panicking, a chunk
// of another generation (Slots.Put, Postings.Add, Postings.Remove,
// Postings.CountRecord, Feed.Append). A state that skipped the check would
// not compile: nothing outside this package can reach a chunk's fields.
//
// What the type cannot check is that a writer passes its own generation:
// the fsm package passes State.gen everywhere, and the invariants build
// (go test -tags invariants) fingerprints every copy and panics when one
// changed while it was shared, which is what passing a stale generation
// would do.
//
// The layouts are those the chunks had inside package fsm: a Slots is two
// arrays of 256 slots, its counts and its generation, and is copied whole; a
// Run's and a Feed's arrays are shared with their copies, since they are
// only appended to (a copy's slice never reaches past its own length) and
// a rewrite makes a new array.
package chunk
