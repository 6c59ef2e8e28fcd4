// Package execstore is an embeddable, durable execution-record engine.
//
// Workflow runtimes use it to admit each execution once (a repeated trigger
// gets ErrExecutionIDConflict, not a second run), merge any number of wakes
// into one due time, hand each due execution to exactly one worker under a
// fenced lease, save step results so a rerun skips finished work, and keep
// every outcome forever immutable.
//
// # Design
//
// A Store is a deterministic state machine (package fsm) in memory, behind a
// write-ahead log (package wal, on github.com/tidwall/wal). Every command is
// validated in the caller's goroutine, then handed to one writer goroutine
// that stamps it with the store's time, writes it to the log with the other
// commands queued at the same moment (one write, one fsync: group commit),
// applies it, and answers. Each command gets its own result: a conflict, an
// invalid input or a lost lease in a batch is that command's answer alone.
// Commands that would change nothing (a duplicate admission, a claim that
// finds nothing due, a wake that merges into an earlier one, a stale lease)
// are answered from the applied state without being logged.
//
// Opening a store replays the log through the same Apply, so the state after
// a crash is exactly the state of the commands that reached the disk. A
// write that returned nil (without Options.NoSync) survives any crash after
// it returned; an unacknowledged one is whole or absent. After a failed write
// or fsync the store refuses every write (ErrStorageFailed) until reopened.
//
// Every file of the store's directory (the log's segments, the snapshots,
// the lock) is created, written, synced, renamed and removed through one
// filesystem, Options.FS (package vfs), the operating system's unless told
// otherwise. It is the store's one seam to its storage: tests and the crash
// simulator wrap it with vfs.WithFaults to see each of those operations and
// to fail any of them.
//
// # Executions
//
// An execution's record holds its event (workflow ID, params byte for byte,
// context), its status (admitted, suspended, completed, failed), its outcome
// once terminal, its pending wake (DueAt) and its current lease. Wakes name
// an execution and a time; they never copy the event. A claim covers every
// wake pending at that moment; a wake requested during a delivery is kept for
// after it. Lease tokens start at 1 and only grow, across restarts too, so a
// stale worker's writes (SaveStep, Start, Acknowledge, Renew, Release) are
// refused with ErrLeaseLost.
//
// # Schedules
//
// A Schedule (an interval, or a cron expression at a fixed offset from UTC)
// admits an execution for each of its occurrences, under the ID
// ScheduleOccurrenceID gives, so each occurrence is admitted at most once
// ever, and a caller who admits that ID first wins. The writer reaches the
// occurrences that have come before each batch and on a timer of its own;
// those reached late after downtime are admitted as the schedule's CatchUp
// policy says.
//
// # Time
//
// The store's time and the timers its writer waits on (the next schedule
// occurrence's, the retention check's) come from one Clock: Now, and
// TimerAt, a timer set for an instant rather than a duration. Options.Clock
// sets it; nil means the system clock, reading Options.Now when that is set
// (set one of the two, not both). The dispatcher takes the same interface,
// so one manual clock (package dispatcher/dispatchertest) drives a store and
// its dispatchers, and moving it fires exactly the timers it passes. The
// store never lets its time go backwards: each command is stamped with the
// later of the clock and the latest stamp (see Store.Now).
//
// Limits on every size and count are in one place, Limits.
package execstore
