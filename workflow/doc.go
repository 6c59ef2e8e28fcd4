// Package workflow is the Go programming model on top of execstore: workflows
// are ordinary Go functions, registered by ID, that reach durable state only
// through a handful of operations on an *Execution.
//
//	workflow.Register(worker, "charge-order", func(x *workflow.Execution, p Params) (Receipt, error) {
//		if err := x.Sleep("wait", 10*time.Minute); err != nil {
//			return Receipt{}, err
//		}
//		order, err := workflow.Run(x, "load", func(ctx context.Context) (Order, error) { return shop.Load(ctx, p.Order) })
//		if err != nil {
//			return Receipt{}, err
//		}
//		return workflow.Run(x, "charge", func(ctx context.Context) (Receipt, error) { return shop.Charge(ctx, x.ID()+"/charge", order) })
//	})
//
// # Queues
//
// An execution is claimed from its workflow's own queue unless it was
// admitted to a named one (execstore.AdmitRequest.Queue,
// TriggerRequest.Queue). Worker.Queues names the queues of the workflows a
// worker registered and Options.Queues; a dispatcher given them
// (dispatcher.Options.Queues) claims only what the worker can run, so
// workers that registered different workflows share a store without ever
// leasing each other's executions. A child started by Start is in its own
// workflow's queue; StartIn names another.
//
// # Reruns
//
// A Worker is a dispatcher.Invoker. Each delivery of an execution runs its
// workflow function from the top. Every operation is named by a key, unique
// within the workflow, and saves what it did as a step of the execution
// (execstore.Store.SaveStep) under the delivery's lease: Run saves its step
// function's result (or failure), Sleep its wake time, WaitForKey the value
// it waited for, Start records its child with the store. A rerun finds those
// steps and returns what they saved without doing the work again, so the
// function replays to the point where the previous run stopped and carries
// on. The function must therefore take the same path through its operations
// on every run: its decisions may depend on params, on what operations
// return, and on nothing else that could change between runs (the clock,
// randomness, maps' iteration order, the outside world) unless it comes
// through a step. Because every save is fenced by the lease token, a worker
// that lost its lease (it stalled, and another took over) cannot save a
// step: its operation ends the run instead, and the dispatcher records
// nothing for it.
//
// # Suspension
//
// An operation that must wait (Sleep before its wake time, Await before the
// child ends, WaitForKey before the key is written, a step waiting to retry)
// first arranges to be woken: it requests a wake at the time, or relies on
// the store, which wakes a parent when its child ends and a watcher when a
// commit writes its key. Then it suspends the run: it returns an error that
// matches ErrSuspended, and the workflow function MUST return that error,
// wrapped or not, the way it returns any other error:
//
//	if err := x.Sleep("wait", 10*time.Minute); err != nil {
//		return Receipt{}, err
//	}
//
// The worker then acknowledges the delivery as suspended, and the execution
// is delivered again when the wake falls due.
//
// Suspension is an error, not a panic or a blocked goroutine, because Go
// programmers already propagate errors on every path, and because a panic
// would be swallowed by any recover on the way and would crash the process
// if an operation ran on another goroutine. It is made hard to misuse in
// three ways. First, the suspension is sticky: once an operation suspended,
// every later operation of the run returns the same suspension without doing
// anything, so a function that ignores it cannot run more steps. Second, the
// worker checks what the function returned: a run that suspended but whose
// function returned a result, or an error that does not match ErrSuspended,
// fails the execution with CodeSuspensionSwallowed, because that result was
// computed without what the operation waited for and must never be recorded
// as the outcome. A function that returns ErrSuspended when none of its
// operations suspended fails the same way (nothing would ever wake it).
// Third, operations panic on misuse that no rerun could fix (an empty or
// reserved key, a key used twice in one run, an operation called inside a
// step function), so the mistake fails the execution with a message at once.
//
// # Time
//
// Every time an operation computes or compares (Sleep's wake time, a retry's,
// Poll's) is the store's time, execstore.Store.Now: the store's clock, never
// earlier than the latest time the store stamped on a command. The store
// decides with the same time when a wake is due, so a rerun it delivered
// because a wake fell due finds that wake reached and goes on; it never asks
// for the same wake again and suspends. With a clock of the worker's own, one
// reading behind the store's time (as after the store's clock jumped ahead
// and back) would make the store deliver, and the rerun suspend, again and
// again until the clocks agreed. So the worker has no clock: set the clock
// with execstore.Options.Now or Options.Clock. While the clock reads behind the store's time,
// the store's time stands still, and wakes wait for it (execstore.Stats
// counts those stamps, and the store logs a warning).
//
// # Failures
//
// A panic in workflow code becomes a failed outcome whose error is a
// PanicError with the panic value (its stack goes to the log). An error
// returned by the workflow function becomes a failed outcome, recorded with
// its name, message, code and causes. An error from a step function fails
// the step: the error is saved, and Run returns it on this run and every
// rerun as the *execstore.WorkflowError it is recorded as, so that both runs
// take the same path. Read back from a record (Result, the ChildError of
// Await, a failed step on a rerun), a recorded error matches with errors.Is
// every error that has its code, and execstore.ErrorCode returns the code,
// as they did for the error that was recorded. A RetryableError from a step function retries the step
// up to its attempts, suspending between attempts. Errors that are not the
// workflow's doing (a lost lease, a store that is closed or failed, a
// workflow ID nobody registered) are not outcomes: the worker returns them
// to the dispatcher, which records nothing, and the execution runs again.
//
// # Clients
//
// A Client triggers executions (Trigger: the ID once admitted, or
// execstore.ErrExecutionIDConflict for an ID ever used) and waits for their
// outcomes on the durable record (TriggerAndWait, Wait), so a waiter can
// pick up after a restart.
package workflow
