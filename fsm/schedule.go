package fsm

import "github.com/execstore/execstore/internal/mutant"

// Schedules. A schedule admits an execution for each of its occurrences,
// with the ID OccurrenceID(schedule, occurrence time): the caller-chosen ID
// is the dedupe (Loom ADR 0103), so an occurrence is admitted at most once
// ever, and an occurrence whose ID a caller admitted first is skipped.
//
// The state machine keeps each schedule's definition and where it stands
// (its next occurrence, the latest one reached), but computes no occurrence
// time itself: a cron expression needs a calendar, which this package does
// not import. The writer computes occurrence times outside it and logs them
// in commands, as it logs every other time:
//
//   - put-schedule carries the schedule's first occurrence (after the
//     command's time), computed once the command is stamped;
//   - fire-schedules carries, per occurrence reached, the occurrence (which
//     must be the schedule's next one and due at the command's time),
//     whether to admit it (the catch-up policy's decision for a missed one)
//     and the schedule's next occurrence after it.
//
// Apply checks each fire against the state and the command's time and
// ignores one that does not fit, so a replay, whatever produced the log,
// can only admit a schedule's occurrences in order, each once.

// CatchUp is a schedule's policy for missed occurrences. The numeric values
// are part of the WAL and snapshot formats: never renumber them.
type CatchUp uint8

const (
	CatchUpLatest CatchUp = 1 // admit only the latest missed occurrence
	CatchUpAll    CatchUp = 2 // admit every missed occurrence (up to a cap per catch-up)
	CatchUpNone   CatchUp = 3 // admit no missed occurrence
)

// Valid reports whether p is one of the three policies.
func (p CatchUp) Valid() bool { return p >= CatchUpLatest && p <= CatchUpNone }

// ScheduleDef is a schedule as its caller defines it.
type ScheduleDef struct {
	ID         string
	WorkflowID string
	Params     string // meaningful only when HasParams
	HasParams  bool
	Every      int64  // the interval in nanoseconds; 0 for a cron schedule
	Cron       string // the cron expression; "" for an interval schedule
	Offset     int32  // cron: seconds east of UTC its fields are read in
	Start      int64  // no occurrence before it; > 0
	End        int64  // no occurrence after it; 0: none
	CatchUp    CatchUp
	// Queue is each occurrence's queue, "" for the default: the workflow's
	// own (codec version 5, state version 8).
	Queue string
}

// Schedule is a schedule's record: its definition and where it stands.
//
// Invariants (checked by State.CheckInvariants): Next is 0 (no occurrence
// left) or at or after Start, at or before End when End is set, and after
// Last; the due index holds (Next, ID) exactly for schedules with a Next.
type Schedule struct {
	ScheduleDef
	Next int64 // the next occurrence; 0: none left
	Last int64 // the latest occurrence reached, admitted or skipped; 0: none
	// CaughtUp counts the missed occurrences admitted since the latest
	// skipped or on-time one: the writer caps a catch-up with it.
	CaughtUp uint32
}

// Fire is one occurrence reached, in a fire-schedules command.
type Fire struct {
	ScheduleID string
	At         int64 // the occurrence: the schedule's next one, due at the command's time
	Next       int64 // the schedule's next occurrence after At; 0: none left
	Admit      bool  // admit an execution for it (false: the catch-up policy skips it)
	Missed     bool  // it was reached late (it counts towards CaughtUp when admitted)
}

// MaxFiresPerCommand bounds a fire-schedules command, and so the time one
// command holds the writer.
const MaxFiresPerCommand = 256

// MaxCronBytes bounds a schedule's cron expression.
const MaxCronBytes = 256

// OccurrenceTimeBytes is the longest occurrence time in an occurrence's
// execution ID: RFC 3339 in UTC with nanoseconds.
const OccurrenceTimeBytes = len("2006-01-02T15:04:05.999999999Z")

func scheduleLess(a, b Schedule) bool { return a.ID < b.ID }

// OccurrenceID is the execution ID of a schedule's occurrence:
// "<schedule ID>@<occurrence time, RFC 3339 in UTC>", with as many fraction
// digits as the time needs, none for a whole second (as Go's
// time.RFC3339Nano prints it).
func OccurrenceID(scheduleID string, at int64) string {
	return scheduleID + "@" + FormatTime(at)
}

// FormatTime formats nanoseconds since the Unix epoch (0 or more) as RFC 3339
// in UTC, trailing zeros of the fraction dropped. Written out because this
// package may not import time.
func FormatTime(ns int64) string {
	secs, frac := ns/1e9, ns%1e9
	days, rem := secs/86400, secs%86400
	y, m, d := civil(days)
	var b [OccurrenceTimeBytes]byte
	out := b[:0]
	out = appendDigits(out, y, 4)
	out = append(out, '-')
	out = appendDigits(out, m, 2)
	out = append(out, '-')
	out = appendDigits(out, d, 2)
	out = append(out, 'T')
	out = appendDigits(out, rem/3600, 2)
	out = append(out, ':')
	out = appendDigits(out, rem/60%60, 2)
	out = append(out, ':')
	out = appendDigits(out, rem%60, 2)
	if frac != 0 {
		digits := 9
		for frac%10 == 0 {
			frac /= 10
			digits--
		}
		out = append(out, '.')
		out = appendDigits(out, frac, digits)
	}
	return string(append(out, 'Z'))
}

// civil converts days since 1970-01-01 (0 or more) to a proleptic Gregorian
// date (Howard Hinnant's days_from_civil, inverted).
func civil(days int64) (year, month, day int64) {
	z := days + 719468
	era := z / 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	day = doy - (153*mp+2)/5 + 1
	month = mp + 3
	if month > 12 {
		month -= 12
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month, day
}

func appendDigits(dst []byte, v int64, width int) []byte {
	var b [20]byte
	i := len(b)
	for ; width > 0 || v > 0; width-- {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return append(dst, b[i:]...)
}

// Schedule returns a schedule's record.
func (s *State) Schedule(id string) (Schedule, bool) {
	return s.schedules.Get(Schedule{ScheduleDef: ScheduleDef{ID: id}})
}

// Schedules calls fn for each schedule in ID order until fn returns false.
func (s *State) Schedules(fn func(sc *Schedule) bool) {
	s.schedules.Scan(func(sc Schedule) bool { return fn(&sc) })
}

// ScheduleCount returns the number of schedules.
func (s *State) ScheduleCount() int { return s.schedules.Len() }

// NextOccurrence returns the earliest next occurrence of any schedule.
func (s *State) NextOccurrence() (int64, bool) {
	k, ok := s.schedDue.Min()
	return k.At, ok
}

// DueSchedules calls fn for each schedule whose next occurrence is at or
// before now, earliest first (ties by ID), until fn returns false. fn must
// not change the state.
func (s *State) DueSchedules(now int64, fn func(sc *Schedule) bool) {
	s.schedDue.Scan(func(k dueKey) bool {
		if k.At > now {
			return false
		}
		sc, _ := s.Schedule(k.ID)
		return fn(&sc)
	})
}

// setSchedule stores sc, replacing old (nil when sc is new), and keeps the
// due index.
func (s *State) setSchedule(old *Schedule, sc *Schedule) {
	if old != nil && old.Next != 0 {
		s.schedDue.Delete(dueKey{At: old.Next, ID: old.ID})
	}
	s.schedules.Set(*sc)
	if sc.Next != 0 {
		s.schedDue.Set(dueKey{At: sc.Next, ID: sc.ID})
	}
}

func (s *State) putSchedule(c *Command, dry bool) Result {
	def := c.Schedule
	old, exists := s.Schedule(def.ID)
	switch {
	case exists && old.ScheduleDef == *def:
		// The same definition again: nothing changes, not even the next
		// occurrence.
		return Result{Schedule: &old}
	case !exists && s.schedules.Len() >= c.Limit:
		return Result{Code: CodeLimitExceeded}
	case dry:
		return mutates
	}
	// A new or changed definition: the next occurrence is its first after the
	// command's time (the writer computed it), so nothing reached already is
	// reached again. Where the schedule stood (Last) is kept.
	sc := Schedule{ScheduleDef: *def, Next: c.At}
	var prev *Schedule
	if exists {
		sc.Last = old.Last
		prev = &old
	}
	s.setSchedule(prev, &sc)
	return Result{Schedule: &sc}
}

func (s *State) deleteSchedule(c *Command, dry bool) Result {
	old, ok := s.Schedule(c.ScheduleID)
	switch {
	case !ok:
		return Result{Code: CodeNotFound}
	case dry:
		return mutates
	}
	if old.Next != 0 {
		s.schedDue.Delete(dueKey{At: old.Next, ID: old.ID})
	}
	s.schedules.Delete(old)
	return Result{}
}

// fits reports whether a fire applies to the state at now: the schedule
// exists, At is its next occurrence and due, and Next is a valid next one.
func (f *Fire) fits(sc *Schedule, ok bool, now int64) bool {
	return ok && sc.Next == f.At && f.At <= now &&
		(f.Next == 0 || (f.Next > f.At && (sc.End == 0 || f.Next <= sc.End)))
}

// fireSchedules applies each fire in order. One that does not fit the state
// (the writer builds fires from the state they are applied to, so only a
// made-up log has such) changes nothing.
func (s *State) fireSchedules(c *Command, now int64, dry bool) Result {
	r := Result{}
	for i := range c.Fires {
		f := &c.Fires[i]
		sc, ok := s.Schedule(f.ScheduleID)
		if !f.fits(&sc, ok, now) {
			continue
		}
		if dry {
			return mutates
		}
		if f.Admit {
			if id := OccurrenceID(sc.ID, f.At); !s.exists(id) {
				e := Execution{
					ID: id, WorkflowID: sc.WorkflowID, Params: sc.Params, HasParams: sc.HasParams,
					Status: StatusAdmitted, AdmittedAt: now, UpdatedAt: now, DueAt: now,
					Queue: ownQueue(sc.Queue, sc.WorkflowID),
				}
				s.put(nil, &e)
				r.Woken = append(r.Woken, id)
				r.Became.Due = true
			}
			// Else a caller admitted the occurrence's ID first: it wins, and
			// the occurrence is reached without a second execution.
		}
		next := sc
		next.Last = f.At
		if !mutant.ScheduleKeepsNext {
			next.Next = f.Next
		}
		if f.Admit && f.Missed {
			next.CaughtUp++
		} else {
			next.CaughtUp = 0
		}
		s.setSchedule(&sc, &next)
	}
	return r
}

// checkSchedule verifies one schedule's own fields. It returns "" when they
// hold.
func (sc *Schedule) check() string {
	switch {
	case sc.ID == "" || sc.WorkflowID == "":
		return "empty ID or workflow ID"
	case (sc.Every > 0) == (sc.Cron != ""), sc.Every < 0:
		return "neither or both of an interval and a cron expression"
	case sc.Every > 0 && sc.Offset != 0:
		return "an interval schedule with a cron offset"
	case sc.Start <= 0 || (sc.End != 0 && sc.End < sc.Start):
		return "start not positive, or end before start"
	case !sc.CatchUp.Valid():
		return "invalid catch-up policy"
	case sc.Next != 0 && (sc.Next < sc.Start || (sc.End != 0 && sc.Next > sc.End)):
		return "next occurrence outside start and end"
	case sc.Next != 0 && sc.Next <= sc.Last:
		return "next occurrence not after the latest one reached"
	}
	return ""
}
