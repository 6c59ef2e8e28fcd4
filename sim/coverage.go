package sim

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/execstore/execstore"
)

// Coverage counts what a run reached, cell by cell: each operation kind with
// each result, each crash point and each injected fault by where it fell
// (inside an operation's write, a snapshot, recovery, the reopen after a
// storage error, or idle) and at which crash point, and the batch steps' shapes. A
// cell is a slash-separated path: "op/ack/LEASE_LOST",
// "crash/in-snapshot/snapshot before-sync directory",
// "fault/in-op/before-sync". Counts depend only on the seeds and -ops, like
// the trace.
type Coverage map[string]int

// cover counts one cell.
func (w *world) cover(parts ...string) {
	w.cov[strings.Join(parts, "/")]++
}

// coverResult counts an operation's result.
func (w *world) coverResult(o *op, got result) {
	code := got.Code
	if code == "" {
		code = "ok"
	}
	switch {
	case got.Wake != "":
		code += " " + string(got.Wake)
	case got.Record != nil && code == "ok":
		code += " " + string(got.Record.Status)
	case o.kind == opClaim && code == "ok" && len(got.Leases) == 0:
		code += " none"
	case o.kind == opClaim && code == "ok" && o.key != "" && w.grantedBy[tokenOf{got.Leases[0].ExecutionID, got.Leases[0].Token}] == o.key:
		code += " replayed" // the repeat of a keyed claim (coverResult runs before noteLeases)
	}
	w.cover("op", string(o.kind), code)
	switch {
	case o.kind == opAdmit && o.admit.queue != "" && o.admit.queue != o.admit.workflow && got.Code == "":
		w.cover("queues", "an admission to a named queue")
	case o.kind == opClaim && len(o.queues) > 0 && got.Code == "" && len(got.Leases) > 0:
		w.cover("queues", "a claim of named queues leased")
	case o.kind == opClaim && len(o.queues) > 0 && got.Code == "" && len(got.Leases) == 0 && w.model.dueOutside(o.queues):
		w.cover("queues", "a claim of named queues left another queue's due execution")
	case o.kind == opPutQueue && got.Code == "" && o.queue.KeyLimit > 0:
		w.cover("queues", "a key limit put "+map[bool]string{true: "live", false: "leased"}[o.queue.KeyMode == execstore.KeyLive])
	case o.kind == opPutQueue && got.Code == "" && o.queue.Rate > 0:
		w.cover("queues", "a rate limit put")
	case o.kind == opPutQueue && got.Code == "" && (o.queue.Paused || o.queue.Concurrency > 0):
		w.cover("queues", "settings put")
	}
	if o.kind == opClaim && got.Code == "" && w.model.rateHeld {
		w.cover("queues", "a claim left a rate-limited queue's executions")
	}
	if w.model.expired {
		w.cover("deadlines", "an execution failed at its deadline")
		w.model.expired = false
	}
	if w.model.expiredTree {
		w.cover("deadlines", "a deadline cancelled what its execution started")
		w.model.expiredTree = false
	}
	if o.kind == opClaim && got.Code == "" && w.model.keyHeld {
		w.cover("queues", "a claim left an execution waiting for its key's slot")
	}
	if o.kind == opClaim && got.Code == "" && w.model.prioritized {
		w.cover("queues", "a claim leased a higher priority before an earlier due execution")
	}
	if o.kind == opClaim && got.Code == "" {
		if paused, full := w.model.heldBackNow(); paused {
			w.cover("queues", "a claim left a paused queue's executions")
		} else if full {
			w.cover("queues", "a claim left a full queue's due executions")
		}
	}
	for _, b := range got.Batch {
		w.coverResult(&op{kind: opAck}, b)
		switch {
		case b.Replayed && b.Record != nil && b.Record.Status == execstore.StatusSuspended:
			w.cover("op", "ack-batch", "replayed suspension")
		case b.Replayed:
			w.cover("op", "ack-batch", "replayed")
		}
	}
}

// coverCancel counts a cancellation by the size of the tree it ended.
func (w *world) coverCancel() {
	switch n := w.model.cancelled; {
	case n >= 3:
		w.cover("cancel", "a tree of three or more")
	case n == 2:
		w.cover("cancel", "a parent and a child")
	case n == 1:
		w.cover("cancel", "one execution")
	}
}

// coverPoint counts a crash or fault (what) that fell at ev, in where.
func (w *world) coverPoint(what, where string, ev *crashPoint) {
	w.cover(what, where, ev.class())
}

// class names the crash point without the parts that vary from run to run:
// which segment or snapshot, only what kind of file or directory.
func (e crashPoint) class() string {
	if e.path == "" {
		return e.kind
	}
	name := e.path[strings.LastIndexByte(e.path, '/')+1:]
	var what string
	switch {
	case e.path == ".":
		what = "store directory"
	case e.path == "wal" || e.path == "snapshots":
		what = "directory"
	case strings.HasSuffix(name, ".tmp"):
		what = "temporary file"
	case strings.HasSuffix(name, ".snap"):
		what = "snapshot"
	case strings.HasSuffix(name, rewriteSuffix):
		what = "rewritten segment"
	case strings.HasPrefix(name, "torn-"):
		what = "torn-tail file"
	default:
		what = "segment"
	}
	return e.kind + " " + what
}

// add adds another run's counts.
func (c Coverage) add(o Coverage) {
	for k, v := range o {
		c[k] += v
	}
}

// Print writes the table: one line per cell reached, and one per required
// cell not reached, grouped by the cell's first part.
func (c Coverage) Print(w io.Writer) {
	cells := slices.Sorted(maps.Keys(c))
	for _, r := range RequiredCells {
		if c[r] == 0 {
			cells = append(cells, r)
		}
	}
	slices.Sort(cells)
	cells = slices.Compact(cells)
	group := ""
	for _, cell := range cells {
		g, _, _ := strings.Cut(cell, "/")
		if g != group {
			fmt.Fprintf(w, "coverage: %s\n", g)
			group = g
		}
		mark := ""
		if slices.Contains(RequiredCells, cell) {
			mark = " (required)"
		}
		fmt.Fprintf(w, "  %9d  %s%s\n", c[cell], cell, mark)
	}
}

// Missing returns the required cells the run did not reach.
func (c Coverage) Missing() []string {
	var out []string
	for _, r := range RequiredCells {
		if c[r] == 0 {
			out = append(out, r)
		}
	}
	return out
}

// RequiredCells are the cells the workload is meant to reach within the CI
// budget (2,000 seeds of 1,000 operations), each reached there many times
// over: a change that leaves one at zero has cut the simulator's reach, and
// `execstore sim -coverage` fails. A new kind of operation, result, crash
// point or fault adds its cells here.
var RequiredCells = []string{
	// Every operation, with its main results.
	"op/admit/ok", "op/admit/EXECUTION_ID_CONFLICT", "op/admit/INVALID_EXECUTION_EVENT",
	"op/wake/ok requested", "op/wake/ok ignored", "op/wake/EXECUTION_NOT_FOUND",
	"op/claim/ok", "op/claim/ok none", "op/claim/ok replayed", "op/claim/INVALID_ARGUMENT",
	"op/renew/ok", "op/renew/LEASE_LOST", "op/renew/EXECUTION_NOT_FOUND",
	"op/release/ok", "op/release/LEASE_LOST", "op/release/EXECUTION_NOT_FOUND",
	"op/ack/ok completed", "op/ack/ok failed", "op/ack/ok suspended", "op/ack/LEASE_LOST", "op/ack/INVALID_ARGUMENT",
	"op/ack-batch/ok", "op/ack-batch/replayed", "op/ack-batch/replayed suspension",
	"op/save-step/ok", "op/save-step/LEASE_LOST", "op/save-step/INVALID_ARGUMENT",
	"op/step/ok",
	"op/start/ok", "op/start/LEASE_LOST", "op/start/START_REQUEST_MISMATCH", "op/start/INVALID_EXECUTION_EVENT",
	"op/commit/ok", "op/commit/INVALID_ARGUMENT",
	"op/read/ok",
	"op/watch/ok requested", "op/watch/ok ignored", "op/watch/INVALID_ARGUMENT",
	"op/get/ok completed", "op/get/EXECUTION_NOT_FOUND",
	"op/await/ok completed", "op/await/CANCELED",
	// Queues: claims of named queues lease only theirs.
	"queues/an admission to a named queue", "queues/a claim of named queues leased",
	"queues/a claim of named queues left another queue's due execution",
	"queues/settings put", "queues/a claim left a paused queue's executions", "queues/a claim left a full queue's due executions",
	"queues/a rate limit put", "queues/a claim left a rate-limited queue's executions", "boundary/claim at exactly a rate's release",
	"queues/a claim leased a higher priority before an earlier due execution",
	"queues/a key limit put leased", "queues/a key limit put live", "queues/a claim left an execution waiting for its key's slot",
	"deadlines/an execution failed at its deadline", "deadlines/a deadline cancelled what its execution started",
	// Cancellations that end a tree: each execution before its children,
	// in step key order.
	"cancel/one execution", "cancel/a parent and a child", "cancel/a tree of three or more",
	// Crashes inside an operation's write, at each crash point.
	"crash/in-op/before-write", "crash/in-op/before-sync", "crash/in-op/after-sync segment",
	// Crashes in a snapshot: the snapshot package's steps and the log's compaction.
	"crash/in-snapshot/snapshot before-write temporary file",
	"crash/in-snapshot/snapshot before-sync temporary file",
	"crash/in-snapshot/snapshot after-sync temporary file",
	"crash/in-snapshot/snapshot before-write snapshot",
	"crash/in-snapshot/snapshot before-sync directory",
	"crash/in-snapshot/snapshot after-sync directory",
	"crash/in-snapshot/snapshot before-sync store directory",
	"crash/in-snapshot/before-write",
	"crash/in-snapshot/after-sync directory",
	// Crashes during recovery, idle, and after a batch.
	"crash/in-recovery/before-write", "crash/in-recovery/before-sync", "crash/in-recovery/after-sync rewritten segment",
	"crash/in-recovery/after-sync torn-tail file", "crash/in-reopen/before-sync",
	"crash/idle/idle",
	// Storage errors.
	"fault/in-op/before-write", "fault/in-op/before-sync", "fault/in-op/after-sync segment",
	"fault/in-snapshot/snapshot before-write temporary file",
	"fault/in-snapshot/snapshot before-sync temporary file",
	"fault/in-snapshot/snapshot before-write snapshot",
	"fault/in-snapshot/snapshot before-sync directory",
	"fault/in-snapshot/snapshot after-sync directory",
	"fault/in-snapshot/before-write",
	// Batches and what follows them.
	"batch/merged acknowledgements", "batch/out of queue order",
	"batch/then/nothing", "batch/then/snapshot", "batch/then/crash-in-snapshot", "batch/then/snapshot-close",
	"batch/then/crash", "batch/then/close", "batch/then/automatic snapshot",
	// Boundaries.
	"boundary/claim at exactly a claimable time", "boundary/wake at exactly the pending time",
	"boundary/forged token",
	"boundary/params at-limit", "boundary/params one-past", "boundary/value at-limit", "boundary/value one-past",
	"boundary/retention reached exactly", "boundary/retention passed by a nanosecond",
	// Retention: retired records, compared with the model's after recovery,
	// a restart and a snapshot's fallback as well as in periodic checks.
	"retention/retired records compared in a periodic check",
	"retention/retired records compared after recovery",
	"retention/retired records compared after a clean restart",
	"retention/retired records compared on a second replay of the recovered log",
	// Forgetting (Options.ForgetAfter): archived executions forgotten, and
	// a forgotten ID admitted again as a new execution.
	"forget/archived executions forgotten",
	"forget/a forgotten ID admitted again",
}
