package wal

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("wal: log closed")

	// ErrFailed marks the fail-stop state: a write, fsync or truncation failed, so the page
	// cache and the file may disagree and nothing more may be appended. Errors wrapping it also
	// wrap the original cause. Close and reopen the log to continue.
	ErrFailed = errors.New("wal: log failed after a storage error; close and reopen it")

	// ErrOutOfRange is returned for an index outside [FirstIndex, LastIndex] (or LastIndex+1
	// where the method allows it).
	ErrOutOfRange = errors.New("wal: index out of range")

	// ErrEmptyPayload is returned by Write for a batch that was given an empty payload. Every
	// entry carries at least one byte so that a zero-filled tail can never decode as entries.
	ErrEmptyPayload = errors.New("wal: empty payload")

	// ErrTooLarge is returned by Write for a batch that exceeded MaxPayloadBytes,
	// MaxBatchEntries or MaxBatchBytes.
	ErrTooLarge = errors.New("wal: batch exceeds a limit")
)

// CorruptionError reports an entry that was durable and is now damaged, or that cannot be read
// at all. Open refuses to open a log whose last segment holds one; Read and Replay return one
// for any other segment. The log must not be repaired automatically: entries after the damaged
// one were acknowledged to callers.
type CorruptionError struct {
	Segment string // segment file name, e.g. 00000000000000000001
	Index   uint64 // index of the damaged entry
	Offset  int64  // byte offset of the damaged entry (or of the first unparsable byte) in Segment; -1 if unknown
	Reason  string // what is wrong
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: corrupt entry at index %d in segment %s (offset %d): %s",
		e.Index, e.Segment, e.Offset, e.Reason)
}

// TornTailError describes the torn tail Open cut from the last segment: bytes of a Write that
// never completed. It is not returned as a failure; Log.TailRepair reports it so that an
// operator can see what was cut and where the bytes were kept.
type TornTailError struct {
	Segment  string // segment file name
	Index    uint64 // index the first cut entry would have had
	Offset   int64  // offset in Segment where the cut starts (the new file size)
	Bytes    int64  // bytes cut
	SideFile string // file, in the log directory, holding the cut bytes less the zeros they end with (padding, or blocks never written)
	Reason   string // why the first cut entry is not valid
}

func (e *TornTailError) Error() string {
	return fmt.Sprintf("wal: torn tail at index %d in segment %s (offset %d): %s; cut %d bytes into %s",
		e.Index, e.Segment, e.Offset, e.Reason, e.Bytes, e.SideFile)
}

// IsTornTail reports whether err describes a torn tail: the unfinished last Write that Open
// cuts. A *CorruptionError is never a torn tail.
func IsTornTail(err error) bool {
	var torn *TornTailError
	return errors.As(err, &torn)
}

// IsCorruption reports whether err describes a damaged durable entry.
func IsCorruption(err error) bool {
	var c *CorruptionError
	return errors.As(err, &c)
}
