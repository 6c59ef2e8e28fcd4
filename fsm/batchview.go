package fsm

import "strings"

// A duplicate queued with its original writes nothing.
//
// The Store's writer prechecks each command of a batch against the state
// before the batch, so a command that only an earlier command of the same
// batch makes a no-op (the second of two admissions of one new ID, an
// acknowledgement of a lease acknowledged just before it) would be logged
// and refused at apply. BatchView records what the logged commands of the
// batch being planned will do, as far as can be told before applying them,
// and such a command is deferred instead: not logged, and prechecked again
// once the batch is applied, when its answer (a conflict, a lost lease, the
// recorded outcome) comes from the applied state. It is linearized after the
// batch, which is within its call, as it was queued before the batch was
// taken and is answered after it is applied.
//
// The view is a prediction, not a proof: if the second precheck finds that
// the command does change the state after all (the claim that was expected
// to supersede its lease took other executions), the command is logged in
// the next batch, never deferred twice. Correctness rests on the second
// precheck alone; the view only decides what is worth deferring. Each kind's
// prediction is a slot of its row in the table of kinds (kinds.go), beside
// the handler it predicts.
type BatchView struct {
	admitted   map[string]struct{}   // IDs a logged admission takes
	started    map[startKey]struct{} // (caller, step key) of logged child starts
	ended      map[string]uint64     // execution -> token of the lease a logged acknowledgement or release ends
	superseded map[string]uint64     // execution -> token of an expired lease a logged claim may supersede
	wakes      map[string]int64      // execution -> earliest wake a logged admission or wake leaves pending
	watches    map[string]struct{}   // execution and keys of logged watches
	cancelled  map[string]struct{}   // executions a logged cancel ends (not their descendants: the view does not walk the tree)

	schedules map[string]*ScheduleDef   // schedule -> the definition a logged put gives it; nil: a logged delete removes it
	claimKeys map[string]struct{}       // request keys of logged keyed claims
	queues    map[string]*QueueSettings // queue -> the settings a logged put gives it; nil: a logged delete removes them
}

type startKey struct{ caller, key string }

// Reset empties the view for the next batch, keeping its maps.
func (v *BatchView) Reset() {
	clear(v.admitted)
	clear(v.started)
	clear(v.ended)
	clear(v.superseded)
	clear(v.wakes)
	clear(v.watches)
	clear(v.cancelled)
	clear(v.schedules)
	clear(v.claimKeys)
	clear(v.queues)
}

// Settles reports whether the logged commands noted so far probably make c
// change nothing.
func (v *BatchView) Settles(c *Command) bool { return kindOf(c.Kind).settles(v, c) }

// Note records what c, about to be logged, will do. st is the state before
// the batch.
func (v *BatchView) Note(c *Command, st *State) { kindOf(c.Kind).note(v, c, st) }

// settlesNever is the prediction of a kind that no earlier command of a
// batch makes a no-op worth deferring.
func settlesNever(*BatchView, *Command) bool { return false }

// noteNothing notes a kind that settles no later command.
func noteNothing(*BatchView, *Command, *State) {}

func (v *BatchView) settlesAdmit(c *Command) bool {
	_, ok := v.admitted[c.ExecutionID]
	return ok && !c.Generated
}

func (v *BatchView) noteAdmit(c *Command, _ *State) {
	if !c.Generated {
		v.admitted = setKey(v.admitted, c.ExecutionID)
	}
	v.wakes = setEarliest(v.wakes, c.ExecutionID, c.Now)
}

func (v *BatchView) settlesWake(c *Command) bool {
	at, ok := v.wakes[c.ExecutionID]
	_, cancelled := v.cancelled[c.ExecutionID] // ignored: it is terminal
	return (ok && at <= c.At) || cancelled
}

func (v *BatchView) noteWake(c *Command, _ *State) {
	v.wakes = setEarliest(v.wakes, c.ExecutionID, c.At)
}

func (v *BatchView) settlesWatch(c *Command) bool {
	_, ok := v.watches[watchID(c)]
	_, cancelled := v.cancelled[c.ExecutionID]
	return ok || cancelled
}

func (v *BatchView) noteWatch(c *Command, _ *State) {
	v.watches = setKey(v.watches, watchID(c))
}

func (v *BatchView) settlesStart(c *Command) bool {
	if _, ok := v.started[startKey{c.ExecutionID, c.Key}]; ok {
		return true
	}
	return v.leaseEnded(c.ExecutionID, c.Token)
}

func (v *BatchView) noteStart(c *Command, _ *State) {
	if v.started == nil {
		v.started = make(map[startKey]struct{})
	}
	v.started[startKey{c.ExecutionID, c.Key}] = struct{}{}
}

// settlesFenced: a write fenced by a lease a logged command ends (or may
// supersede) is refused, or answers the recorded outcome.
func (v *BatchView) settlesFenced(c *Command) bool { return v.leaseEnded(c.ExecutionID, c.Token) }

// settlesClaim: a keyed claim repeats one logged earlier in the batch
// (its answer is the grant that one makes, or a claim afresh if it leased
// nothing: the second precheck decides).
func (v *BatchView) settlesClaim(c *Command) bool {
	_, ok := v.claimKeys[c.RequestKey]
	return c.RequestKey != "" && ok
}

// noteClaim: a claim clears the pending wakes of what it takes, so wakes
// noted before it no longer predict a merge; and it may supersede the
// expired leases it reaches. A keyed one is noted for its repeats.
func (v *BatchView) noteClaim(c *Command, st *State) {
	if c.RequestKey != "" {
		if v.claimKeys == nil {
			v.claimKeys = make(map[string]struct{})
		}
		v.claimKeys[c.RequestKey] = struct{}{}
	}
	clear(v.wakes)
	st.ExpiredLeasesIn(c.Queues, c.Now, c.Limit, func(id string, token uint64) {
		if v.superseded == nil {
			v.superseded = make(map[string]uint64)
		}
		v.superseded[id] = token
	})
}

// noteEndsLease: an acknowledgement or a release ends its lease.
func (v *BatchView) noteEndsLease(c *Command, _ *State) { v.endLease(c.ExecutionID, c.Token) }

func (v *BatchView) settlesAcknowledgeBatch(c *Command) bool {
	for i := range c.Acks {
		if !v.leaseEnded(c.Acks[i].ExecutionID, c.Acks[i].Token) {
			return false
		}
	}
	return true
}

func (v *BatchView) noteAcknowledgeBatch(c *Command, _ *State) {
	for i := range c.Acks {
		v.endLease(c.Acks[i].ExecutionID, c.Acks[i].Token)
	}
}

func (v *BatchView) settlesCancel(c *Command) bool {
	_, ok := v.cancelled[c.ExecutionID]
	return ok
}

// noteCancel: a second cancel of it changes nothing, nor does any write
// fenced by the lease it ends.
func (v *BatchView) noteCancel(c *Command, st *State) {
	v.cancelled = setKey(v.cancelled, c.ExecutionID)
	if e, ok := st.Get(c.ExecutionID); ok && e.Leased() {
		v.endLease(c.ExecutionID, e.LeaseToken)
	}
}

// settlesPutSchedule: a put of the definition a logged put gives.
func (v *BatchView) settlesPutSchedule(c *Command) bool {
	def, ok := v.schedules[c.Schedule.ID]
	return ok && def != nil && *def == *c.Schedule
}

func (v *BatchView) notePutSchedule(c *Command, _ *State) { v.noteSchedule(c.Schedule.ID, c.Schedule) }

// settlesDeleteSchedule: a delete of what a logged delete removes.
func (v *BatchView) settlesDeleteSchedule(c *Command) bool {
	def, ok := v.schedules[c.ScheduleID]
	return ok && def == nil
}

func (v *BatchView) noteDeleteSchedule(c *Command, _ *State) { v.noteSchedule(c.ScheduleID, nil) }

// leaseEnded reports whether a logged command ends (or may supersede) the
// lease with this token.
func (v *BatchView) leaseEnded(id string, token uint64) bool {
	if t, ok := v.ended[id]; ok && t == token {
		return true
	}
	t, ok := v.superseded[id]
	return ok && t == token
}

func (v *BatchView) noteSchedule(id string, def *ScheduleDef) {
	if v.schedules == nil {
		v.schedules = make(map[string]*ScheduleDef)
	}
	v.schedules[id] = def
}

func (v *BatchView) endLease(id string, token uint64) {
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

// watchID identifies a watch command: its execution and its sorted keys.
func watchID(c *Command) string {
	return c.ExecutionID + "\x00" + strings.Join(c.Keys, "\x00")
}
