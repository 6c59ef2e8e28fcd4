// Package dispatcher delivers due executions from an execstore.Store to an
// Invoker, one lease at a time. It is the only component that runs
// executions: triggers and wakes only make an execution due, and the
// dispatcher decides when and where it runs.
//
// # The rules
//
// They are those of @yieldstar/core 0.6.0's ExecutionDispatcher, in Go terms.
//
//   - Up to Options.Concurrency deliveries run at once. The claiming loop
//     asks the store for at most the free slots, so a claim never reserves
//     more than are free. A delivery that ends frees its slot and wakes the
//     loop, which claims again at once rather than at the next poll; on a
//     store that acknowledges and claims in one call (AckClaimer), a
//     delivery's acknowledgement first claims the next due execution for its
//     own slot, which passes to that execution without being freed, and the
//     loop claims only when that found nothing.
//   - With Options.Queues, every claim serves those queues alone
//     (execstore.ClaimRequest.Queues), and an idle dispatcher waits for their
//     next due time (NextDueIn), not the store's: work due in a queue it does
//     not serve neither reaches it nor makes it claim in a loop. Without
//     them it serves every queue.
//   - The acknowledgements of deliveries that end while one is being written
//     are written together in the next call, with one claim for all their
//     slots: a busy dispatcher writes (and fsyncs) once per round of
//     deliveries, not once per acknowledgement and again per claim. Each
//     still gets its own answer; acknowledgements too large for one call
//     together (execstore.Limits.AcknowledgeBatchBytes) are written one by
//     one. A delivery goroutine serves delivery after delivery, so that its
//     stack is grown once, not at every claim.
//   - Each delivery reads its execution's record and passes the event it
//     holds (workflow ID, params, context) to the Invoker, never anything
//     from the wake that made it due. A claimed execution that is already
//     terminal is not invoked, and its outcome is not published again.
//   - While the invoker runs, the lease is renewed every RenewInterval. A
//     renewal that fails with any error but execstore.ErrLeaseLost is logged
//     and retried at the next interval: a lease stays current, even after it
//     expires, until another claim supersedes it. A renewal that finds the
//     lease lost stops renewing and cancels the delivery's context with
//     execstore.ErrLeaseLost as its cause; the dispatcher then neither
//     acknowledges nor releases, because another worker owns the execution.
//   - A delivery that has not returned AbortGracePeriod after that cancel is
//     abandoned: its slot is freed, and whatever it returns later is logged
//     and ignored. It may still be running code, but every write it attempts
//     is fenced out by its stale lease token.
//   - An outcome the invoker returns is acknowledged, and a terminal one is
//     published (Options.OnOutcome) if the acknowledgement recorded it
//     (execstore.AckResult.Applied). A delivery whose lease was taken over
//     without its knowing, and whose execution the new holder ended, gets
//     the recorded outcome back, not applied, and publishes nothing: every
//     terminal outcome a dispatcher records is published once, by the
//     delivery that recorded it. (Once at most if the acknowledgement's
//     answer is lost to a storage failure.)
//   - An error is not an outcome: the record keeps its status and its wakes
//     stay pending. ErrWorkerExited (the
//     worker died, perhaps in the middle of a write) leaves the lease to
//     expire, so no new holder starts while the dead worker's last writes
//     may still land; any other error releases the lease with a retry delay
//     that doubles with each attempt up to a cap.
//   - If reading the record, acknowledging or releasing fails, the lease is
//     left to expire. Expiry is always safe (it counts as an unacknowledged
//     delivery), and the store that just failed may not take a release.
//
// # Waiting for work without polling
//
// An idle dispatcher does not poll the store. Before each claim it takes the
// store's DueChanged channel, which the store closes the next time a command
// may have made an execution due (an admission, a wake, a release, a child
// start or outcome, a commit that fires a watch). If the claim leaves slots
// free, the dispatcher sleeps until that channel closes or the clock reaches
// the store's next due time (Stats.NextDue: the earliest pending wake or
// lease expiry), whichever comes first. Taking the channel BEFORE claiming
// is what makes this safe: anything that becomes due after the claim looked
// closes the channel the dispatcher is about to wait on. An admission is
// therefore delivered within microseconds, and a sleeping workflow exactly
// when its wake falls due. Options.PollInterval is only a fallback, which
// also paces retries after a failed claim.
//
// # Time
//
// Every timer comes from Options.Clock, and every deadline is computed from
// a time recorded before anyone can observe the event that set it:
// renewals fall on a grid that starts at the claim, the abort grace period
// counts from the moment the loss was seen, the poll from before the claim.
// With a manual clock (package dispatchertest) a test therefore fires exactly
// the timers it passes, whatever the goroutines' interleaving, and no test
// waits on a wall clock.
package dispatcher
