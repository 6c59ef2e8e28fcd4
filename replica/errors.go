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

var (
	// ErrNotLeader is wrapped by every *NotLeaderError: the node cannot take a write, or
	// serve a linearizable read, because it is not the leader.
	ErrNotLeader = errors.New("replica: not the leader")

	// ErrNodeOptions is wrapped by the error Open returns for options it refuses; nothing
	// is created.
	ErrNodeOptions = errors.New("replica: invalid node options")

	// ErrBootstrapped is returned by Bootstrap on a node that already holds raft state (a
	// term, a log or a snapshot): a cluster is bootstrapped once, on its first start, and a
	// reopened node resumes from its directory.
	ErrBootstrapped = errors.New("replica: already bootstrapped")

	// ErrInvalidCommand is wrapped by the error Apply and ApplyBatch return for a command
	// the state machine would refuse to log (fsm.Command.Check); nothing is submitted.
	ErrInvalidCommand = errors.New("replica: invalid command")

	// ErrNodeClosed is returned by a Node's methods after Close, and by those waiting
	// when Close is called: a command submitted before then may still commit (its outcome
	// is unknown, as after a timeout).
	ErrNodeClosed = errors.New("replica: node closed")
)

// NotLeaderError is the error of a write (or a linearizable read) on a node that is not the
// leader, or that stopped being it. It wraps ErrNotLeader.
type NotLeaderError struct {
	// LeaderID and LeaderAddr name the leader this node knows of; empty when it knows none
	// (an election is under way). A client retries there.
	LeaderID   string
	LeaderAddr string
	// Uncertain is true when the node lost its leadership after the command was handed to
	// raft: the command may still be committed by the next leader (its outcome is unknown,
	// as after a timeout). When false, nothing was submitted.
	Uncertain bool
}

func (e *NotLeaderError) Error() string {
	msg := "replica: not the leader"
	if e.Uncertain {
		msg = "replica: leadership lost while committing (the command may still commit)"
	}
	if e.LeaderID == "" && e.LeaderAddr == "" {
		return msg + "; no leader known"
	}
	return fmt.Sprintf("%s; leader %s at %s", msg, e.LeaderID, e.LeaderAddr)
}

// Unwrap returns ErrNotLeader.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }
