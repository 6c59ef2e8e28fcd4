package execstore

import (
	"time"

	"github.com/execstore/execstore/fsm"
)

// Deadlines: the writer ends the executions whose deadlines have come
// (AdmitRequest.Deadline) with expire-deadlines commands of its own, as it
// reaches schedules' occurrences: before the batch a round took, stamped
// with the batch's time, so that a write stamped at or after a deadline
// answers after it (an acknowledgement that comes too late finds the
// execution failed). Its timer wakes it at the next deadline (or within
// Options.ScheduleCheck, whichever is first, so that a clock that jumps is
// followed); on a clock whose timers never fire, the next request does.

// expireLimit bounds the executions one expire-deadlines command ends, so
// that one command never holds the writer long.
const expireLimit = 1024

// deadlineExpiry makes an expire-deadlines command when the earliest
// deadline has come.
func (w *writer) deadlineExpiry() (*request, func() bool) {
	if !w.come((*fsm.State).NextDeadline) {
		return nil, nil
	}
	r := newRequest()
	r.cmd = fsm.Command{Kind: fsm.KindExpireDeadlines, Limit: expireLimit}
	// More may be due however many this one ended (a deadline whose
	// execution an earlier one's cancelled ends nothing): ask again. Each
	// command takes at least one due deadline, so the loop ends.
	return r, func() bool { return r.err == nil && w.come((*fsm.State).NextDeadline) }
}

// armDeadlineTimer sets the timer for the next deadline and returns its
// channel (armFor, schedules.go).
func (w *writer) armDeadlineTimer() <-chan time.Time {
	return w.armFor(&w.deadline, (*fsm.State).NextDeadline)
}
