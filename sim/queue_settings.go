package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/execstore/execstore"
)

// Queue settings in the model: a concurrency limit bounds a queue's current
// leases at every claim, a pause gives nothing; the workload puts and
// deletes them on the queues claims name.

// putQueue is PutQueue in the model.
func (m *model) putQueue(st execstore.QueueSettings, clock int64) result {
	switch {
	case !validID(st.Name) || st.Concurrency < 0:
		return m.nothing(fail(codeInvalidArg))
	case st.Concurrency > execstore.MaxQueueConcurrency:
		return m.nothing(fail(codeInvalidArg)) // over a limit: also ErrLimitExceeded, coded as the argument
	case st.Concurrency == 0 && !st.Paused:
		m.deleteQueue(st.Name, clock)
		return result{Queue: &st}
	}
	m.stamp(clock) // it reaches the writer, which answers it from the state
	old, ok := m.qsettings[st.Name]
	if ok && old == st {
		return m.nothing(result{Queue: &old})
	}
	if !ok && len(m.qsettings) >= execstore.MaxQueueSettings {
		return m.nothing(fail(codeLimit))
	}
	if m.qsettings == nil {
		m.qsettings = map[string]execstore.QueueSettings{}
	}
	m.qsettings[st.Name] = st
	return result{Queue: &st}
}

// deleteQueue is DeleteQueue in the model.
func (m *model) deleteQueue(name string, clock int64) result {
	if !validID(name) {
		return m.nothing(fail(codeInvalidArg))
	}
	m.stamp(clock)
	if _, ok := m.qsettings[name]; !ok {
		return m.nothing(result{})
	}
	delete(m.qsettings, name)
	return result{}
}

// leasedIn counts the current leases of a queue's executions.
func (m *model) leasedIn(queue string) int {
	n := 0
	for _, id := range m.order {
		if e := m.execs[id]; e.token != 0 && !e.terminal() && e.queueName() == queue {
			n++
		}
	}
	return n
}

// room is how many of a queue's due executions a claim may lease now: -1
// when it is paused (nothing at all), its limit less its current leases
// when it has one, else unbounded (limit).
func (m *model) room(queue string, limit int) int {
	st, ok := m.qsettings[queue]
	switch {
	case !ok:
		return limit
	case st.Paused:
		return -1
	case st.Concurrency > 0:
		return max(0, st.Concurrency-m.leasedIn(queue))
	}
	return limit
}

// heldBack reports whether a claim cannot take e now for its queue's
// settings: its queue is paused, or it is due and its queue has no room.
func (m *model) heldBack(e *mexec) bool {
	if len(m.qsettings) == 0 {
		return false
	}
	r := m.room(e.queueName(), 1)
	return r < 0 || (r == 0 && e.token == 0)
}

// heldBackNow reports whether an execution claimable at the model's time is
// held back by its queue's pause, or by its queue's limit.
func (m *model) heldBackNow() (paused, full bool) {
	for _, id := range m.order {
		e := m.execs[id]
		if at, ok := e.claimable(); ok && at <= m.last && m.heldBack(e) {
			if m.qsettings[e.queueName()].Paused {
				paused = true
			} else {
				full = true
			}
		}
	}
	return paused, full
}

// genPutQueue puts settings on one of the queues claims name: mostly a small
// limit, at times a pause or the defaults, rarely settings the store
// refuses.
func (w *world) genPutQueue() *op {
	st := execstore.QueueSettings{Name: simQueues[w.pick(len(simQueues))], Concurrency: 1 + w.pick(3)}
	switch r := w.pick(100); {
	case r < 20:
		st.Paused = true
	case r < 30:
		st.Concurrency = 0 // the defaults: the settings go
	case r < 33:
		st.Concurrency = []int{-1, execstore.MaxQueueConcurrency + 1}[w.pick(2)]
	case r < 35:
		st.Name = invalidQueues[w.pick(len(invalidQueues))]
	}
	if prev, ok := w.model.qsettings[st.Name]; ok && w.chance(5) {
		st = prev // the same again: writes nothing
	}
	return &op{kind: opPutQueue, queue: st}
}

func (w *world) genDeleteQueue() *op {
	return &op{kind: opDeleteQueue, id: simQueues[w.pick(len(simQueues))]}
}

// deleteQueues lifts every queue's settings before the liveness phase,
// whose claims must reach every execution.
func (w *world) deleteQueues() error {
	for _, name := range slices.Sorted(mapKeys(w.model.qsettings)) {
		if _, err := w.do(&op{kind: opDeleteQueue, id: name}); err != nil {
			return err
		}
	}
	return nil
}

func (o *op) callQueue(s *execstore.Store) result {
	ctx := context.Background()
	switch o.kind {
	case opPutQueue:
		st, err := s.PutQueue(ctx, o.queue)
		if err != nil {
			return withCode(result{}, err)
		}
		return result{Queue: &st}
	case opDeleteQueue:
		return withCode(result{}, s.DeleteQueue(ctx, o.id))
	}
	panic("sim: unknown operation " + string(o.kind))
}

func (o *op) applyQueue(m *model, clock int64) result {
	switch o.kind {
	case opPutQueue:
		return m.putQueue(o.queue, clock)
	case opDeleteQueue:
		return m.deleteQueue(o.id, clock)
	}
	panic("sim: unknown operation " + string(o.kind))
}

func (o *op) describeQueue() string {
	if o.kind == opPutQueue {
		return fmt.Sprintf(" %s concurrency=%d paused=%v", shortID(o.queue.Name), o.queue.Concurrency, o.queue.Paused)
	}
	return " " + shortID(o.id)
}

func equalQueuePtr(a, b *execstore.QueueSettings) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// checkQueueSettings compares the store's queue settings with the model's,
// and each queue's leases with its limit: a claim never takes a queue past
// it (a lower limit put over more leases is the only way over).
func (w *world) checkQueueSettings(s *execstore.Store) error {
	list, err := s.ListQueues(context.Background(), "")
	if err != nil {
		return violationf("ListQueues: %v", err)
	}
	got := map[string]execstore.QueueSettings{}
	for _, q := range list {
		if q.Paused || q.Concurrency > 0 {
			got[q.Name] = q.QueueSettings
		}
		if n := w.model.leasedIn(q.Name); q.Leased != n {
			return violationf("queue %s has %d current leases, the model %d", q.Name, q.Leased, n)
		}
	}
	if !maps.Equal(got, w.model.qsettings) && (len(got) > 0 || len(w.model.qsettings) > 0) {
		return violationf("the queue settings differ from the model: store %v, model %v", got, w.model.qsettings)
	}
	return nil
}
