package execstore_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// logRecorder is a slog.Handler that keeps every record's level, message
// and attributes.
type logRecorder struct {
	mu    sync.Mutex
	lines []logLine
}

type logLine struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	l := logLine{level: rec.Level, msg: rec.Message, attrs: map[string]slog.Value{}}
	rec.Attrs(func(a slog.Attr) bool { l.attrs[a.Key] = a.Value; return true })
	r.mu.Lock()
	r.lines = append(r.lines, l)
	r.mu.Unlock()
	return nil
}

// about returns the lines whose message contains s.
func (r *logRecorder) about(s string) []logLine {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logLine
	for _, l := range r.lines {
		if strings.Contains(l.msg, s) {
			out = append(out, l)
		}
	}
	return out
}

// jumpAheadAndBack stamps a command at clock+ahead, then sets the clock back
// to clock+back.
func (f *fixture) jumpAheadAndBack(ahead, back time.Duration) {
	f.t.Helper()
	f.clock.Set(t0.Add(ahead))
	f.commit("jump")
	f.clock.Set(t0.Add(back))
}

func (f *fixture) commit(key string) {
	f.t.Helper()
	if err := f.s.Commit(ctx, execstore.Write{Key: key, Value: raw(`1`)}); err != nil {
		f.t.Fatalf("Commit(%q): %v", key, err)
	}
}

func TestNowIsTheClockButNeverEarlierThanTheStoresTime(t *testing.T) {
	f := newFixture(t)
	if got := f.s.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want the clock %v", got, t0)
	}
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.ack(f.claimOne("e"), execstore.Suspended())
	f.wake("e", t0.Add(10*time.Minute))
	f.jumpAheadAndBack(time.Hour, time.Minute)

	before := f.stats().WALLastIndex
	if got, want := f.s.Now(), t0.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("Now with the clock behind = %v, want the store's time %v", got, want)
	}
	if after := f.stats().WALLastIndex; after != before {
		t.Fatalf("Now wrote %d log entries, want none", after-before)
	}
	// The store's time made the wake due; from the claim on, Now is at or
	// after the claim's time, so it finds the wake reached too.
	l := f.claimOne("e")
	if now, claimed := f.s.Now(), l.ExpiresAt.Add(-time.Minute); now.Before(claimed) || now.Before(t0.Add(10*time.Minute)) {
		t.Fatalf("after a claim at %v for a wake at 12:10, Now = %v", claimed, now)
	}
	f.reopen()
	if got, want := f.s.Now(), t0.Add(time.Hour); !got.Equal(want) {
		t.Fatalf("Now after a restart = %v, want the recovered store's time %v", got, want)
	}
	f.clock.Set(t0.Add(2 * time.Hour))
	if got := f.s.Now(); !got.Equal(t0.Add(2 * time.Hour)) {
		t.Fatalf("Now once the clock is ahead again = %v, want the clock", got)
	}
}

// A clock behind the store's time holds stamps back: each is counted in
// Stats, with the gap; a warning is logged at most once per minute of the
// clock's readings, and one line when the clock has caught up.
func TestAClockBehindTheStoresTimeIsCountedAndLoggedAtMostOncePerMinute(t *testing.T) {
	f := newFixture(t)
	logs := &logRecorder{}
	f.opts.Logger = slog.New(logs)
	f.reopen()
	f.jumpAheadAndBack(time.Hour, time.Minute)
	if st := f.stats(); st.ClockBehindStamps != 0 || len(logs.about("clock reads earlier")) != 0 {
		t.Fatalf("before any stamp with the clock behind: %d held back, %d warnings", st.ClockBehindStamps, len(logs.about("clock reads earlier")))
	}

	steps := []struct {
		clock         time.Duration // from t0
		held          uint64
		behind, max   time.Duration
		warnings      int
		caughtUpLines int
	}{
		{time.Minute, 1, 59 * time.Minute, 59 * time.Minute, 1, 0},
		{time.Minute + 59*time.Second, 2, 58*time.Minute + time.Second, 59 * time.Minute, 1, 0}, // within a minute of the warning
		{2 * time.Minute, 3, 58 * time.Minute, 59 * time.Minute, 2, 0},                          // a minute after it
		{time.Hour + time.Second, 3, 0, 59 * time.Minute, 2, 1},                                 // caught up
		{time.Hour + 2*time.Second, 3, 0, 59 * time.Minute, 2, 1},
	}
	for i, s := range steps {
		f.clock.Set(t0.Add(s.clock))
		f.commit("k")
		st := f.stats()
		warnings, caughtUp := logs.about("clock reads earlier"), logs.about("caught up")
		if st.ClockBehindStamps != s.held || st.ClockBehind != s.behind || st.ClockBehindMax != s.max ||
			len(warnings) != s.warnings || len(caughtUp) != s.caughtUpLines {
			t.Fatalf("step %d (clock t0+%v): held back %d, behind %v, max %v, %d warnings, %d caught-up lines; want %d, %v, %v, %d, %d",
				i, s.clock, st.ClockBehindStamps, st.ClockBehind, st.ClockBehindMax, len(warnings), len(caughtUp),
				s.held, s.behind, s.max, s.warnings, s.caughtUpLines)
		}
	}
	w := logs.about("clock reads earlier")[0]
	if w.level != slog.LevelWarn || w.attrs["behind"].Duration() != 59*time.Minute || !w.attrs["store_time"].Time().Equal(t0.Add(time.Hour)) {
		t.Fatalf("warning = %+v", w)
	}
	c := logs.about("caught up")[0]
	if c.level != slog.LevelInfo || c.attrs["held_back"].Uint64() != 3 || c.attrs["max_behind"].Duration() != 59*time.Minute {
		t.Fatalf("caught-up line = %+v", c)
	}
}

// The store's time survives a restart, so a clock behind it after the
// restart is reported as well.
func TestAClockBehindTheRecoveredTimeIsReportedAfterARestart(t *testing.T) {
	f := newFixture(t)
	logs := &logRecorder{}
	f.opts.Logger = slog.New(logs)
	f.clock.Set(t0.Add(time.Hour))
	f.commit("k")
	f.clock.Set(t0)
	f.reopen()
	f.commit("k")
	if st := f.stats(); st.ClockBehindStamps != 1 || st.ClockBehind != time.Hour || len(logs.about("clock reads earlier")) != 1 {
		t.Fatalf("after a restart with the clock an hour behind: held back %d, behind %v, %d warnings", st.ClockBehindStamps, st.ClockBehind, len(logs.about("clock reads earlier")))
	}
}

// On a manual clock (Options.Clock), the writer's timers fire when the clock
// is moved past them: with no request to take, it retires an execution once
// the clock passes both its retention and the retention check, and admits a
// schedule's occurrence when the clock reaches it; before, it does neither.
func TestTheWritersTimersFireWhenAManualClockIsMovedPastThem(t *testing.T) {
	f := newFixture(t)
	f.s.Close()
	f.timed()
	f.opts.Retention = time.Hour
	f.opts.RetentionCheck = time.Minute
	f.opts.ScheduleCheck = time.Hour // the occurrence's own time sets its timer
	f.open()
	f.admit(execstore.AdmitRequest{ExecutionID: "done", WorkflowID: "w"})
	if _, err := f.s.Cancel(ctx, "done", "ended at t0"); err != nil {
		t.Fatal(err)
	}
	f.put(execstore.Schedule{ID: "hourly", WorkflowID: "w", Interval: time.Hour, Start: t0.Add(90 * time.Minute)})
	// The writer sleeps on its two timers once it has finished its round.
	asleep := func() {
		t.Helper()
		eventually(t, "the writer sets both its timers", func() bool { return f.clock.Timers() == 2 })
	}
	asleep()

	f.clock.Advance(time.Hour) // the check fires; the retention ends exactly now: not yet
	asleep()
	if n := f.stats().Retired; n != 0 {
		t.Fatalf("%d retired at the retention's end", n)
	}
	f.clock.Advance(time.Minute) // the next check, past the retention
	eventually(t, "the check retires the execution", func() bool { return f.stats().Retired == 1 })
	asleep()
	if got := f.admitted("hourly", t0.Add(90*time.Minute)); len(got) != 0 {
		t.Fatalf("admitted %v before the occurrence's time", got)
	}
	f.clock.Advance(29 * time.Minute) // the occurrence's time
	eventually(t, "the occurrence is admitted", func() bool { return len(f.admitted("hourly", t0.Add(90*time.Minute))) == 1 })
}

// Open refuses options of the clock that make no sense: both a Clock and a
// Now (two sources of time), and a negative check interval (which used to
// mean "no timer": a Clock whose timers never fire says that now).
func TestOpenRefusesBothClockAndNowAndNegativeCheckIntervals(t *testing.T) {
	c := newClock()
	for name, opts := range map[string]execstore.Options{
		"Clock and Now":           {Clock: c, Now: c.Now},
		"negative RetentionCheck": {Clock: c, Retention: time.Hour, RetentionCheck: -1},
		"negative ScheduleCheck":  {Now: c.Now, ScheduleCheck: -1},
	} {
		opts.NoSync = true
		s, err := execstore.Open(t.TempDir(), opts)
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("%s: Open = %v, want ErrInvalidArgument", name, err)
		}
	}
}
