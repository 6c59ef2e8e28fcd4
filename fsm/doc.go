// Package fsm is execstore's state machine: every execution record and the
// indexes over them, the saved steps, the child-start requests, the key-value
// store and its watches, and the one function that changes them, Apply.
//
// # Why it is pure
//
// The Store logs each command BEFORE applying it and, after a crash, replays
// the log through the same Apply. That only works if Apply is deterministic:
// the same commands applied to the same state must give the same state and
// the same results, byte for byte. So this package never reads a clock, never
// draws randomness, never starts a goroutine, never logs, never touches the
// file system, and never lets the iteration order of a Go map show. Time
// arrives as Command.Now, generated IDs as Command.ExecutionID and
// Command.ChildID, schedules' occurrence times in their commands (the writer
// computes them with a calendar this package does not import; see
// schedule.go), and lease tokens come from per-execution counters in the
// state. A test fails if the package imports anything impure.
//
// # Layout
//
// Records live in the admission table's slots (list.go: chunks of 256 by
// admission number, copied a chunk at a time after a copy of the state), and
// a tidwall/btree keyed by execution ID maps each ID to its admission number.
// State.Copy is O(1) and yields a consistent point-in-time state (the trees
// and chunks are copy-on-write, and a record a copy can see is replaced in
// its slot, never changed) that a snapshot writer can encode while Apply
// continues. The record (internal/record) and the chunks of the listing
// indexes (internal/chunk) are types that check the writer's generation on
// every write, so a write that skipped copy-on-write does not compile. When the writer is done with a copy it hands it back
// (State.Release); once no copy is outstanding, every record is changed in
// place again, so a record is replaced at most once per copy it was shared
// with, and only while that copy is in use. Replacing a record writes its slot only: the ID tree changes at
// admissions and retirements. The applying goroutine's lookups try the item
// after the previous one before they search, so the executions of one
// acknowledge-batch, mostly neighbours, are found in O(1) each. Fields that
// point to data (params, context, outcome, parent) point to values that are
// never changed after they are recorded.
//
//	execs    ID                  → admission number (→ Execution)
//	due      (DueAt, ID)         every execution with a pending wake and no current lease
//	leases   (lease expiry, ID)  every execution with a current lease
//	steps    (ID, step key)      → value
//	starts   (caller, step key)  → child ID, workflow ID, SHA-256 of canonical params
//	kv       key                 → value
//	watches  watch ID            → execution, keys
//	wkeys    (key, watch ID)     the watches a commit to key fires
//	wexecs   (ID, watch ID)      the watches dropped when an execution ends
//	schedules ID                 → Schedule (definition, next and latest occurrence)
//	schedDue (next occurrence, ID) every schedule with an occurrence left
//
// An execution's claimableAt is its lease expiry while a lease is current (so
// an expired lease makes it due again: redelivery) and otherwise its earliest
// pending wake. A claim takes the earliest entries of the two claimable
// indexes together, in (claimableAt, ID) order. They are kept apart because
// leases come and go at the rate of deliveries: in their own small index,
// the acknowledgement's removal costs little however many executions wait
// for a wake. A terminal execution is in no index.
//
// # Wakes and leases
//
// An execution has two pending-wake times. DueAt is the earliest wake not
// covered by the current lease; CoveredAt is the earliest wake the current
// lease covers. A claim moves everything pending into CoveredAt and issues the
// next token. Acknowledging clears CoveredAt, so a wake requested during a
// delivery survives it; releasing, or a later claim after the lease expired,
// keeps it pending. Tokens only grow: LastToken is kept for the life of the
// record, so a token is never issued twice, across restarts too.
//
// # Cancellation and bounded attempts
//
// A cancel command ends an execution and, depth first, every non-terminal
// execution it started (found through the child-start records), each before
// its children, all with one shared outcome. An admission may bound the
// deliveries in a row that end without an outcome (MaxAttempts; Tries counts
// them, and a suspended acknowledgement resets it). Having no clock, the
// state machine judges an expired lease only in a command that carries a
// time: the claim that would supersede the last allowed attempt's lease
// fails the execution instead, and a release of that lease fails it at once.
//
// # Queues and flow control
//
// Every execution is claimed from one queue (queues.go), its workflow's own
// unless its admission named another, and each queue has its own pair of
// claimable indexes: a claim of one queue scans one prefix, a claim of
// several merges theirs in (time, ID) order, as one index would give. A
// queue's settings (queue_settings.go, rate.go) bound what a claim takes:
// a concurrency limit counts its current leases, a rate limit the times of
// the leases it granted within its period, a pause gives nothing. They are
// decided in the claim command from the state alone, so they are exact on
// replay and on every replica, and NextDue reports when a held-back queue
// can give again (a rate's release time) or leaves it out until a command
// frees room (a lease that ends, a put or delete of settings).
//
// # Precheck
//
// State.Precheck runs a command through the same code as Apply without
// changing anything and says whether it would change the state. The Store
// answers the commands that would not (a duplicate admission, an idle claim,
// a wake that merges into an earlier one, a lost lease) without logging them.
package fsm
