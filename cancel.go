package execstore

import (
	"context"
	"unicode/utf8"

	"github.com/execstore/execstore/fsm"
)

// Cancel ends a non-terminal execution with StatusCancelled and returns its
// record afterwards. The outcome's Error keeps reason as its Message and
// matches ErrCancelled. In the same command:
//   - the current lease ends: its holder's next fenced write (Renew,
//     SaveStep, Start, Release) gets an error matching ErrLeaseLost and
//     ErrCancelled, and a dispatcher delivering the execution cancels the
//     delivery's context with such an error as its cause at its next renewal;
//   - pending wakes and watches are dropped;
//   - every execution it started (Start) that is not terminal is cancelled
//     too, with the same reason, and theirs, recursively;
//   - its parent, if it has one that is not terminal, is woken, as when a
//     child completes or fails.
//
// Cancelling a terminal execution changes nothing and returns its record
// with a nil error, as a late acknowledgement does; it writes nothing.
// reason is at most Limits.CancelReasonBytes of UTF-8 (ErrInvalidArgument).
// Errors: ErrExecutionNotFound.
func (s *Store) Cancel(ctx context.Context, executionID, reason string) (Record, error) {
	if len(reason) > s.limits.CancelReasonBytes {
		return Record{}, overLimit(ErrInvalidArgument, "cancel reason is %d bytes, more than the limit of %d", len(reason), s.limits.CancelReasonBytes)
	}
	if !utf8.ValidString(reason) {
		return Record{}, invalidArg("cancel reason is not valid UTF-8")
	}
	if checkID("", executionID) != "" {
		return Record{}, notFound(executionID)
	}
	c := fsm.Command{Kind: fsm.KindCancel, ExecutionID: executionID, Reason: reason}
	res, err := s.do(ctx, &c)
	if err != nil {
		return Record{}, err
	}
	if err := resultErr(&res, &c); err != nil {
		return Record{}, err
	}
	rec := recordFromFSM(&res.Exec)
	rec.Priority, rec.ConcurrencyKey = int(res.Priority), res.ConcurrencyKey
	return rec, nil
}
