package replica

import (
	"errors"
	"fmt"
)

var (
	// ErrCorruptEntry is wrapped by every error about a log entry's payload that does not
	// decode: the wal's frame and checksum were right, so the bytes are as written, by a
	// writer that is not this package (or a newer version of it).
	ErrCorruptEntry = errors.New("replica: malformed log entry")

	// ErrNotContiguous is returned by StoreLogs for logs that do not continue the log: each
	// must follow the one before it, and the first must follow LastIndex (any index, when
	// the log is empty). Nothing is written.
	ErrNotContiguous = errors.New("replica: logs do not continue the log")

	// ErrRangeUnsupported is returned by DeleteRange for a range inside the log that is
	// neither a prefix nor a suffix; raft never asks for one. Nothing is deleted.
	ErrRangeUnsupported = errors.New("replica: only a prefix or a suffix of the log can be deleted")

	// ErrCorruptStable is wrapped by the error OpenStableStore returns for a stable-store
	// file that fails its checks (magic, version, checksum, layout).
	ErrCorruptStable = errors.New("replica: corrupt stable store")

	// ErrStableLimit is returned by the stable store's setters for a key or value outside
	// the limits, or a key past the most the store holds. Nothing is changed.
	ErrStableLimit = errors.New("replica: stable store limit exceeded")

	// ErrStableFailed marks a stable store whose write failed: the file on disk and the
	// page cache may disagree, so it refuses every later Set until it is reopened.
	ErrStableFailed = errors.New("replica: stable store failed after a storage error; reopen it")

	// ErrBadValue is returned by GetUint64 for a key whose value is not eight bytes (it was
	// written by Set, not SetUint64).
	ErrBadValue = errors.New("replica: value is not a uint64")

	// ErrClosed is returned by the stores' methods after Close.
	ErrClosed = errors.New("replica: closed")

	// ErrBadCommand is wrapped by the *CommandError the FSM returns, as a log's response,
	// for a command log whose data is not an fsm command.
	ErrBadCommand = errors.New("replica: log data is not a command")
)

// CommandError is the response Apply gives for a command log whose data does not decode. It
// changes nothing, on every replica alike: the data is the same everywhere, and so is the
// decoder's verdict.
type CommandError struct {
	Index uint64 // the log's index
	Err   error  // the decoder's error (wraps fsm.ErrDecode)
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("replica: log %d: %v", e.Index, e.Err)
}

// Unwrap returns ErrBadCommand and the decoder's error.
func (e *CommandError) Unwrap() []error { return []error{ErrBadCommand, e.Err} }
