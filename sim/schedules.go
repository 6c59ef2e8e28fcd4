package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/robfig/cron/v3"

	"github.com/execstore/execstore"
)

// Schedules in the simulator. The store runs on a clock whose timers never
// fire: its writer looks for due occurrences only when it takes requests,
// never on a timer, so that what a run does depends on the seed and not on
// timing.
// Every write is then preceded by the admission of the occurrences due at its
// time, which is what the model does when it stamps a write (model.stamp).
// The workload puts, replaces and deletes a few schedules (some invalid, some
// past the limit), admits occurrences' IDs itself now and then (the caller
// wins), and moves the clock past occurrences by ticks and leaps, across
// crashes, restarts and snapshots: an occurrence reached more than
// simScheduleGrace late was missed, and each schedule's catch-up policy
// decides what becomes of it.

const (
	simSchedules       = 3
	simScheduleCatchUp = 3
	simScheduleGrace   = 10 * time.Second
)

// msched is a schedule in the model.
type msched struct {
	def    execstore.Schedule // as put, the catch-up policy spelt out
	next   int64              // 0: none left
	last   int64
	caught int // missed occurrences admitted in a row
}

// schedArg is a PutSchedule's schedule and whether API.md's rules and the
// README's accept it.
type schedArg struct {
	name  string
	sc    execstore.Schedule
	valid bool
}

// scheduleCatalog's End is an offset from the schedule's start (the
// workload sets Start near the clock).
var scheduleCatalog = []schedArg{
	{name: "every-2s-all-ends", sc: execstore.Schedule{Interval: 2 * time.Second, CatchUp: execstore.CatchUpAll,
		End: time.Unix(0, 20e9)}, valid: true},
	{name: "every-5s-all-ends", sc: execstore.Schedule{Interval: 5 * time.Second, CatchUp: execstore.CatchUpAll,
		End: time.Unix(0, 60e9), Params: []byte(`{"a":1}`)}, valid: true},
	{name: "every-15s-latest", sc: execstore.Schedule{Interval: 15 * time.Second}, valid: true},
	{name: "every-10s-queued", sc: execstore.Schedule{Interval: 10 * time.Second, Queue: "q-x"}, valid: true},
	{name: "every-30s-none", sc: execstore.Schedule{Interval: 30 * time.Second, CatchUp: execstore.CatchUpNone}, valid: true},
	{name: "minutely-all", sc: execstore.Schedule{Cron: "* * * * *", CatchUp: execstore.CatchUpAll}, valid: true},
	{name: "odd-minutes-latest", sc: execstore.Schedule{Cron: "1-59/2 * * * *", CronOffset: -90 * time.Minute,
		CatchUp: execstore.CatchUpLatest}, valid: true},
	{name: "minutely-none-ends", sc: execstore.Schedule{Cron: "* * * * *", CatchUp: execstore.CatchUpNone,
		End: time.Unix(0, 180e9)}, valid: true},
	{name: "too-often", sc: execstore.Schedule{Interval: time.Second - 1}},
	{name: "both", sc: execstore.Schedule{Interval: time.Second, Cron: "* * * * *"}},
	{name: "zone-name", sc: execstore.Schedule{Cron: "CRON_TZ=Europe/Paris * * * * *"}},
	{name: "bad-params", sc: execstore.Schedule{Interval: time.Second, Params: []byte(`[1]`)}},
	{name: "bad-policy", sc: execstore.Schedule{Interval: time.Second, CatchUp: "some"}},
}

// scheduleIDs are the IDs the workload uses: more than simSchedules, and one
// too long for its occurrences' IDs.
var scheduleIDs = []string{"sch-a", "sch-b", "sch-c", "sch-d", strings.Repeat("s", execstore.ScheduleIDBytes+1)}

// ---- The model ---------------------------------------------------------------

// putSchedule is PutSchedule by the README: the limit is checked before the
// put reaches the writer; an identical definition changes nothing; a new or
// changed one starts at its first occurrence after the put.
func (m *model) putSchedule(a schedArg, clock int64) result {
	if !a.valid || !validID(a.sc.ID) || len(a.sc.ID) > execstore.ScheduleIDBytes {
		return m.nothing(fail(codeInvalidArg))
	}
	def := a.sc
	if def.CatchUp == "" {
		def.CatchUp = execstore.CatchUpLatest
	}
	old := m.scheds[def.ID]
	if old == nil && len(m.scheds) >= simSchedules {
		return m.nothing(fail(codeLimit))
	}
	now := m.stamp(clock)
	if old != nil && equalDefs(old.def, def) {
		return m.nothing(result{Schedule: old.api()})
	}
	s := &msched{def: def}
	if old != nil {
		s.last = old.last
	}
	s.next = s.after(now)
	if m.scheds == nil {
		m.scheds = map[string]*msched{}
	}
	m.scheds[def.ID] = s
	return result{Schedule: s.api()}
}

func (m *model) deleteSchedule(id string, clock int64) result {
	if !validID(id) || len(id) > execstore.ScheduleIDBytes {
		return m.nothing(fail(codeSchedNotFound))
	}
	m.stamp(clock)
	if m.scheds[id] == nil {
		return m.nothing(fail(codeSchedNotFound))
	}
	delete(m.scheds, id)
	return result{}
}

func (m *model) getSchedule(id string) result {
	s := m.scheds[id]
	if s == nil {
		return fail(codeSchedNotFound)
	}
	return result{Schedule: s.api()}
}

func (m *model) listSchedules() result {
	out := []execstore.Schedule{}
	for _, id := range slices.Sorted(mapKeys(m.scheds)) {
		out = append(out, *m.scheds[id].api())
	}
	return result{Schedules: out}
}

// reachOccurrences is what the writer does before every batch: each
// occurrence due at now is reached, and admitted under its occurrence ID
// (unless that ID exists) if it is on time (at most simScheduleGrace late)
// or its catch-up policy keeps it: CatchUpAll up to simScheduleCatchUp
// missed ones in a row, the rest of those missed skipped; CatchUpLatest the
// latest missed one; CatchUpNone none. It reports whether it reached any
// (the writer then logs a fire of the schedules, skipped occurrences too).
func (m *model) reachOccurrences(now int64) bool {
	reached := false
	late := now - int64(simScheduleGrace)
	// The writer reaches the schedules in the order of their next
	// occurrence (ties by ID), each one's due occurrences in a row: the
	// order of the admissions, and so of their positions in the change feed.
	ids := slices.SortedFunc(mapKeys(m.scheds), func(a, b string) int {
		if c := compare(m.scheds[a].next, m.scheds[b].next); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, id := range ids {
		s := m.scheds[id]
		for s.next != 0 && s.next <= now {
			at := s.next
			switch {
			case at >= late:
				m.admitOccurrence(s, at, now)
				s.next, s.caught = s.after(at), 0
			case s.def.CatchUp == execstore.CatchUpAll && s.caught < simScheduleCatchUp:
				m.admitOccurrence(s, at, now)
				s.next, s.caught = s.after(at), s.caught+1
			case s.def.CatchUp == execstore.CatchUpLatest && s.lastBefore(late) > at:
				s.next, s.caught = s.lastBefore(late), 0
			case s.def.CatchUp == execstore.CatchUpLatest:
				m.admitOccurrence(s, at, now)
				s.next, s.caught = s.after(at), s.caught+1
			default:
				latest := s.lastBefore(late) // the latest skipped (walked from s.next)
				s.next, s.caught = s.atOrAfter(late), 0
				at = max(at, latest)
			}
			s.last = at
			reached = true
		}
	}
	return reached
}

func (m *model) admitOccurrence(s *msched, at, now int64) {
	id := s.def.ID + "@" + time.Unix(0, at).UTC().Format(time.RFC3339Nano)
	if m.execs[id] != nil {
		return // a caller admitted it first
	}
	m.create(&mexec{id: id, workflow: s.def.WorkflowID, params: slices.Clone(s.def.Params),
		status: execstore.StatusAdmitted, admittedAt: now, updatedAt: now, due: now, queue: s.def.Queue})
}

func (s *msched) api() *execstore.Schedule {
	sc := s.def
	sc.Params = slices.Clone(sc.Params)
	sc.NextAt, sc.LastAt = timeOf(s.next), timeOf(s.last)
	return &sc
}

// atOrAfter is the schedule's first occurrence at or after x (and its start),
// 0 if there is none before its end: every Interval from Start, or when the
// cron expression, read at CronOffset from UTC, matches.
func (s *msched) atOrAfter(x int64) int64 {
	start := s.def.Start.UnixNano()
	x = max(x, start)
	var t int64
	if s.def.Interval > 0 {
		every := int64(s.def.Interval)
		t = start + (x-start+every-1)/every*every
	} else {
		spec, err := cron.ParseStandard(s.def.Cron)
		if err != nil {
			panic("sim: a valid schedule does not parse: " + err.Error())
		}
		in := time.Unix(0, x-1).In(time.FixedZone("", int(s.def.CronOffset/time.Second)))
		t = spec.Next(in).UnixNano()
	}
	if !s.def.End.IsZero() && t > s.def.End.UnixNano() {
		return 0
	}
	return t
}

func (s *msched) after(t int64) int64 { return s.atOrAfter(t + 1) }

// lastBefore is the last occurrence before x, walked forward from the next
// one (the workload's schedules reach a few hundred occurrences at most).
func (s *msched) lastBefore(x int64) int64 {
	last := int64(0)
	for t := s.next; t != 0 && t < x; t = s.after(t) {
		last = t
	}
	return last
}

func equalDefs(a, b execstore.Schedule) bool {
	a.NextAt, a.LastAt, b.NextAt, b.LastAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return equalSchedules(&a, &b)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ---- The workload --------------------------------------------------------------

func (w *world) genPutSchedule() *op {
	a := scheduleCatalog[w.pick(len(scheduleCatalog))]
	if w.chance(70) {
		a = scheduleCatalog[w.pick(7)] // mostly valid ones
	}
	now := w.clock.Now()
	a.sc.ID = scheduleIDs[w.pick(len(scheduleIDs))]
	a.sc.WorkflowID = "wf-sched"
	a.sc.Start = now.Add(w.pickDuration(-30*time.Second, 30*time.Second))
	if !a.sc.End.IsZero() {
		a.sc.End = a.sc.Start.Add(time.Duration(a.sc.End.UnixNano()))
	}
	if prev := w.model.scheds[a.sc.ID]; prev != nil && w.chance(30) {
		a = schedArg{name: "same-again", sc: prev.def, valid: true}
	}
	return &op{kind: opPutSchedule, sched: a}
}

func (w *world) pickScheduleID() string {
	if w.chance(90) {
		return scheduleIDs[w.pick(4)]
	}
	return []string{"", scheduleIDs[4]}[w.pick(2)]
}

func (w *world) genDeleteSchedule() *op {
	return &op{kind: opDeleteSchedule, id: w.pickScheduleID()}
}

func (w *world) genGetSchedule() *op {
	if w.chance(25) {
		return &op{kind: opListSchedules}
	}
	return &op{kind: opGetSchedule, id: w.pickScheduleID()}
}

// occurrenceIDs are the IDs of the schedules' next occurrences, for a caller
// that admits one first.
func (w *world) occurrenceIDs() []string {
	var out []string
	for _, id := range slices.Sorted(mapKeys(w.model.scheds)) {
		if s := w.model.scheds[id]; s.next != 0 {
			out = append(out, id+"@"+time.Unix(0, s.next).UTC().Format(time.RFC3339Nano))
		}
	}
	return out
}

// deleteSchedules ends the schedules before the liveness phase, whose rounds
// move the clock and would otherwise keep admitting occurrences.
func (w *world) deleteSchedules() error {
	for _, id := range slices.Sorted(mapKeys(w.model.scheds)) {
		if _, err := w.do(&op{kind: opDeleteSchedule, id: id}); err != nil {
			return err
		}
	}
	return nil
}

// ---- Calls and checks --------------------------------------------------------

func (o *op) callSchedule(s *execstore.Store) result {
	ctx := context.Background()
	switch o.kind {
	case opPutSchedule:
		sc, err := s.PutSchedule(ctx, o.sched.sc)
		if err != nil {
			return withCode(result{}, err)
		}
		return result{Schedule: &sc}
	case opDeleteSchedule:
		return withCode(result{}, s.DeleteSchedule(ctx, o.id))
	case opGetSchedule:
		sc, err := s.GetSchedule(ctx, o.id)
		if err != nil {
			return withCode(result{}, err)
		}
		return result{Schedule: &sc}
	case opListSchedules:
		list, err := s.ListSchedules(ctx)
		return withCode(result{Schedules: list}, err)
	}
	panic("sim: unknown operation " + string(o.kind))
}

func (o *op) applySchedule(m *model, clock int64) result {
	switch o.kind {
	case opPutSchedule:
		return m.putSchedule(o.sched, clock)
	case opDeleteSchedule:
		return m.deleteSchedule(o.id, clock)
	case opGetSchedule:
		return m.getSchedule(o.id)
	case opListSchedules:
		return m.listSchedules()
	}
	panic("sim: unknown operation " + string(o.kind))
}

// equalSchedules is go-cmp's equality for schedules (nil and empty params
// differ, times compare as instants), written out as equalRecords is.
func equalSchedules(a, b *execstore.Schedule) bool {
	return a.ID == b.ID && a.WorkflowID == b.WorkflowID && equalBytes(a.Params, b.Params) &&
		a.Interval == b.Interval && a.Cron == b.Cron && a.CronOffset == b.CronOffset &&
		a.Start.Equal(b.Start) && a.End.Equal(b.End) && a.CatchUp == b.CatchUp &&
		a.NextAt.Equal(b.NextAt) && a.LastAt.Equal(b.LastAt) && a.Queue == b.Queue
}

func equalSchedulePtr(a, b *execstore.Schedule) bool {
	return (a == nil) == (b == nil) && (a == nil || equalSchedules(a, b))
}

func equalScheduleLists(a, b []execstore.Schedule) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalSchedules(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// checkSchedules compares every schedule with the model's.
func (w *world) checkSchedules(s *execstore.Store) error {
	got := (&op{kind: opListSchedules}).callSchedule(s)
	if exp := w.model.listSchedules(); !equalResults(exp, got) {
		return violationf("the schedules differ from the model (-model +store):\n%s", cmp.Diff(exp.Schedules, got.Schedules))
	}
	return nil
}

func describeSchedule(sc *execstore.Schedule) string {
	return fmt.Sprintf("%s next=%s last=%s", shortID(sc.ID), simTime(sc.NextAt), simTime(sc.LastAt))
}
