package execstore

import (
	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/wal"
)

// The byte budget. Every command has a largest encoded size that follows from
// the Limits, and every limit is checked in the caller's goroutine, so a
// command the writer takes always fits one WAL entry, and a batch cut by
// count (Options.MaxBatch) and bytes (Options.MaxBatchBytes) always fits one
// WAL batch. The log refusing a batch can then only be a programming error,
// never one caller's oversized request stopping the store; only a real I/O
// failure fail-stops it.

// DefaultMaxBatchBytes is Options.MaxBatchBytes' default (64 MiB).
const DefaultMaxBatchBytes = 64 << 20

// checkOptions refuses a configuration under which a batch or a command could
// exceed what the write-ahead log accepts. It returns the largest encoded
// command the store will queue.
func checkOptions(o *Options, l *Limits) (maxCommand int, err error) {
	switch {
	case o.MaxBatch > wal.MaxBatchEntries:
		return 0, invalidArg("Options.MaxBatch %d is more than the %d entries one WAL batch holds", o.MaxBatch, wal.MaxBatchEntries)
	case o.MaxBatchBytes > wal.MaxBatchBytes:
		return 0, invalidArg("Options.MaxBatchBytes %d is more than the %d bytes one WAL batch holds", o.MaxBatchBytes, wal.MaxBatchBytes)
	case o.GroupWait > GroupWaitMax:
		return 0, invalidArg("Options.GroupWait %v is more than GroupWaitMax, %v", o.GroupWait, GroupWaitMax)
	case o.ArchiveCacheBytes < 0:
		return 0, invalidArg("Options.ArchiveCacheBytes %d is negative", o.ArchiveCacheBytes)
	case o.ForgetAfter < 0:
		return 0, invalidArg("Options.ForgetAfter %v is negative", o.ForgetAfter)
	case o.ForgetAfter > 0 && !o.Archive:
		return 0, invalidArg("Options.ForgetAfter needs Options.Archive: only archived executions are forgotten")
	case o.ForgetAfter > 0 && o.ForgetAfter <= o.Retention:
		return 0, invalidArg("Options.ForgetAfter %v must exceed Options.Retention %v: an execution is archived first, then forgotten", o.ForgetAfter, o.Retention)
	case o.ForgetAfter > 0 && o.Retention <= 0:
		return 0, invalidArg("Options.ForgetAfter needs Options.Retention: only archived executions are forgotten")
	}
	maxCommand = min(o.MaxBatchBytes, wal.MaxPayloadBytes)
	b := bounds(l)
	if kind, n := fsm.LargestCommand(&b); n > maxCommand {
		return 0, invalidArg("under these Limits a %s command can encode to %d bytes, more than the %d one WAL batch or entry holds "+
			"(lower the limits or raise Options.MaxBatchBytes)", kind, n, maxCommand)
	}
	return maxCommand, nil
}

// bounds are the sizes the limits allow, for the state machine's bound of
// each kind of command (fsm.CommandBound).
func bounds(l *Limits) fsm.Bounds {
	return fsm.Bounds{
		ID: IDBytes, Event: l.EventBytes, ContextEntries: l.ContextEntries, Value: l.ValueBytes, Key: l.KeyBytes,
		WritesPerCommit: l.WritesPerCommit, Commit: l.CommitBytes, KeysPerWatch: l.KeysPerWatch,
		// A message cut to ErrorMessageBytes ends in a mark, which a tiny
		// limit may not hold.
		ErrorMessage:    max(l.ErrorMessageBytes, len(truncatedMark)),
		ErrorCauseDepth: l.ErrorCauseDepth, CancelReason: l.CancelReasonBytes,
	}
}

// commandBound is the largest encoded size the limits allow a command of
// kind k.
func commandBound(l *Limits, k fsm.Kind) int {
	b := bounds(l)
	return fsm.CommandBound(&b, k)
}

// takeBatch returns how many of the queued requests, the first ones, the
// writer takes as one batch: at least one, at most MaxBatch, and no more than
// MaxBatchBytes of encoded commands (a request is never larger: see
// checkOptions). Requests the writer answers without logging count too, as
// the writer cannot know them before it takes them.
func takeBatch(queue []*request, maxCount, maxBytes int) int {
	bytes := 0
	for n, r := range queue {
		if n == maxCount || (n > 0 && bytes+r.size > maxBytes) {
			return n
		}
		bytes += r.size
	}
	return len(queue)
}
