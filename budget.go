package execstore

import (
	"encoding/binary"

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
	}
	maxCommand = min(o.MaxBatchBytes, wal.MaxPayloadBytes)
	if kind, n := largestCommand(l); n > maxCommand {
		return 0, invalidArg("under these Limits a %s command can encode to %d bytes, more than the %d one WAL batch or entry holds "+
			"(lower the limits or raise Options.MaxBatchBytes)", kind, n, maxCommand)
	}
	return maxCommand, nil
}

// boundedKinds are the kinds whose size the limits let grow; every other
// command is a few dozen bytes.
var boundedKinds = []fsm.Kind{fsm.KindAdmit, fsm.KindStart, fsm.KindSaveStep, fsm.KindAcknowledge,
	fsm.KindAcknowledgeBatch, fsm.KindCommit, fsm.KindWatch, fsm.KindRelease, fsm.KindCancel,
	fsm.KindPutSchedule, fsm.KindDeleteSchedule, fsm.KindFireSchedules}

// largestCommand returns the kind of command with the largest encoded size
// the limits allow, and that size.
func largestCommand(l *Limits) (fsm.Kind, int) {
	var kind fsm.Kind
	largest := 0
	for _, k := range boundedKinds {
		if n := commandBound(l, k); n > largest {
			kind, largest = k, n
		}
	}
	return kind, largest
}

// commandBound is the largest encoded size the limits allow a command of
// kind k (one of boundedKinds). Each term follows fsm.EncodedLen's layout: a
// string is its length and a varint of it.
func commandBound(l *Limits, k fsm.Kind) int {
	const (
		head = 2 + binary.MaxVarintLen64 // version, kind, time
		num  = binary.MaxVarintLen64     // any integer
		id   = num + IDBytes             // an execution, workflow or generated ID
	)
	str := func(n int) int { return num + n }
	// A message cut to ErrorMessageBytes ends in a mark, which a tiny limit
	// may not hold.
	message := max(l.ErrorMessageBytes, len(truncatedMark))
	chain := num + (l.ErrorCauseDepth+1)*(str(IDBytes)+str(message)+str(IDBytes)) // a recorded error
	ack := id + num + 1 + max(str(l.ValueBytes), chain)
	switch k {
	case fsm.KindAdmit:
		// params and context share EventBytes; each context entry adds two
		// lengths; the attempt bound last.
		return head + id + 1 + id + num + num + l.EventBytes + l.ContextEntries*2*num + num
	case fsm.KindRelease:
		return head + id + num + num + chain
	case fsm.KindCancel:
		return head + id + str(l.CancelReasonBytes)
	case fsm.KindStart:
		return head + id + num + str(l.KeyBytes) + id + num + l.EventBytes + id
	case fsm.KindSaveStep:
		return head + id + num + str(l.KeyBytes) + str(l.ValueBytes)
	case fsm.KindAcknowledge:
		return head + ack
	case fsm.KindAcknowledgeBatch:
		// Acknowledgements are packed up to ackCommandBytes; one alone may
		// pass it, but is then an acknowledge command.
		return head + num + ackCommandBytes
	case fsm.KindCommit:
		return head + num + l.CommitBytes + l.WritesPerCommit*2*num
	case fsm.KindWatch:
		return head + id + num + l.KeysPerWatch*str(l.KeyBytes)

	case fsm.KindPutSchedule:
		// ID, workflow, params (EventBytes), interval, cron, offset, start,
		// end, policy, first occurrence, limit.
		return head + id + id + num + l.EventBytes + num + str(fsm.MaxCronBytes) + 3*num + 1 + 2*num
	case fsm.KindDeleteSchedule:
		return head + id
	case fsm.KindFireSchedules:
		return head + num + fsm.MaxFiresPerCommand*(id+2*num+1)
	}
	panic("execstore: no size bound for " + k.String())
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
