package execstore_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/google/go-cmp/cmp"
)

// scheduleFixture is a fixture whose writer looks for due occurrences only
// when it takes requests (its clock's timers never fire), so that a test
// decides when an occurrence is reached: at its next write.
func scheduleFixture(t *testing.T, opts func(o *execstore.Options)) *fixture {
	t.Helper()
	f := newFixture(t)
	f.s.Close()
	f.untimed()
	if opts != nil {
		opts(&f.opts)
	}
	f.open()
	return f
}

// write is a write that changes nothing: it passes through the writer, which
// admits the occurrences that have come before it answers.
func (f *fixture) write() {
	f.t.Helper()
	if _, err := f.s.RequestWake(ctx, "no-such-execution", f.clock.Now()); !errors.Is(err, execstore.ErrExecutionNotFound) {
		f.t.Fatalf("RequestWake: %v", err)
	}
}

func (f *fixture) put(sc execstore.Schedule) execstore.Schedule {
	f.t.Helper()
	got, err := f.s.PutSchedule(ctx, sc)
	if err != nil {
		f.t.Fatalf("PutSchedule(%+v): %v", sc, err)
	}
	return got
}

func (f *fixture) schedule(id string) execstore.Schedule {
	f.t.Helper()
	sc, err := f.s.GetSchedule(ctx, id)
	if err != nil {
		f.t.Fatalf("GetSchedule(%q): %v", id, err)
	}
	return sc
}

// admitted returns which of the occurrence times at have an execution.
func (f *fixture) admitted(scheduleID string, at ...time.Time) []time.Time {
	f.t.Helper()
	var out []time.Time
	for _, t := range at {
		if _, err := f.s.Get(ctx, execstore.ScheduleOccurrenceID(scheduleID, t)); err == nil {
			out = append(out, t)
		} else if !errors.Is(err, execstore.ErrExecutionNotFound) {
			f.t.Fatal(err)
		}
	}
	return out
}

// everyMinute returns the occurrence times t0+1m, t0+2m ... t0+n·m.
func everyMinute(n int) []time.Time {
	var out []time.Time
	for i := 1; i <= n; i++ {
		out = append(out, t0.Add(time.Duration(i)*time.Minute))
	}
	return out
}

// The nightly settlement's 02:00 occurrence is admitted, under the ID
// "<schedule>@<occurrence in RFC 3339 UTC>" with the schedule's workflow and
// params, before the first write stamped at or after 02:00 answers, and not
// before; the schedule moves on to the next night.
func TestAnOccurrenceIsAdmittedUnderItsIDBeforeAnyWriteStampedAtOrAfterIt(t *testing.T) {
	f := scheduleFixture(t, nil)
	got := f.put(execstore.Schedule{ID: "nightly-settlement", WorkflowID: "settle", Params: raw(`{"shop":1}`),
		Cron: "0 2 * * *", Start: t0})
	night := time.Date(2026, 1, 3, 2, 0, 0, 0, time.UTC)
	if !got.NextAt.Equal(night) || !got.LastAt.IsZero() || got.CatchUp != execstore.CatchUpLatest {
		t.Fatalf("PutSchedule = %+v, want the next occurrence at %v and the default catch-up", got, night)
	}
	f.clock.Set(night.Add(-time.Second))
	f.write()
	if n := len(f.admitted("nightly-settlement", night)); n != 0 {
		t.Fatal("the occurrence was admitted a second early")
	}
	f.clock.Set(night)
	f.write()
	id := "nightly-settlement@2026-01-03T02:00:00Z"
	if id != execstore.ScheduleOccurrenceID("nightly-settlement", night) {
		t.Fatalf("ScheduleOccurrenceID = %q", execstore.ScheduleOccurrenceID("nightly-settlement", night))
	}
	want := execstore.Record{ExecutionID: id, WorkflowID: "settle", Params: raw(`{"shop":1}`), Status: execstore.StatusAdmitted,
		AdmittedAt: night, UpdatedAt: night, DueAt: night}
	if diff := cmp.Diff(want, f.get(id)); diff != "" {
		t.Fatalf("the occurrence's record (-want +got):\n%s", diff)
	}
	sc := f.schedule("nightly-settlement")
	if next := night.AddDate(0, 0, 1); !sc.NextAt.Equal(next) || !sc.LastAt.Equal(night) {
		t.Fatalf("after the occurrence: next %v, last %v; want %v, %v", sc.NextAt, sc.LastAt, next, night)
	}
}

// With its timer on (a clock whose timers fire), the writer admits an
// occurrence when it comes, with no write to wait for: on a manual clock,
// when the clock is moved to it.
func TestTheWriterAdmitsAnOccurrenceWhenItComesWithNoWriteToWaitFor(t *testing.T) {
	f := newFixture(t)
	f.s.Close()
	f.timed()
	f.open()
	f.put(execstore.Schedule{ID: "minutely", WorkflowID: "w", Interval: time.Minute, Start: t0.Add(time.Minute)})
	eventually(t, "the writer sets its timer", func() bool { return f.clock.Timers() == 1 })
	f.clock.Advance(time.Minute)
	eventually(t, "the occurrence is admitted", func() bool { return len(f.admitted("minutely", t0.Add(time.Minute))) == 1 })
}

// More occurrences due at once than one fire command holds (256) are all
// admitted with no write to wait for: the writer's schedule timer, set for a
// time that has come, wakes it again until none is left.
func TestOccurrencesBeyondOneFireCommandAreAdmittedWithoutAWrite(t *testing.T) {
	f := newFixture(t)
	f.s.Close()
	f.timed()
	f.opts.ScheduleGrace = 10 * time.Minute // every occurrence below is on time
	f.open()
	f.put(execstore.Schedule{ID: "second", WorkflowID: "w", Interval: time.Second, Start: t0.Add(time.Second)})
	eventually(t, "the writer sets its timer", func() bool { return f.clock.Timers() == 1 })
	f.clock.Advance(300 * time.Second)
	eventually(t, "all 300 occurrences are admitted", func() bool { return f.stats().Executions == 300 })
	if got := f.admitted("second", t0.Add(time.Second), t0.Add(256*time.Second), t0.Add(257*time.Second), t0.Add(300*time.Second)); len(got) != 4 {
		t.Fatalf("admitted %v of the first, 256th, 257th and last", got)
	}
}

// Each occurrence is admitted at most once, ever: reached between clean
// restarts, snapshots and reopenings on the newest snapshot, every occurrence
// has exactly one execution, no write admits one again, and a caller
// admitting an occurrence's ID afterwards gets ErrExecutionIDConflict.
func TestEachOccurrenceIsAdmittedOnceAcrossRestartsAndSnapshots(t *testing.T) {
	f := scheduleFixture(t, nil)
	f.put(execstore.Schedule{ID: "m", WorkflowID: "w", Interval: time.Minute, Start: t0, CatchUp: execstore.CatchUpAll})
	between := []func(){
		f.reopen,
		func() {
			if err := f.s.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
		},
		func() {
			if err := f.s.Snapshot(ctx); err != nil {
				t.Fatal(err)
			}
			f.reopen()
		},
		f.write,
	}
	var reached []time.Time
	for i := range 12 {
		f.clock.Advance(time.Minute)
		reached = append(reached, f.clock.Now())
		f.write()
		between[i%len(between)]()
		f.write()
	}
	if got := f.admitted("m", reached...); len(got) != len(reached) {
		t.Fatalf("admitted %v, want every one of %v", got, reached)
	}
	if n := f.stats().Executions; n != len(reached) {
		t.Fatalf("%d executions for %d occurrences", n, len(reached))
	}
	for _, at := range reached {
		_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: execstore.ScheduleOccurrenceID("m", at), WorkflowID: "w"})
		if !errors.Is(err, execstore.ErrExecutionIDConflict) {
			t.Fatalf("admitting the occurrence at %v again: %v", at, err)
		}
	}
}

// A caller who admits an occurrence's ID before the schedule reaches it wins:
// its execution is untouched, the occurrence is skipped without an error,
// and the schedule goes on to the next one.
func TestACallerWhoAdmitsAnOccurrenceIDFirstWins(t *testing.T) {
	f := scheduleFixture(t, nil)
	f.put(execstore.Schedule{ID: "m", WorkflowID: "w", Params: raw(`{"from":"schedule"}`), Interval: time.Minute, Start: t0})
	first := t0.Add(time.Minute)
	id := execstore.ScheduleOccurrenceID("m", first)
	f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "by-hand", Params: raw(`{"from":"caller"}`)})
	before := f.get(id)
	f.clock.Set(first)
	f.write()
	if diff := cmp.Diff(before, f.get(id)); diff != "" {
		t.Fatalf("the caller's execution changed (-before +after):\n%s", diff)
	}
	if sc := f.schedule("m"); !sc.LastAt.Equal(first) || !sc.NextAt.Equal(first.Add(time.Minute)) {
		t.Fatalf("the schedule stands at last %v, next %v", sc.LastAt, sc.NextAt)
	}
	f.clock.Advance(time.Minute)
	f.write()
	if got := f.admitted("m", first.Add(time.Minute)); len(got) != 1 {
		t.Fatal("the next occurrence was not admitted")
	}
}

// After downtime, an occurrence reached more than Options.ScheduleGrace late
// was missed, and the catch-up policy decides: CatchUpAll admits every missed
// one (at most Limits.ScheduleCatchUp in a row, the rest skipped),
// CatchUpLatest only the latest, CatchUpNone none. One reached within the
// grace is on time and admitted whatever the policy: a store that comes back
// quickly after a crash still admits what came due meanwhile. The schedule's
// LastAt is then the latest occurrence reached, the skipped ones included.
func TestTheCatchUpPolicyDecidesWhichMissedOccurrencesAreAdmitted(t *testing.T) {
	minutes := everyMinute(10) // the store is down from t0 to t0+10m30s; the grace is a minute
	for _, tc := range []struct {
		policy  execstore.CatchUp
		catchUp int // Limits.ScheduleCatchUp; 0: the default
		down    time.Duration
		want    []time.Time
	}{
		{execstore.CatchUpAll, 0, 10*time.Minute + 30*time.Second, minutes},
		{execstore.CatchUpAll, 3, 10*time.Minute + 30*time.Second, append(slices.Clone(minutes[:3]), minutes[9])},
		{execstore.CatchUpLatest, 0, 10*time.Minute + 30*time.Second, minutes[8:]},
		{execstore.CatchUpNone, 0, 10*time.Minute + 30*time.Second, minutes[9:]},
		{execstore.CatchUpNone, 0, 90 * time.Second, minutes[:1]}, // back within the grace
	} {
		t.Run(fmt.Sprintf("%s,cap=%d,down=%v", tc.policy, tc.catchUp, tc.down), func(t *testing.T) {
			f := scheduleFixture(t, func(o *execstore.Options) { o.Limits.ScheduleCatchUp = tc.catchUp })
			f.put(execstore.Schedule{ID: "m", WorkflowID: "w", Interval: time.Minute, Start: t0, CatchUp: tc.policy})
			if err := f.s.Close(); err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(tc.down)
			f.open()
			f.write()
			if got := f.admitted("m", minutes...); !slices.Equal(got, tc.want) {
				t.Fatalf("admitted %v, want %v", got, tc.want)
			}
			next := t0.Add(tc.down).Truncate(time.Minute).Add(time.Minute)
			sc := f.schedule("m")
			if !sc.NextAt.Equal(next) {
				t.Fatalf("next occurrence %v, want %v", sc.NextAt, next)
			}
			// The latest occurrence reached, admitted or skipped: the one
			// before the next, however many were skipped on the way.
			if last := next.Add(-time.Minute); !sc.LastAt.Equal(last) {
				t.Fatalf("latest occurrence reached %v, want %v", sc.LastAt, last)
			}
			if err := f.s.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An hourly schedule from 02:00, the store down from before 02:00 until 07:30
// (or its clock jumping there without a restart), one write at 07:30: every
// occurrence from 02:00 to 07:00 was missed, and whatever the policy skipped
// of them, LastAt is the latest one reached, 07:00, not the first skipped.
func TestLastAtIsTheLatestOccurrenceReachedAfterABulkSkip(t *testing.T) {
	start := t0.Add(time.Minute) // "02:00"; the store was last up at "01:59", t0
	hours := []time.Time{}
	for i := range 6 {
		hours = append(hours, start.Add(time.Duration(i)*time.Hour))
	}
	for _, restart := range []bool{true, false} {
		for _, tc := range []struct {
			policy execstore.CatchUp
			want   []time.Time // admitted
		}{
			{execstore.CatchUpNone, nil},
			{execstore.CatchUpAll, hours[:3]}, // Limits.ScheduleCatchUp 3
			{execstore.CatchUpLatest, hours[5:]},
		} {
			t.Run(fmt.Sprintf("%s,restart=%v", tc.policy, restart), func(t *testing.T) {
				f := scheduleFixture(t, func(o *execstore.Options) { o.Limits.ScheduleCatchUp = 3 })
				f.put(execstore.Schedule{ID: "h", WorkflowID: "w", Interval: time.Hour, Start: start, CatchUp: tc.policy})
				if restart {
					if err := f.s.Close(); err != nil {
						t.Fatal(err)
					}
				}
				f.clock.Advance(5*time.Hour + 31*time.Minute) // "07:30"
				if restart {
					f.open()
				}
				f.write()
				if got := f.admitted("h", hours...); !slices.Equal(got, tc.want) {
					t.Fatalf("admitted %v, want %v", got, tc.want)
				}
				sc := f.schedule("h")
				if !sc.LastAt.Equal(hours[5]) || !sc.NextAt.Equal(hours[5].Add(time.Hour)) {
					t.Fatalf("LastAt %v, NextAt %v; want %v and %v", sc.LastAt, sc.NextAt, hours[5], hours[5].Add(time.Hour))
				}
				if err := f.s.CheckInvariants(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// A put of exactly the definition stored writes nothing and keeps the next
// occurrence; a changed definition replaces it, its next occurrence the first
// after the put (nothing already reached is reached again), its latest one
// reached kept.
func TestAnIdenticalPutWritesNothingAndAChangedOneStartsAfterThePut(t *testing.T) {
	f := scheduleFixture(t, nil)
	sc := execstore.Schedule{ID: "m", WorkflowID: "w", Interval: time.Minute, Start: t0}
	f.put(sc)
	f.clock.Advance(90 * time.Second)
	f.write()
	before := f.stats().WALLastIndex
	if got := f.put(sc); !got.NextAt.Equal(t0.Add(2*time.Minute)) || f.stats().WALLastIndex != before {
		t.Fatalf("identical put: next %v, %d entries logged", got.NextAt, f.stats().WALLastIndex-before)
	}
	sc.Interval = 40 * time.Second // occurrences at t0, t0+40s, t0+80s, t0+120s...
	got := f.put(sc)
	if !got.NextAt.Equal(t0.Add(120*time.Second)) || !got.LastAt.Equal(t0.Add(time.Minute)) || got.Interval != 40*time.Second {
		t.Fatalf("changed put: %+v", got)
	}
	if n := f.stats().Executions; n != 1 {
		t.Fatalf("%d executions, want the one occurrence reached before the change", n)
	}
}

// Deleting an unknown schedule is ErrScheduleNotFound and writes nothing; a
// deleted schedule admits nothing more, and what it admitted stays.
func TestDeletingAScheduleStopsItAndAnUnknownOneIsNotFound(t *testing.T) {
	f := scheduleFixture(t, nil)
	f.put(execstore.Schedule{ID: "m", WorkflowID: "w", Interval: time.Minute, Start: t0})
	f.clock.Advance(time.Minute)
	f.write()
	before := f.stats().WALLastIndex
	for _, id := range []string{"unknown", "", strings.Repeat("x", execstore.IDBytes+1)} {
		if err := f.s.DeleteSchedule(ctx, id); !errors.Is(err, execstore.ErrScheduleNotFound) || execstore.ErrorCode(err) != "SCHEDULE_NOT_FOUND" {
			t.Fatalf("DeleteSchedule(%q) = %v", id, err)
		}
	}
	if f.stats().WALLastIndex != before {
		t.Fatal("a delete of an unknown schedule was logged")
	}
	if err := f.s.DeleteSchedule(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.GetSchedule(ctx, "m"); !errors.Is(err, execstore.ErrScheduleNotFound) {
		t.Fatalf("GetSchedule after delete: %v", err)
	}
	f.clock.Advance(time.Hour)
	f.write()
	if n := f.stats().Executions; n != 1 {
		t.Fatalf("%d executions after the delete, want the one admitted before", n)
	}
	if list, err := f.s.ListSchedules(ctx); err != nil || len(list) != 0 {
		t.Fatalf("ListSchedules = %v, %v", list, err)
	}
}

// The number of schedules is a limit checked in the caller's goroutine: a put
// of one more is refused with ErrLimitExceeded while the writer is held, and
// a put replacing one that exists goes through.
func TestTheScheduleLimitIsCheckedBeforeThePutIsQueued(t *testing.T) {
	f, h := holdingFixture(t, execstore.Limits{Schedules: 1})
	sc := execstore.Schedule{ID: "a", WorkflowID: "w", Interval: time.Minute, Start: t0}
	f.put(sc)
	h.hold(f)
	before := f.stats()
	other := sc
	other.ID = "b"
	if err := answeredWhileHeld(t, func() error { _, err := f.s.PutSchedule(ctx, other); return err }); !errors.Is(err, execstore.ErrLimitExceeded) {
		t.Fatalf("a second schedule: %v, want ErrLimitExceeded", err)
	}
	h.letAndWait(t)
	if after := f.stats(); after.WALLastIndex != before.WALLastIndex+1 {
		t.Fatalf("%d entries logged, want the blocker's alone", after.WALLastIndex-before.WALLastIndex)
	}
	sc.Interval = time.Hour
	f.put(sc)
}

// A schedule is an interval or a standard cron expression read at a fixed
// offset from UTC, from its start to its end; anything else (time-zone
// names, @every, both or neither, an offset without cron, a start missing or
// after its end, an unknown policy) is ErrInvalidArgument.
func TestASchedulesTimesAreAnIntervalOrCronAtAFixedOffset(t *testing.T) {
	f := scheduleFixture(t, nil) // t0 is 2026-01-02 12:00 UTC, a Friday
	for _, tc := range []struct {
		sc          execstore.Schedule
		next, later time.Time // after the put; after the occurrences up to 2026-01-05 12:00
	}{
		{execstore.Schedule{Cron: "0 9 * * *", CronOffset: -5 * time.Hour}, // 09:00 at UTC-5 is 14:00 UTC
			time.Date(2026, 1, 2, 14, 0, 0, 0, time.UTC), time.Date(2026, 1, 5, 14, 0, 0, 0, time.UTC)},
		{execstore.Schedule{Cron: "30 1 * * MON", CronOffset: 2 * time.Hour}, // Monday 01:30 at UTC+2 is Sunday 23:30 UTC
			time.Date(2026, 1, 4, 23, 30, 0, 0, time.UTC), time.Date(2026, 1, 11, 23, 30, 0, 0, time.UTC)},
		{execstore.Schedule{Cron: "@daily"},
			time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 6, 0, 0, 0, 0, time.UTC)},
		{execstore.Schedule{Interval: 36 * time.Hour, Start: t0.Add(-time.Hour)},
			t0.Add(35 * time.Hour), t0.Add(107 * time.Hour)},
		{execstore.Schedule{Interval: time.Hour, End: t0.Add(90 * time.Minute)},
			t0.Add(time.Hour), time.Time{}}, // none left after t0+1h
	} {
		sc := tc.sc
		sc.ID, sc.WorkflowID = fmt.Sprintf("s-%s-%v", sc.Cron, sc.Interval), "w"
		if sc.Start.IsZero() {
			sc.Start = t0
		}
		if got := f.put(sc); !got.NextAt.Equal(tc.next) {
			t.Errorf("%s %v: next %v, want %v", sc.Cron, sc.Interval, got.NextAt, tc.next)
		}
		defer func() {
			if got := f.schedule(sc.ID); !got.NextAt.Equal(tc.later) {
				t.Errorf("%s %v: next after 2026-01-05 12:00 %v, want %v", sc.Cron, sc.Interval, got.NextAt, tc.later)
			}
		}()
	}
	f.clock.Set(time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC))
	f.write()

	valid := execstore.Schedule{ID: "x", WorkflowID: "w", Cron: "0 2 * * *", Start: t0}
	for name, change := range map[string]func(*execstore.Schedule){
		"a time-zone name":      func(s *execstore.Schedule) { s.Cron = "CRON_TZ=Europe/Paris 0 2 * * *" },
		"a TZ prefix":           func(s *execstore.Schedule) { s.Cron = "TZ=UTC 0 2 * * *" },
		"@every":                func(s *execstore.Schedule) { s.Cron = "@every 1h" },
		"six fields":            func(s *execstore.Schedule) { s.Cron = "0 0 2 * * *" },
		"both":                  func(s *execstore.Schedule) { s.Interval = time.Hour },
		"neither":               func(s *execstore.Schedule) { s.Cron = "" },
		"an offset, no cron":    func(s *execstore.Schedule) { s.Cron, s.Interval, s.CronOffset = "", time.Hour, time.Hour },
		"an offset of a day":    func(s *execstore.Schedule) { s.CronOffset = 24 * time.Hour },
		"a fractional offset":   func(s *execstore.Schedule) { s.CronOffset = time.Millisecond },
		"no start":              func(s *execstore.Schedule) { s.Start = time.Time{} },
		"an end before start":   func(s *execstore.Schedule) { s.End = t0.Add(-time.Second) },
		"an unknown policy":     func(s *execstore.Schedule) { s.CatchUp = "some" },
		"params not an object":  func(s *execstore.Schedule) { s.Params = raw(`[1]`) },
		"an empty workflow":     func(s *execstore.Schedule) { s.WorkflowID = "" },
		"a control character":   func(s *execstore.Schedule) { s.ID = "x\n" },
		"a start before 1970":   func(s *execstore.Schedule) { s.Start = time.Unix(-1, 0) },
		"a cron over 256 bytes": func(s *execstore.Schedule) { s.Cron = "0 2 * * *" + strings.Repeat(" ", 250) },
	} {
		sc := valid
		change(&sc)
		if _, err := f.s.PutSchedule(ctx, sc); !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("%s: PutSchedule = %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := f.s.GetSchedule(ctx, "x"); !errors.Is(err, execstore.ErrScheduleNotFound) {
		t.Fatalf("a refused schedule was stored: %v", err)
	}
}
