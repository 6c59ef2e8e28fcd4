// Package sim is execstore's deterministic crash simulator. It runs seeded
// workloads against real stores on real files, crashes them at every step of
// writing, recovering and snapshotting, derives from the files the disk
// images an operating-system crash could leave, reopens them, and checks
// every guarantee of the public contract against a reference model. Every
// failure reproduces from its seed, and the simulator is proven able to fail:
// each deliberate bug in internal/mutant is caught within a bounded number of
// seeds.
//
// # One seed drives everything
//
// A seed seeds a PCG generator that chooses every operation, argument, clock
// move, crash point and crash image. The store's clock is injected and moves
// only when the workload moves it (forward by a tick, by a leap that expires
// leases, or back, as a clock correction would). The same seed gives the same
// run, byte for byte; its trace (one line per operation, crash and recovery)
// is hashed, and a run's summary line carries the hash over all its seeds:
//
//	sim: 2000 seeds, 2000000 ops, 17000 crashes, 0 violations, trace 3f2c...
//
// Two sources of randomness inside the store are kept out of the results.
// Generated execution IDs are a millisecond timestamp and random bits, and
// claims order ties by ID: the simulator gives every operation that generates
// an ID a millisecond of its own, so IDs sort by creation, and the trace names
// them g1, g2, ... in order of appearance. The random bits are written to the
// log, where a crash image's stale or garbage tail could repeat them by chance
// and keep an unacknowledged entry whole in some runs only: the simulator
// draws them from the seed (Options.IDRand). A torn tail's side file is named
// after the wall clock: the trace leaves that part of the name out.
//
// # The workload
//
// Admissions with and without IDs (a small pool of IDs, so duplicates are
// common), with and without an attempt bound, and invalid ones (IDs,
// workflow IDs, params, contexts and bounds drawn from catalogs whose
// entries say whether API.md accepts them); wakes in the past,
// present and future, before the epoch and past the representable range, for
// known, unknown and terminal executions; claims of various limits and lease
// durations; renewals, releases and acknowledgements (suspended, completed,
// completed with an unstorable result, failed with a chain of causes,
// invalid) with current, stale, superseded and made-up leases, alone and in
// AcknowledgeBatch (one batch, one fsync), where a quarter of the batches
// repeat the latest acknowledgement, lease and outcome, as a worker that lost
// its answer does, and the model says which answers are replays; releases with and without the
// error that ended the delivery, so that leases of a last allowed attempt
// expire and are released; cancellations of running, terminal and unknown
// executions, and of parents whose children are running, with reasons in
// and over the limit; step saves and reads; child starts
// with repeats that match or mismatch; commits of sets and deletes; watches;
// reads, Get and Await; clock moves; snapshots; clean restarts; crashes;
// storage errors; bit rot in the log; and damage to the newest snapshot.
// After one operation in six, a listing (List, through every page, with
// random filters, orders and page sizes) or a read of the change feed
// (Changes, from near its head or the start), drawn from a generator of
// their own so that the rest of each seed's run is what it was without them.
// reads, Get and Await; schedules put (valid, invalid, past the limit,
// repeated, changed), deleted and read, whose occurrences the clock's ticks
// and leaps bring due, and whose occurrences' IDs a caller sometimes admits
// first; clock moves; snapshots; clean restarts; crashes; storage errors; bit
// rot in the log; and damage to the newest snapshot.
//
// The store runs on a clock whose timers never fire (Options.Clock,
// internal/untimed): its writer reaches the schedules' due occurrences
// before each batch of requests, never on a timer of its own, so a run
// depends on the seed alone. The model does the same
// when it stamps a write: it reaches every occurrence due at that time
// (admitted if on time or kept by the catch-up policy, under its occurrence
// ID unless a caller took it). An occurrence the clock passed before a crash
// is therefore reached at the first write after recovery, and must be
// admitted or skipped exactly as the policy says, once.
//
// # Retention
//
// One seed in four (chosen by a generator of its own) opens its stores with
// Options.Retention of 20 s, 90 s or 5 min, on that clock: the writer's
// retention check never fires and it retires, before each batch of
// requests, all that is due at the batch's time, so a run depends on the
// seed alone. The model does the same when it stamps a write, before it
// reaches the schedules' occurrences: every terminal execution last updated
// before the store's time less the retention keeps its ID, workflow, status,
// outcome, parent link, timestamps and attempts, and loses its params,
// context, steps, starts and attempt bound; it leaves the listings and the
// change feed (the feed's head stays), and Stats counts it among the
// executions, the terminal and the retired. Every comparison of records,
// steps, listings, the feed and the summary covers retired executions, after
// crashes, restarts and snapshots too, and a terminal record may change only
// by retirement. Now and then the clock moves to exactly where a terminal
// execution's retention ends, or a nanosecond past it, and a write that
// changes nothing and a read follow: the cutoff is exclusive.
//
// Half of those seeds open their stores with Options.Archive too: retired
// executions leave the state for an archive, kept in Pebble's in-memory
// filesystem that a crash image clones as a crash would leave it (what the
// archive synced, nothing more), and that follows the image to the
// directory it is recovered in. The model is the same but for
// Record.Archived: a store that archives must answer exactly as one that
// keeps its retired records, so such a seed's trace is the other's but for
// the offsets where snapshot damage is drawn (its snapshots are smaller).
//
// Half of the archiving seeds forget too (Options.ForgetAfter of three times
// their retention, drawn from a generator of their own). The model forgets
// when it stamps a write, after it retires, as the writer does: an archived
// execution last updated before the store's time less ForgetAfter leaves the
// model as if it had never been admitted, so its ID may be admitted again as
// a new execution (whose tokens start again, and whose first terminal record
// is the one kept from then on), a parent's start request names a child
// forgotten since, and neither a child's end nor a cancel reaches an
// execution that took a forgotten caller's or child's ID. The archive's
// files keep forgotten records until both kept snapshots hold the cutoff,
// through every crash image.
//
// # Batches of several commands
//
// The other steps make one call at a time, so the writer's batches hold one
// command each. A batch step holds the writer inside the log's write of a
// commit (its filesystem waits at the write), queues two to five operations
// one by one (each waits until Stats.Queued says it is queued, or it was
// refused before queueing), and releases the writer: it takes them as one
// batch, with acknowledgements of current leases merged into one entry,
// repeated acknowledgements and admissions deferred after it, claims, wakes
// and starts sharing it. The queue order comes from the seed, and so does the
// batch. The calls were concurrent, so the model accepts the first order of
// them (the queue order first) that gives the store's answers and records.
// Then a snapshot, a crash in one, a crash, or a clean restart may follow; now
// and then the store is reopened to take a snapshot on its own after the
// batch. New kinds of operation in a batch, and of what follows it, are
// entries in batchEntries and afterBatch.
//
// # The reference model
//
// model.go is API.md in plain maps and slices, written from the contract and
// not from the state machine: no btrees, no indexes, no precheck. After every
// operation the simulator compares the store's answer with the model's (result
// codes, IDs, leases, records), the records the operation touched, the
// store's Stats summary (executions, terminal, pending, next due) and the state
// machine's invariants (Store.CheckInvariants); every Config.CheckEvery
// operations and after every recovery, it compares the whole state: every
// record, every step and every key the workload uses, the whole change feed
// (each execution's latest change at the position the model numbered it,
// so a sequence that went back after a restart is caught) and listings.
// The model numbers the feed from the contract: every admission and every
// change of status takes the next position, in the order the store applies
// commands. The store answers
// commands that change nothing without logging them; the model treats every
// answered command as taking effect at once, which is exactly right for them.
// The model also says which operations the contract promises write nothing
// (model.nothing: refusals, unknown executions and schedules, IDs in use,
// stale leases, wakes that merge or find the execution terminal, claims that
// find nothing due, repeated step saves and child starts, watches of
// terminal executions, cancels of terminal executions, puts of the schedule
// stored, reads), and whether the stamp of an operation made the writer log
// commands of its own first (a retirement, an occurrence reached).
//
// # Crash images from the real files
//
// The store runs on real tidwall/wal files (on tmpfs when /dev/shm exists),
// through its filesystem seam (Options.FS): the operating system's, wrapped
// by vfs.WithFaults so that every operation on the store's files reaches the
// simulator before it happens, and every sync before and after. The
// simulator acts at its crash points (points.go): the steps of the log's and
// the snapshot package's durability protocol, which it tells apart among the
// operations (before the log changes its directory, before and after each
// fsync the log issues itself; before each file the snapshot package
// creates, renames or removes, before and after each of its fsyncs). The
// syncs among them let the durability tracker (disk.go) record what each
// file durably holds and which directory entries are durable. For the
// operations in between it relies on documented facts: tidwall fsyncs a
// segment before creating the next, and fsyncs the tail when it closes; the
// log's compaction renames segment files out of the log oldest first with a
// directory fsync after each; the log's rewrite of its last segment at Open
// fsyncs a temporary copy and renames it over the segment before a directory
// fsync; the log prepares the next segment's file (zeros, fsynced), in the
// writer right after the write that asks for it (as it does on any
// filesystem but the operating system's own, so that the files are the same
// on every run), and tidwall renames it to the segment's name and writes the
// entries over its zeros: a segment's durable bytes end where its entries
// end, whatever the file's size. The tracker treats the snapshot directory
// like the log's: a file's contents are durable after its own fsync, a new
// name, a rename and a removal only after the directory's; a failed fsync of
// the snapshot directory leaves the names it was to make durable at the
// mercy of every later crash. An injected storage error also
// stands for the kernel's answer to a failed fsync: the last segment's
// unsynced bytes stay readable but never reach the disk through a later fsync
// of that file (the tracker zeroes them in every later image) unless Open
// rewrites the segment into a new file.
//
// At a crash the tracker derives an image the OS could leave: every durable
// byte, and of the unsynced rest of the last segment any cut (at any byte, at
// 512-byte and 4 KiB boundaries), the rest replaced by zeros, garbage or stale
// bytes from elsewhere in the log, or sectors written back in any order;
// segment files created since the last directory fsync missing (as a prefix,
// as a journaling file system orders namespace operations); a segment removal
// whose directory fsync did not happen undone; a rename of the rewritten last
// segment whose directory fsync did not happen undone or not; any other
// removal whose directory fsync did not happen undone. Crashes: inside an
// operation at any crash point of its write (before the write, before or after
// the segment's fsync, before or after the directory's), with the filesystem
// taking the image and failing the operation so the store stops there; while
// idle; inside a snapshot, at any crash point of the snapshot package (the
// temporary file created, cut short or whole, synced, renamed or not, older
// ones pruned) or of the log's compaction (before each segment removal, before
// or after each directory fsync); after a batch of several commands (see
// below); during recovery itself, at any crash point of the torn-tail repair
// or of the rewrite of the last segment, repeatedly; and while reopening after
// a storage error, in the middle of the rewrite that makes the unsynced bytes
// durable. The crashed store is closed, not used again, and its directory
// removed; the run continues on the image in a new directory.
//
// With Config.StrictDirs, a directory created since its parent's last fsync
// may vanish too, as POSIX allows and journaling file systems do not do.
//
// # Invariants
//
// After every operation and every recovery:
//
//   - every acknowledged command survives, and an unacknowledged one is whole
//     or absent: the log's length after recovery says how many of the
//     unacknowledged commands of the interrupted batch survived (a prefix),
//     the model applies exactly those (reading generated IDs from the log),
//     and then the whole state must equal the model's, so a gap, a phantom
//     or a half-applied command is a violation;
//
//   - the state machine's invariants hold (fsm.State.CheckInvariants),
//     among them the bounds its structures are built to stay within: the
//     change log holds at most twice its sweep's trigger plus two chunks
//     (a sweep that stops moving keeps every change while every read stays
//     right), and no run of a listing index is more dead than live;
//
//   - replaying the recovered log a second time (a copy of the directory
//     opened as a second store) gives the identical state;
//
//   - a terminal record never changes, field for field;
//
//   - a stale lease never writes (the model says LEASE_LOST and the state is
//     compared), and a token handed out is never handed out again, across
//     restarts too;
//
//   - a request the contract promises writes nothing logs nothing: when the
//     model says so and the writer had nothing of its own to log at the
//     request's time, the store's log position (Stats.WALLastIndex,
//     WALBatches, AppliedIndex) is where it was before the request. It is
//     checked on the plain path only (nothing armed, no crash, no storage
//     error), where the answer is certain; a no-op logged anyway changes no
//     answer and no state, so only the log shows it;
//
//   - the store's time never goes backwards, across restarts too, and is
//     never earlier than a record's update;
//
//   - once faults stop (the liveness phase at the end of every seed), every
//     execution with a pending wake is delivered within a bound of claim
//     rounds, and nothing is left pending.
//
//   - after every open, the writer's indexes agree with the files: every
//     logged entry is applied (Stats.AppliedIndex), the snapshot it loaded
//     (Stats.SnapshotIndex) is the newest whole one the log continues, and
//     after every snapshot it covers every applied entry;
//
//   - the log is never truncated behind a snapshot a crash may lose: once it
//     no longer starts at its first entry, two snapshots whose names and
//     contents are durable continue it.
//
// Injected storage errors (at any crash point of a write) must fail the operation
// with ErrStorageFailed, never a silent success; afterwards every write is
// refused, the applied state is the model's, and after reopening the
// unacknowledged commands are whole or absent. Bit rot flips a bit of a
// durable log entry that a later batch proves was durable: the store must
// refuse to open rather than start with a changed command. A storage error
// in snapshot writing or pruning must fail the snapshot, and the store either
// goes on with nothing lost or fail-stops. Damage to the
// newest snapshot must lose nothing: a copy of the store with one bit of it
// flipped must open, on the older snapshot and the log after it, with the
// same state.
//
// # Linearizability
//
// CheckLinearizable runs concurrent clients against a real store (group
// commit batches their commands) and checks the history with porcupine,
// partitioned by execution ID; a claim is split into one operation per
// execution, which is exact because every claim asks for more executions
// than exist (and the clients set no attempt bound), and cancellations are
// of one execution each, as the clients start no children. The clock
// stands still while clients run and jumps between
// phases. The seed fixes each client's calls; the interleaving is the
// scheduler's.
//
// # Dispatchers
//
// CheckDispatch runs two dispatchers against a real store under one manual
// clock (the store's and the dispatchers' timers), with invokers that
// succeed, fail, return an error, panic, exit, hang past the abort grace
// period, or return as soon as they are cancelled, and renewals that fail so
// that a lease expires and another claim takes it over; the clock moves by
// ticks and by jumps past a lease. Every execution's terminal outcome must be
// published exactly once, as recorded: a delivery whose lease was taken over
// without its knowing acknowledges too and gets the recorded outcome back,
// not applied (DispatchReport.LateAcks counts them), and must not publish it.
// Some invokers outlive their lease (every renewal fails, and they return
// once another claim took the lease, so the acknowledgement is refused or
// finds the execution ended), some have their execution cancelled while
// they run, and some have their lease released just before they
// acknowledge: each a round whose acknowledgement fails while it claims the
// next execution for the slot. No delivery may acknowledge or release after
// its renewal found the lease lost, no slot may stay held after Stop, every
// execution must end, and every lease a dispatcher claimed must reach the
// invoker: a claimed lease that is never delivered leaves its execution
// leased for nothing and spends one of its attempts. A third of the seeds
// admit every execution with an attempt bound (1 to two more than the
// attempts planned to fail); one that fails for having exhausted it must
// have been invoked that many times, and is not published (no dispatcher
// ended it), nor is a cancelled one. The seed fixes each execution's
// behaviour per attempt and the clock's moves; the interleaving is the
// scheduler's, so it checks properties, not a trace.
//
// # Workflows
//
// CheckWorkflow does the same for the workflow package: two dispatchers
// whose invoker is a workflow.Worker, against a real store under one manual
// clock. Each parent execution's params are its plan, drawn from the seed:
// steps that succeed, take two seconds of the clock, fail, fail and are
// retried, or panic; sleeps shorter and longer than a lease; children that
// complete, fail, or wait (for a key nobody writes, or blocked in a step
// function) until the check cancels them; keys the check commits at a planned
// round. The workflow function takes its path from the plan and from what
// its operations return, so the plan alone fixes each execution's outcome
// (wfExpect computes it), and the trail a completed parent returns shows
// what every operation returned. Deliveries go wrong as planned per attempt:
// the invoker throws the worker's outcome away and exits, returns an error
// or panics; renewals fail until another claim takes the lease over, while
// the first step function of the delivery blocks until the loss is seen or
// hangs past the abort grace period; the clock jumps past a lease in the
// middle of slow steps.
//
// It checks: every execution ends with the outcome its plan determines; a
// step function never runs under a lease after that lease or an earlier one
// saved the step or its failure (a step's value and failure name the lease
// that saved them, and a delivery claimed after the save must have read it),
// while runs again before a save are allowed and counted; no step is saved
// under a lease after a renewal found it lost (the steps saved are listed at
// that moment; the store's fence must refuse every later save); no delivery
// acknowledges or releases after its renewal found the lease lost; each
// outcome a dispatcher records is published once, and a cancelled one never;
// Await returns the child's recorded outcome (ErrCancelled for a cancelled
// one); Sleep saves the store's time plus its duration, returns only once the
// store's time reached the wake, and never suspends again when it had;
// every execution ends within the rounds; no slot stays held after Stop;
// every lease a dispatcher claimed reaches the worker, but one whose
// execution the check cancelled first (as in CheckDispatch, whose invokers
// make the refused acknowledgements that show a dropped lease; here the
// executions run without attempt bounds). As for CheckDispatch, the seed fixes the plans, the deliveries' fates and
// the clock's moves, and the interleaving is the scheduler's.
//
// # Replicated worlds
//
// CheckReplicated runs a cluster (three nodes by default) of replicated
// stores (execstore.OpenReplicated: the store's writer proposing through
// package replica's node, the state machine on hashicorp/raft), each on its
// own directory and on raft's in-memory transport, with short timeouts
// (heartbeat and election 100 ms, leader lease 50 ms) and small snapshot
// settings (a snapshot every 16 logs, 16 logs kept behind it). Concurrent
// clients call the store's API as CheckLinearizable's do: they admit (the
// IDs repeat), claim, renew, release, acknowledge (suspended, completed,
// failed), save and read steps, wake, cancel and get executions, each call
// on a node that believes it leads; a refusal that submitted nothing
// (NotLeaderError without Uncertain) is tried again on the leader of the
// moment, within the call's bound of 3 s. A call whose command may have been
// submitted and whose answer was lost (the leadership lost meanwhile, the
// node closed, the bound run out) has an unknown outcome: porcupine may have
// it take effect at any point after its call, or never.
//
// A world runs in phases. Each moves the clock to a new time (a millisecond,
// a second or two hours on), writes a marker through the leader while every
// node's clock reads that time, and only then sets some clocks behind it (by
// a millisecond, a second, an hour): every command of the phase is then
// stamped with the phase's time, max(the clock, the node's last stamp, the
// state's time), which the model takes as the calls' time. The clients'
// calls are cut into segments, and between two segments a fault starts or
// ends, as soon as the first client reaches the boundary while the others
// are still calling: the leader or a follower crashed (cut off, then closed;
// its directory stays) or the leader stopped (closed as an operator would:
// it hands its leadership over first), and restarted from its directory, the
// leader or a follower cut off from the others and healed, or every message
// from and to one node held for a seeded time (up to 20 ms, 80 ms or 300 ms:
// longer than a heartbeat timeout, a message is as good as lost, and
// elections follow). After the clients, everything heals, and in half the
// phases one node's disk is replaced: the node is stopped, its directory
// emptied, and it starts again under its ID; once the leader compacted its
// log, it must catch up from a snapshot the leader sends. The cluster is
// settled first (every node follows one leader), as a node that lost its
// vote could otherwise vote twice in one term; in production a replaced disk
// rejoins by a membership change. Last, a probe of reads, as a rolling
// restart would do it: every node in turn (in every other phase first
// snapshotted and restarted, so that it opens on a snapshot with no log
// after it) is made the leader by raft's leadership transfer
// (replica.Node.TransferLeadership) and must answer a linearizable Get
// within 3 s. A read has no side effect, so while a client's read that
// timed out under faults is left out of the history, a read that does not
// answer on a healthy cluster is a violation: a node whose reads wait for
// an index it will not apply until the next write.
//
// It checks: after the faults heal, a leader takes a write and every node
// applies it within a bound; a leader cut off from the others steps down;
// every node's state then encodes to the same bytes; nothing a client saw
// acknowledged is lost on any node (admissions, recorded outcomes, saved
// steps, tokens handed out); along every node's log (read whenever the node
// stops) the stamped times never go backwards, so the store's time never
// does across leader changes, even under a leader whose clock is an hour
// behind; tokens never go backwards (a claim that began after another ended
// got a greater token) and none is handed out twice; no execution is leased
// twice at once (a lease granted before an earlier one expired needs a call
// that may have ended the earlier one, made before it); and the history is
// linearizable (porcupine, with the per-execution model of
// CheckLinearizable). A call may only answer what the contract allows: a
// result, a conflict, not found, a lost lease, or an error that leaves its
// outcome unknown (ErrNotLeader, ErrClosed, its time out); anything else is
// a violation.
//
// The seed fixes each client's calls (kinds, IDs, arguments; which of its
// leases a call uses depends on what its claims got), the fault schedule and
// the clocks; raft's timing and the scheduler fix the interleaving, the
// leader at each moment and so the fault's target. A world is therefore not
// reproducible byte for byte, and is outside the trace hash: its rerun line
// replays the same workload and faults, which may pass or fail differently.
// `execstore sim -replicated N` runs N worlds (30 by default, about 31 s on
// two cores, 25 s before the probe of reads) and prints on stderr a line of what they
// reached:
//
//	sim: replicated worlds: 30 seeds, 9000 calls (219 of unknown outcome), faults: crash-leader 32,
//	stop-leader 43, crash-follower 38, isolate-leader 38, isolate-follower 42, delay 47, replace-disk 42,
//	clock-behind 112, 498 failovers, 31 of 42 replaced disks caught up from a snapshot, 360 reads on a
//	healthy cluster's new leader answered (180 after a restart on a snapshot, 0 nodes not led in time),
//	0 violations
//
// (one line, cut here). Not simulated: a node paused longer than its leader
// lease (a garbage-collection pause, a stopped VM), which could believe it
// still leads after another was elected; in-process, raft's lease steps a
// cut-off leader down before the others elect a new one. Nor are torn files:
// a stopped node closes cleanly, and the log fsyncs each append, so a power
// loss would keep what Close keeps (the single-node simulator covers torn
// files and crash images).
//
// # The harness can fail
//
// mutants_test.go turns on each mutation of internal/mutant in turn (a WAL that
// skips its CRC check, a store that applies before logging, a WAL that skips
// its fsync, an acknowledgement that keeps covered wakes, a claim that reuses
// a token, a WAL that trusts the page cache when it reopens after an unclean
// stop, a compaction that removes a segment still needed, a compaction that
// removes segment files newest first, a log that appends after a padded
// tail's zeros instead of over them, a writer that counts merged
// acknowledgements as several log entries, a snapshot whose name is never
// made durable, a lease fence that lets token 0 through, a wake at exactly
// the pending time that writes, a cancel of a terminal execution that is
// logged although it changes nothing, a schedule that is not advanced past the
// occurrence it reached, a retirement one nanosecond early, listing indexes
// that keep pointing to a replaced record, a snapshot that numbers the change feed again from 1, a sweep of the
// change feed that drops a live entry, and, for the
// dispatcher check, a dispatcher that acknowledges after its lease was lost
// and one that publishes an acknowledgement that was not applied, for the
// workflow check, a rerun that runs a saved step's function again and a
// Sleep that takes its wake from the worker's clock, a cancellation that
// spares the children, and, for the replicated world, a leader that stamps
// with its own clock and a node that keeps its state when it restores a
// snapshot), runs seeds until one reports a
// violation, fails if none does within the bound, and reruns the catching
// seed without the mutation, which must pass.
//
// The mutations exist only in builds with the mutants tag: without it every
// switch of internal/mutant is a constant false that the compiler removes,
// so the library and the shipped binary carry none of them, and
// mutants_test.go (which turns them on) is not compiled. CI runs the
// mutation tests of every package with the tag:
//
//	go test -tags mutants -count=1 -run '<the mutation tests>' ./...
//
// and a binary built with the tag offers the sim command's -mutant flag, to
// watch one mutation get caught (a rerun line printed under a mutation
// carries the tag):
//
//	go run -tags mutants ./cmd/execstore sim -seeds 20 -ops 400 -mutant SkipFsync
//
// # Running it
//
// `go test ./sim/` runs a quick share (it also runs under -race), without the
// mutation tests unless -tags mutants is given. The budget run is the
// binary's sim command:
//
//	go run ./cmd/execstore sim -seeds 2000 -ops 1000
//	go run ./cmd/execstore sim -seed 56 -seeds 1 -ops 1000 -lin 0 -v   # replay one seed
//	go run ./cmd/execstore sim -seeds 0 -duration 8h -seed 1000000     # nightly
//
// After the seeds it runs 10 linearizability, 10 dispatcher and 10 workflow
// checks and 30 replicated worlds (-lin, -dispatch, -workflow,
// -replicated). It prints progress and what the dispatcher, workflow and
// replicated checks reached on stderr, the summary line (whose
// violations count every check's) on stdout, each failing seed's violation
// with the end of its trace and the command that replays or reruns it, and
// exits non-zero on any violation. With -coverage it also prints what the
// seeds reached (Coverage: each operation with each result, each crash point
// and fault by where and at which crash point, the shapes of batches, the
// boundaries) and exits non-zero when a cell of RequiredCells, which the
// workload is meant to reach within the CI budget, stays at zero; CI runs it
// so.
//
// Not simulated yet: the writer's timers firing, the retention check's and
// the next occurrence's (they would make runs depend on timing; tests cover
// them on a manual clock), the store's own snapshot cadence (snapshots run
// in the background, so the workload asks for them instead), and NoSync,
// which promises nothing across crashes.
package sim
