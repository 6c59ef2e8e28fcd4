package execstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/execstore/execstore/fsm"
)

// Schedules. A schedule admits an execution for each of its occurrences,
// under the execution ID "<schedule ID>@<occurrence time, RFC 3339 in UTC>"
// (ScheduleOccurrenceID), so that each occurrence is admitted at most once
// ever: across restarts, snapshots and crashes, and against a caller who
// admits that ID itself first (the caller wins, and the occurrence is
// skipped without error). The writer admits occurrences in logged commands:
// it reads the clock before each batch, and, while a schedule exists, keeps a
// timer for the next occurrence.

// CatchUp is what happens to a schedule's missed occurrences: those the store
// reached later than Options.ScheduleGrace after they came, because it was
// down or its clock jumped.
type CatchUp string

const (
	// CatchUpLatest admits only the latest missed occurrence (the default).
	CatchUpLatest CatchUp = "latest"
	// CatchUpAll admits every missed occurrence, oldest first, at most
	// Limits.ScheduleCatchUp in a row per schedule; past that, the rest of
	// those missed are skipped.
	CatchUpAll CatchUp = "all"
	// CatchUpNone admits no missed occurrence.
	CatchUpNone CatchUp = "none"
)

// Schedule admits an execution of WorkflowID with Params at each of its
// occurrences: every Interval from Start, or at the times a cron expression
// names, from Start until End.
type Schedule struct {
	// ID is 1 to ScheduleIDBytes bytes of UTF-8 without control characters, so
	// that every occurrence's execution ID fits IDBytes.
	ID         string
	WorkflowID string          // required; each occurrence's workflow
	Params     json.RawMessage // each occurrence's params, byte for byte: nil or a JSON object within Limits.EventBytes

	// Interval: an occurrence at Start, Start+Interval, Start+2*Interval...
	// at least Limits.ScheduleInterval. Or Cron, not both.
	Interval time.Duration
	// Cron is a standard cron expression: five fields (minute, hour, day of
	// month, month, day of week) or a descriptor (@yearly, @monthly, @weekly,
	// @daily, @midnight, @hourly), as github.com/robfig/cron/v3 parses them.
	// Its fields are read at CronOffset from UTC (zero: UTC), a fixed offset:
	// time-zone names are refused, so that no occurrence depends on a
	// time-zone database.
	Cron       string
	CronOffset time.Duration // whole seconds, less than 24 hours either way

	Start   time.Time // required: no occurrence before it
	End     time.Time // optional: no occurrence after it
	CatchUp CatchUp   // "" means CatchUpLatest

	// Queue is each occurrence's queue (AdmitRequest.Queue): "" (the
	// default) is the queue named after WorkflowID.
	Queue string

	// Set by the store, ignored by PutSchedule.
	NextAt time.Time // the next occurrence; zero when none is left
	LastAt time.Time // the latest occurrence reached, admitted or skipped; zero if none
}

// ScheduleIDBytes is the longest schedule ID: an occurrence's execution ID
// adds "@" and up to 30 bytes of time to it.
const ScheduleIDBytes = IDBytes - 1 - fsm.OccurrenceTimeBytes

// ScheduleOccurrenceID is the execution ID of a schedule's occurrence at:
// the schedule's ID, "@", and the time in RFC 3339 in UTC with as many
// fraction digits as it needs (time.RFC3339Nano), such as
// "nightly-settlement@2026-01-02T02:00:00Z".
func ScheduleOccurrenceID(scheduleID string, at time.Time) string {
	return scheduleID + "@" + at.UTC().Format(time.RFC3339Nano)
}

// PutSchedule creates the schedule, or replaces the one with its ID. It
// returns the schedule as stored, with its next occurrence.
//
// The first occurrence of a new or changed schedule is its first at or after
// Start and after the moment the store applies the put: occurrences already
// past are not admitted, and an occurrence already reached is never reached
// again (its execution ID exists anyway). A put of exactly the definition
// stored changes nothing, not even the next occurrence, and writes nothing.
//
// Errors: ErrInvalidArgument (nothing written), ErrLimitExceeded (there are
// Limits.Schedules schedules already).
func (s *Store) PutSchedule(ctx context.Context, sc Schedule) (Schedule, error) {
	def, err := scheduleDef(&sc, &s.limits)
	if err != nil {
		return Schedule{}, err
	}
	var full bool
	if err := s.read(ctx, func(st *fsm.State) {
		_, exists := st.Schedule(def.ID)
		full = !exists && st.ScheduleCount() >= s.limits.Schedules
	}); err != nil {
		return Schedule{}, err
	}
	c := fsm.Command{Kind: fsm.KindPutSchedule, Schedule: &def, Limit: s.limits.Schedules}
	if full {
		return Schedule{}, resultErr(&fsm.Result{Code: fsm.CodeLimitExceeded}, &c)
	}
	res, err := s.do(ctx, &c)
	if err != nil {
		return Schedule{}, err
	}
	if err := resultErr(&res, &c); err != nil {
		return Schedule{}, err
	}
	return scheduleFromFSM(res.Schedule), nil
}

// DeleteSchedule removes a schedule: it admits nothing more. The executions
// it admitted stay. Errors: ErrScheduleNotFound (nothing written).
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	if checkID("", id) != "" || len(id) > ScheduleIDBytes {
		return errorf(ErrScheduleNotFound, "%q", id)
	}
	c := fsm.Command{Kind: fsm.KindDeleteSchedule, ScheduleID: id}
	res, err := s.do(ctx, &c)
	if err != nil {
		return err
	}
	return resultErr(&res, &c)
}

// GetSchedule returns a schedule. Errors: ErrScheduleNotFound.
func (s *Store) GetSchedule(ctx context.Context, id string) (Schedule, error) {
	var (
		sc fsm.Schedule
		ok bool
	)
	if err := s.read(ctx, func(st *fsm.State) { sc, ok = st.Schedule(id) }); err != nil {
		return Schedule{}, err
	}
	if !ok {
		return Schedule{}, errorf(ErrScheduleNotFound, "%q", id)
	}
	return scheduleFromFSM(&sc), nil
}

// ListSchedules returns every schedule, in ID order.
func (s *Store) ListSchedules(ctx context.Context) ([]Schedule, error) {
	var out []Schedule
	err := s.read(ctx, func(st *fsm.State) {
		out = make([]Schedule, 0, st.ScheduleCount())
		st.Schedules(func(sc *fsm.Schedule) bool {
			out = append(out, scheduleFromFSM(sc))
			return true
		})
	})
	return out, err
}

var catchUps = map[CatchUp]fsm.CatchUp{"": fsm.CatchUpLatest, CatchUpLatest: fsm.CatchUpLatest, CatchUpAll: fsm.CatchUpAll, CatchUpNone: fsm.CatchUpNone}

func scheduleFromFSM(sc *fsm.Schedule) Schedule {
	out := Schedule{
		ID: sc.ID, WorkflowID: sc.WorkflowID,
		Interval: time.Duration(sc.Every), Cron: sc.Cron, CronOffset: time.Duration(sc.Offset) * time.Second,
		Start: timeFromNanos(sc.Start), End: timeFromNanos(sc.End),
		NextAt: timeFromNanos(sc.Next), LastAt: timeFromNanos(sc.Last),
		Queue: sc.Queue,
	}
	if sc.HasParams {
		out.Params = json.RawMessage(sc.Params)
	}
	for k, v := range catchUps {
		if v == sc.CatchUp && k != "" {
			out.CatchUp = k
		}
	}
	return out
}

// scheduleDef validates a schedule and returns its definition for the state
// machine. Caller's goroutine.
func scheduleDef(sc *Schedule, lim *Limits) (fsm.ScheduleDef, error) {
	d := fsm.ScheduleDef{ID: sc.ID, WorkflowID: sc.WorkflowID, Every: int64(sc.Interval), Cron: sc.Cron}
	if err := idError(ErrInvalidArgument, "schedule ID", sc.ID); err != nil {
		return d, err
	}
	if len(sc.ID) > ScheduleIDBytes {
		return d, overLimit(ErrInvalidArgument, "schedule ID is longer than %d bytes (its occurrences' IDs add a time to it)", ScheduleIDBytes)
	}
	if err := idError(ErrInvalidArgument, "workflow ID", sc.WorkflowID); err != nil {
		return d, err
	}
	if sc.Queue != "" && sc.Queue != sc.WorkflowID {
		if err := idError(ErrInvalidArgument, "queue", sc.Queue); err != nil {
			return d, err
		}
		d.Queue = sc.Queue
	}
	if len(sc.Params) > lim.EventBytes {
		return d, overLimit(ErrInvalidArgument, "params are %d bytes, more than the limit of %d", len(sc.Params), lim.EventBytes)
	}
	if msg := checkParams(sc.Params); msg != "" {
		return d, invalidArg("%s", msg)
	}
	if sc.Params != nil {
		d.Params, d.HasParams = string(sc.Params), true
	}
	policy, ok := catchUps[sc.CatchUp]
	if !ok {
		return d, invalidArg("catch-up policy %q is none of %q, %q and %q", sc.CatchUp, CatchUpLatest, CatchUpAll, CatchUpNone)
	}
	d.CatchUp = policy
	if err := checkRecurrence(sc, lim, &d); err != nil {
		return d, err
	}
	start, ok := nanosFromTime(sc.Start)
	if sc.Start.IsZero() || !ok || !sc.Start.After(earliestNanos) {
		return d, invalidArg("start %v is not a time after the Unix epoch and before 2262", sc.Start)
	}
	d.Start = start
	if !sc.End.IsZero() {
		end, ok := nanosFromTime(sc.End)
		if !ok || end < start {
			return d, invalidArg("end %v is before start, or after 2262", sc.End)
		}
		d.End = end
	}
	if _, err := specOf(&d); err != nil {
		return d, invalidArg("cron expression %q: %v", sc.Cron, err)
	}
	return d, nil
}

// checkRecurrence validates the interval or the cron expression.
func checkRecurrence(sc *Schedule, lim *Limits, d *fsm.ScheduleDef) error {
	switch {
	case (sc.Interval != 0) == (sc.Cron != ""):
		return invalidArg("a schedule needs an interval or a cron expression, not both")
	case sc.Cron == "" && sc.Interval < lim.ScheduleInterval:
		return overLimit(ErrInvalidArgument, "interval %v is shorter than the limit of %v", sc.Interval, lim.ScheduleInterval)
	case sc.Cron == "" && sc.CronOffset != 0:
		return invalidArg("a cron offset without a cron expression")
	case len(sc.Cron) > fsm.MaxCronBytes:
		return overLimit(ErrInvalidArgument, "cron expression is longer than %d bytes", fsm.MaxCronBytes)
	case sc.CronOffset%time.Second != 0 || sc.CronOffset <= -24*time.Hour || sc.CronOffset >= 24*time.Hour:
		return invalidArg("cron offset %v is not whole seconds under 24 hours", sc.CronOffset)
	}
	cronUpper := strings.ToUpper(strings.TrimSpace(sc.Cron))
	if strings.HasPrefix(cronUpper, "TZ=") || strings.HasPrefix(cronUpper, "CRON_TZ=") || strings.HasPrefix(cronUpper, "@EVERY") {
		return invalidArg("cron expression %q: time zones and @every are not accepted (use CronOffset and Interval)", sc.Cron)
	}
	d.Offset = int32(sc.CronOffset / time.Second)
	return nil
}

// occurrences computes a schedule's occurrence times. The state machine keeps
// none of this: the writer computes each time and logs it (see fsm's
// schedule.go).
type occurrences struct {
	start, end, every int64
	cron              *cron.SpecSchedule // with a fixed zone
}

func specOf(d *fsm.ScheduleDef) (occurrences, error) {
	o := occurrences{start: d.Start, end: d.End, every: d.Every}
	if d.Cron == "" {
		return o, nil
	}
	parsed, err := cron.ParseStandard(d.Cron)
	if err != nil {
		return o, err
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return o, fmt.Errorf("not a cron expression of fields")
	}
	spec.Location = time.FixedZone("", int(d.Offset))
	o.cron = spec
	return o, nil
}

// atOrAfter returns the first occurrence at or after x, or 0 if none is left.
func (o *occurrences) atOrAfter(x int64) int64 {
	x = max(x, o.start)
	var t int64
	if o.cron == nil {
		k := (x - o.start + o.every - 1) / o.every
		if k > (maxNanos-o.start)/o.every {
			return 0
		}
		t = o.start + k*o.every
	} else {
		n := o.cron.Next(time.Unix(0, x-1).UTC())
		v, ok := nanosFromTime(n)
		if n.IsZero() || !ok {
			return 0
		}
		t = v
	}
	if o.end != 0 && t > o.end {
		return 0
	}
	return t
}

// after returns the first occurrence after t, or 0.
func (o *occurrences) after(t int64) int64 {
	if t >= maxNanos {
		return 0
	}
	return o.atOrAfter(t + 1)
}

// lastBefore returns the last occurrence before x, or 0 if there is none.
// For a cron expression, which cannot be run backwards, it looks for one in
// a window before x that doubles until it finds one, then steps forward
// through that window: the steps are the occurrences of a window the one
// before it had none of.
func (o *occurrences) lastBefore(x int64) int64 {
	if o.end != 0 && x > o.end {
		x = o.end + 1
	}
	if x <= o.start {
		return 0
	}
	if o.cron == nil {
		return o.start + (x-1-o.start)/o.every*o.every
	}
	for w := int64(time.Minute); ; w *= 2 {
		from := max(x-w, o.start)
		if t := o.atOrAfter(from); t != 0 && t < x {
			for {
				n := o.after(t)
				if n == 0 || n >= x {
					return t
				}
				t = n
			}
		}
		if from == o.start || w > maxNanos/4 {
			return 0
		}
	}
}

const maxNanos = int64(1<<63 - 1)

// ---- The writer's side ---------------------------------------------------------

// scheduleDefaults fills in the schedules' Options defaults.
func scheduleDefaults(o *Options) {
	if o.ScheduleGrace <= 0 {
		o.ScheduleGrace = time.Minute
	}
}

// firstOccurrence sets a put-schedule command's first occurrence: the
// schedule's first at or after its start and after the command's time.
// Writer goroutine, once the command is stamped.
func firstOccurrence(c *fsm.Command) {
	o, err := specOf(c.Schedule)
	if err != nil {
		panic("execstore: a validated schedule does not parse: " + err.Error())
	}
	c.At = o.after(c.Now)
}

// planFires decides what happens to each occurrence due at now, for the
// schedules due earliest first, at most fsm.MaxFiresPerCommand of them:
//
//   - one reached within Options.ScheduleGrace of its time is on time, and
//     admitted;
//   - a missed one is admitted or skipped by the schedule's catch-up policy:
//     CatchUpAll admits it unless Limits.ScheduleCatchUp missed ones were
//     admitted in a row, and then skips the rest of those missed;
//     CatchUpLatest skips to the latest missed one and admits it;
//     CatchUpNone skips every missed one.
func (s *Store) planFires(now int64, st *fsm.State) []fsm.Fire {
	var fires []fsm.Fire
	late := now - int64(s.opts.ScheduleGrace) // an occurrence before it was missed
	st.DueSchedules(now, func(sc *fsm.Schedule) bool {
		o, err := specOf(&sc.ScheduleDef)
		if err != nil {
			panic("execstore: a stored schedule does not parse: " + err.Error())
		}
		fires = planSchedule(fires, sc, &o, now, late, s.limits.ScheduleCatchUp)
		return len(fires) < fsm.MaxFiresPerCommand
	})
	return fires
}

// planSchedule appends the fires of one schedule's occurrences due at now.
func planSchedule(fires []fsm.Fire, sc *fsm.Schedule, o *occurrences, now, late int64, catchUpMax int) []fsm.Fire {
	at, caught := sc.Next, int(sc.CaughtUp)
	for at != 0 && at <= now && len(fires) < fsm.MaxFiresPerCommand {
		f := fsm.Fire{ScheduleID: sc.ID, At: at}
		switch {
		case at >= late: // on time
			f.Admit, f.Next, caught = true, o.after(at), 0
		case sc.CatchUp == fsm.CatchUpAll && caught < catchUpMax:
			f.Admit, f.Missed, f.Next = true, true, o.after(at)
			caught++
		case sc.CatchUp == fsm.CatchUpLatest:
			if last := o.lastBefore(late); last > at {
				f.Next, caught = last, 0 // skip to the latest missed
			} else {
				f.Admit, f.Missed, f.Next = true, true, o.after(at)
				caught++
			}
		default: // CatchUpNone, or CatchUpAll past its cap: skip what was missed
			f.Next, caught = o.atOrAfter(late), 0
			// The schedule's Last is the latest occurrence reached, and the
			// state machine sets it to a fire's At: a run of skipped ones is
			// two fires, to the latest skipped and past it.
			if latest := o.lastBefore(late); latest > at {
				if len(fires)+2 > fsm.MaxFiresPerCommand {
					return fires // the rest in the next command
				}
				fires = append(fires, fsm.Fire{ScheduleID: sc.ID, At: at, Next: latest})
				f.At = latest
			}
		}
		fires = append(fires, f)
		at = f.Next
	}
	return fires
}

// armScheduleTimer sets the timer for the next occurrence by the clock (for
// now if the store's time has reached it: more occurrences were due than
// one fire command held), or for Options.ScheduleCheck from now if that is
// sooner, and returns its channel; nil (never ready) when no schedule has a
// next occurrence, or this store does not lead.
func (w *writer) armScheduleTimer() <-chan time.Time {
	return w.armFor(&w.sched, (*fsm.State).NextOccurrence)
}

// armFor sets a timer of the writer's for the time next gives (the next
// occurrence, the next deadline), checked again within
// Options.ScheduleCheck so that a clock that jumps is followed, and returns
// its channel; nil (never ready) when next gives none, or this node does
// not lead.
func (w *writer) armFor(t *writerTimer, next func(*fsm.State) (int64, bool)) <-chan time.Time {
	var at int64
	ok := false
	if w.c.leads() {
		w.c.view(func(s *fsm.State) { at, ok = next(s) })
	}
	if !ok {
		t.stop()
		return nil
	}
	o := &w.s.opts
	now := o.Clock.Now()
	deadline := now.Add(o.ScheduleCheck)
	switch d := timeFromNanos(at); {
	case at <= w.last:
		deadline = now // come in the store's time, which may be ahead of the clock
	case d.Before(deadline):
		deadline = d
	}
	return t.set(o.Clock, deadline)
}

// come reports whether the time next gives (the next occurrence, the next
// deadline) has come: at or before the clock, or the store's time.
func (w *writer) come(next func(*fsm.State) (int64, bool)) bool {
	var at int64
	ok := false
	w.c.view(func(st *fsm.State) { at, ok = next(st) })
	clock, _ := nanosFromTime(w.s.opts.Now())
	return ok && at <= max(clock, w.last)
}
