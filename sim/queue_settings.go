package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/execstore/execstore"
)

// Queue settings in the model: a concurrency limit bounds a queue's current
// leases at every claim, a rate limit the leases granted in every window of
// its period (counted from every grant's time since the rate was put), a
// pause gives nothing; the workload puts and deletes them on the queues
// claims name.

// putQueue is PutQueue in the model.
func (m *model) putQueue(st execstore.QueueSettings, clock int64) result {
	switch {
	case !validID(st.Name) || st.Concurrency < 0 || st.Rate < 0:
		return m.nothing(fail(codeInvalidArg))
	case st.Concurrency > execstore.MaxQueueConcurrency || st.Rate > execstore.MaxQueueRate:
		return m.nothing(fail(codeInvalidArg)) // over a limit: also ErrLimitExceeded, coded as the argument
	case st.Rate > 0 && (st.RatePeriod < execstore.MinRatePeriod || st.RatePeriod > execstore.MaxRatePeriod):
		return m.nothing(fail(codeInvalidArg))
	case st.RatePeriod%time.Millisecond != 0:
		return m.nothing(fail(codeInvalidArg))
	case st.Rate == 0 && st.RatePeriod != 0:
		return m.nothing(fail(codeInvalidArg))
	case st.KeyLimit < 0 || st.KeyLimit > execstore.MaxQueueConcurrency:
		return m.nothing(fail(codeInvalidArg))
	case st.KeyMode != "" && st.KeyMode != execstore.KeyLeased && st.KeyMode != execstore.KeyLive:
		return m.nothing(fail(codeInvalidArg))
	case st.KeyLimit == 0 && st.KeyMode == execstore.KeyLive:
		return m.nothing(fail(codeInvalidArg))
	case st.Concurrency == 0 && !st.Paused && st.Rate == 0 && st.KeyLimit == 0:
		m.deleteQueue(st.Name, clock)
		return result{Queue: &st}
	}
	m.stamp(clock) // it reaches the writer, which answers it from the state
	switch {       // the store answers the mode it keeps: leased by default, none without a limit
	case st.KeyLimit == 0:
		st.KeyMode = ""
	case st.KeyMode == "":
		st.KeyMode = execstore.KeyLeased
	}
	old, ok := m.qsettings[st.Name]
	if ok && old == st {
		return m.nothing(result{Queue: &old})
	}
	if !ok && len(m.qsettings) >= execstore.MaxQueueSettings {
		return m.nothing(fail(codeLimit))
	}
	if m.qsettings == nil {
		m.qsettings, m.granted = map[string]execstore.QueueSettings{}, map[string][]int64{}
	}
	m.qsettings[st.Name] = st
	switch {
	case st.Rate == 0:
		delete(m.granted, st.Name)
	case !ok || old.Rate != st.Rate || old.RatePeriod != st.RatePeriod:
		m.granted[st.Name] = []int64{} // another rate: counted afresh
	}
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
	delete(m.granted, name)
	return result{}
}

// inWindow counts a queue's grants in its rate's window ending at now.
func (m *model) inWindow(queue string, now int64) int {
	period := int64(m.qsettings[queue].RatePeriod)
	n := 0
	for _, at := range m.granted[queue] {
		if at > now-period {
			n++
		}
	}
	return n
}

// rateRoom is how many leases a claim at now may grant of a queue: its rate
// less its grants in the window ending at now; -1 without a rate limit.
func (m *model) rateRoom(queue string, now int64) int {
	st := m.qsettings[queue]
	if st.Rate == 0 {
		return -1
	}
	return max(0, st.Rate-m.inWindow(queue, now))
}

// rateRelease is the earliest time a claim may grant a lease of a queue: the
// time of its rate-th latest grant plus the period, 0 while there are fewer
// grants (or no rate limit).
func (m *model) rateRelease(queue string) int64 {
	st := m.qsettings[queue]
	g := m.granted[queue]
	if st.Rate == 0 || len(g) < st.Rate {
		return 0
	}
	return addClamped(g[len(g)-st.Rate], st.RatePeriod)
}

// checkRateWindows checks the model's own grants: at most the rate in every
// window of the period, the windows that start at each grant being the
// fullest.
func (m *model) checkRateWindows() error {
	for q, g := range m.granted {
		st := m.qsettings[q]
		for i, at := range g {
			n := 0
			for _, b := range g[i:] {
				if b < at+int64(st.RatePeriod) {
					n++
				}
			}
			if n > st.Rate {
				return violationf("queue %s granted %d leases within %v from %s, over its rate of %d", q, n, st.RatePeriod, simTime(timeOf(at)), st.Rate)
			}
		}
	}
	return nil
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
	case r < 55:
		// A rate of a few leases over a period of the clock's ticks (one
		// to 2,000 ms), at times with a concurrency limit too.
		st.Rate, st.RatePeriod = 1+w.pick(3), []time.Duration{time.Second, 2500 * time.Millisecond, 6 * time.Second}[w.pick(3)]
		if w.chance(50) {
			st.Concurrency = 0
		}
	case r < 58:
		st.Rate, st.RatePeriod = []int{-1, execstore.MaxQueueRate + 1, 1, 1, 0}[w.pick(5)], []time.Duration{time.Second, time.Second, 0, execstore.MaxRatePeriod + 1, time.Second}[w.pick(5)]
	case r < 92:
		// A key limit of one or two, leased or live, at times alone.
		st.KeyLimit, st.KeyMode = 1+w.pick(2), []execstore.KeyMode{"", execstore.KeyLeased, execstore.KeyLive}[w.pick(3)]
		if w.chance(50) {
			st.Concurrency = 0
		}
	case r < 94:
		st.KeyLimit, st.KeyMode = []int{-1, execstore.MaxQueueConcurrency + 1, 0, 1}[w.pick(4)], []execstore.KeyMode{"", execstore.KeyLive, "serial"}[w.pick(3)]
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
		return fmt.Sprintf(" %s concurrency=%d paused=%v rate=%d/%v keys=%d/%s", shortID(o.queue.Name), o.queue.Concurrency, o.queue.Paused, o.queue.Rate, o.queue.RatePeriod, o.queue.KeyLimit, o.queue.KeyMode)
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
		if q.Paused || q.Concurrency > 0 || q.Rate > 0 || q.KeyLimit > 0 {
			got[q.Name] = q.QueueSettings
		}
		if n := w.model.parkedIn(q.Name); q.Parked != n {
			return violationf("queue %s has %d executions parked for their keys' slots, the model %d", q.Name, q.Parked, n)
		}
		if n := w.model.leasedIn(q.Name); q.Leased != n {
			return violationf("queue %s has %d current leases, the model %d", q.Name, q.Leased, n)
		}
		// Granted counts at the store's time (Store.Now), which a request
		// that wrote nothing does not move, while the model's does.
		if n := w.model.inWindow(q.Name, s.Now().UnixNano()); q.Rate > 0 && q.Granted != n {
			return violationf("queue %s granted %d leases in its rate's window, the model %d", q.Name, q.Granted, n)
		}
	}
	if !maps.Equal(got, w.model.qsettings) && (len(got) > 0 || len(w.model.qsettings) > 0) {
		return violationf("the queue settings differ from the model: store %v, model %v", got, w.model.qsettings)
	}
	return w.model.checkRateWindows()
}

// rateEdge moves the clock to exactly a rate-limited queue's release time,
// or a nanosecond before it, and claims that queue: a grant leaves the
// window exactly a period after it was made, not a tick sooner. It reports
// whether a queue had a release time to come.
func (w *world) rateEdge() (bool, error) {
	var queues []string
	for _, q := range slices.Sorted(maps.Keys(w.model.granted)) {
		if at := w.model.rateRelease(q); at > w.clock.nanos() {
			queues = append(queues, q)
		}
	}
	if len(queues) == 0 {
		return false, nil
	}
	q := queues[w.pick(len(queues))]
	at := w.model.rateRelease(q) - int64(w.pick(2))
	w.clock.set(at)
	w.tr.line("%d clock to %s, the rate release of %s", w.ops, simTime(w.clock.Now()), shortID(q))
	w.cover("boundary", "claim at exactly a rate's release")
	o := w.genClaim()
	o.queues = []string{q}
	return true, w.plain(o)
}
