package execstore

import (
	"strings"

	"github.com/execstore/execstore/fsm"
)

// A duplicate queued with its original writes nothing.
//
// The writer prechecks each command of a batch against the state before the
// batch, so a command that only an earlier command of the same batch makes a
// no-op (the second of two admissions of one new ID, an acknowledgement of a
// lease acknowledged just before it) would be logged and refused at apply.
// batchView records what the logged commands of the batch being prepared will
// do, as far as the writer can tell before applying them, and such a command
// is deferred instead: not logged, and prechecked again once the batch is
// applied, when its answer (a conflict, a lost lease, the recorded outcome)
// comes from the applied state. It is linearized after the batch, which is
// within its call, as it was queued before the batch was taken and is
// answered after it is applied.
//
// The view is a prediction, not a proof: if the second precheck finds that
// the command does change the state after all (the claim that was expected to
// supersede its lease took other executions), the command is queued again at
// the front and logged in the next batch, never deferred twice. Correctness
// rests on the second precheck alone; the view only decides what is worth
// deferring.
type batchView struct {
	admitted   map[string]struct{}   // IDs a logged admission takes
	started    map[startKey]struct{} // (caller, step key) of logged child starts
	ended      map[string]uint64     // execution -> token of the lease a logged acknowledgement or release ends
	superseded map[string]uint64     // execution -> token of an expired lease a logged claim may supersede
	wakes      map[string]int64      // execution -> earliest wake a logged admission or wake leaves pending
	watches    map[string]struct{}   // execution and keys of logged watches
	cancelled  map[string]struct{}   // executions a logged cancel ends (not their descendants: the view does not walk the tree)

	schedules map[string]*fsm.ScheduleDef // schedule -> the definition a logged put gives it; nil: a logged delete removes it
}

type startKey struct{ caller, key string }

// reset empties the view for the next batch, keeping its maps.
func (v *batchView) reset() {
	clear(v.admitted)
	clear(v.started)
	clear(v.ended)
	clear(v.superseded)
	clear(v.wakes)
	clear(v.watches)
	clear(v.cancelled)
	clear(v.schedules)
}

// settles reports whether the logged commands recorded so far probably make c
// change nothing.
func (v *batchView) settles(c *fsm.Command) bool {
	switch c.Kind {
	case fsm.KindAdmit:
		_, ok := v.admitted[c.ExecutionID]
		return ok && !c.Generated
	case fsm.KindWake:
		at, ok := v.wakes[c.ExecutionID]
		_, cancelled := v.cancelled[c.ExecutionID] // ignored: it is terminal
		return (ok && at <= c.At) || cancelled
	case fsm.KindWatch:
		_, ok := v.watches[watchKey(c)]
		_, cancelled := v.cancelled[c.ExecutionID]
		return ok || cancelled
	case fsm.KindStart:
		if _, ok := v.started[startKey{c.ExecutionID, c.Key}]; ok {
			return true
		}
		return v.leaseEnded(c.ExecutionID, c.Token)
	case fsm.KindAcknowledge, fsm.KindRenew, fsm.KindRelease, fsm.KindSaveStep:
		return v.leaseEnded(c.ExecutionID, c.Token)
	case fsm.KindAcknowledgeBatch:
		for i := range c.Acks {
			if !v.leaseEnded(c.Acks[i].ExecutionID, c.Acks[i].Token) {
				return false
			}
		}
		return true
	case fsm.KindCancel:
		_, ok := v.cancelled[c.ExecutionID]
		return ok

	case fsm.KindPutSchedule: // a put of the definition a logged put gives
		def, ok := v.schedules[c.Schedule.ID]
		return ok && def != nil && *def == *c.Schedule
	case fsm.KindDeleteSchedule: // a delete of what a logged delete removes
		def, ok := v.schedules[c.ScheduleID]
		return ok && def == nil
	}
	return false
}

// leaseEnded reports whether a logged command ends (or may supersede) the
// lease with this token.
func (v *batchView) leaseEnded(id string, token uint64) bool {
	if t, ok := v.ended[id]; ok && t == token {
		return true
	}
	t, ok := v.superseded[id]
	return ok && t == token
}

// note records what c, about to be logged, will do. state is the state
// before the batch.
func (v *batchView) note(c *fsm.Command, state *fsm.State) {
	switch c.Kind {
	case fsm.KindAdmit:
		if !c.Generated {
			v.admitted = setKey(v.admitted, c.ExecutionID)
		}
		v.wakes = setEarliest(v.wakes, c.ExecutionID, c.Now)
	case fsm.KindWake:
		v.wakes = setEarliest(v.wakes, c.ExecutionID, c.At)
	case fsm.KindWatch:
		v.watches = setKey(v.watches, watchKey(c))
	case fsm.KindStart:
		if v.started == nil {
			v.started = make(map[startKey]struct{})
		}
		v.started[startKey{c.ExecutionID, c.Key}] = struct{}{}
	case fsm.KindClaim:
		// A claim clears the pending wakes of what it takes, so wakes noted
		// before it no longer predict a merge.
		clear(v.wakes)
		state.ExpiredLeases(c.Now, c.Limit, func(id string, token uint64) {
			if v.superseded == nil {
				v.superseded = make(map[string]uint64)
			}
			v.superseded[id] = token
		})
	case fsm.KindAcknowledge, fsm.KindRelease:
		v.endLease(c.ExecutionID, c.Token)
	case fsm.KindAcknowledgeBatch:
		for i := range c.Acks {
			v.endLease(c.Acks[i].ExecutionID, c.Acks[i].Token)
		}
	case fsm.KindCancel:
		// A second cancel of it changes nothing, nor does any write fenced by
		// the lease it ends.
		v.cancelled = setKey(v.cancelled, c.ExecutionID)
		if e, ok := state.Get(c.ExecutionID); ok && e.Leased() {
			v.endLease(c.ExecutionID, e.LeaseToken)
		}

	case fsm.KindPutSchedule:
		v.noteSchedule(c.Schedule.ID, c.Schedule)
	case fsm.KindDeleteSchedule:
		v.noteSchedule(c.ScheduleID, nil)
	}
}

func (v *batchView) noteSchedule(id string, def *fsm.ScheduleDef) {
	if v.schedules == nil {
		v.schedules = make(map[string]*fsm.ScheduleDef)
	}
	v.schedules[id] = def
}

func (v *batchView) endLease(id string, token uint64) {
	if v.ended == nil {
		v.ended = make(map[string]uint64)
	}
	v.ended[id] = token
	delete(v.wakes, id) // an outcome or a release moves the pending wake
}

func setKey(m map[string]struct{}, k string) map[string]struct{} {
	if m == nil {
		m = make(map[string]struct{})
	}
	m[k] = struct{}{}
	return m
}

func setEarliest(m map[string]int64, id string, at int64) map[string]int64 {
	if m == nil {
		m = make(map[string]int64)
	}
	if prev, ok := m[id]; !ok || at < prev {
		m[id] = at
	}
	return m
}

// watchKey identifies a watch command: its execution and its sorted keys.
func watchKey(c *fsm.Command) string {
	return c.ExecutionID + "\x00" + strings.Join(c.Keys, "\x00")
}
