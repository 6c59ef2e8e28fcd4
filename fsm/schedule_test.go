package fsm

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// genSchedules is what gen knows of the schedules its commands made: each
// one's interval and, as far as gen can tell, its next occurrence.
type genSchedules struct {
	every map[string]int64
	next  map[string]int64
	defs  map[string]ScheduleDef // the latest put of each, to repeat
}

func (gs *genSchedules) put(sc *Schedule) {
	if gs.every == nil {
		gs.every, gs.next, gs.defs = map[string]int64{}, map[string]int64{}, map[string]ScheduleDef{}
	}
	gs.every[sc.ID] = max(sc.Every, 1000)
	gs.next[sc.ID] = sc.Next
	gs.defs[sc.ID] = sc.ScheduleDef
}

func (g *gen) scheduleID() string { return []string{"s0", "s1", "s2"}[g.rng.IntN(3)] }

// occurrenceID is the ID of a schedule's next occurrence, for an admission
// that takes it first.
func (g *gen) occurrenceID() (string, bool) {
	for _, id := range []string{"s0", "s1", "s2"} {
		if at := g.scheds.next[id]; at != 0 {
			return OccurrenceID(id, at), true
		}
	}
	return "", false
}

// scheduleCommand fills in a put-schedule, delete-schedule or fire-schedules
// command: puts that repeat, change or add a schedule (past the limit at
// times), deletes of known and unknown schedules, and fires that mostly fit
// the schedule they name (gen assumes they apply) and sometimes do not.
func (g *gen) scheduleCommand(c *Command) {
	switch c.Kind {
	case KindPutSchedule:
		d := &ScheduleDef{ID: g.scheduleID(), WorkflowID: "w", CatchUp: CatchUp(1 + g.rng.IntN(3))}
		if g.rng.IntN(3) == 0 {
			d.Queue = "q1" // its occurrences' queue
		}
		d.Start = max(1, g.now-int64(g.rng.IntN(3))*1000)
		if g.rng.IntN(3) == 0 {
			d.Cron, d.Offset = "0 * * * *", int32(g.rng.IntN(3)-1)*3600
			c.At = g.now + 500 + int64(g.rng.IntN(3))*1000
		} else {
			d.Every = int64(1+g.rng.IntN(2)) * 1000
			k := (g.now-d.Start)/d.Every + 1
			c.At = d.Start + k*d.Every
		}
		if g.rng.IntN(4) == 0 {
			d.End = c.At + int64(g.rng.IntN(3))*1000
		}
		if g.rng.IntN(5) == 0 {
			c.At = 0 // no occurrence left
		}
		if g.rng.IntN(2) == 0 {
			d.Params, d.HasParams = `{"s":1}`, true
		}
		if prev, ok := g.scheds.defs[d.ID]; ok && g.rng.IntN(4) == 0 {
			*d = prev // the same definition again
			if c.At = max(c.At, g.now+1, d.Start); d.End != 0 && c.At > d.End {
				c.At = 0
			}
		}
		c.Schedule, c.Limit = d, 1+g.rng.IntN(3)
	case KindDeleteSchedule:
		c.ScheduleID = g.scheduleID()
		delete(g.scheds.next, c.ScheduleID)
	case KindFireSchedules:
		for range 1 + g.rng.IntN(3) {
			id := g.scheduleID()
			at := g.scheds.next[id]
			if at == 0 || g.rng.IntN(8) == 0 {
				at = max(1, g.now+int64(g.rng.IntN(3)-1)*1000) // rarely fits
			}
			g.now = max(g.now, at) // due
			for range 1 + g.rng.IntN(2) {
				f := Fire{ScheduleID: id, At: at, Next: at + g.scheds.every[id] + 1000, Admit: g.rng.IntN(4) > 0}
				f.Missed = f.Admit && g.rng.IntN(3) == 0
				if g.rng.IntN(6) == 0 {
					f.Next = 0
				}
				c.Fires = append(c.Fires, f)
				if g.scheds.next != nil {
					g.scheds.next[id] = f.Next
				}
				if at = f.Next; at == 0 || at > g.now {
					break
				}
			}
		}
		c.Now = g.now
	}
}

// FormatTime is Go's time.RFC3339Nano in UTC, which this package cannot
// import: occurrence IDs are what the documentation says they are.
func TestOccurrenceTimesAreRFC3339NanoInUTC(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	cases := []int64{0, 1, 999_999_999, 1e9, 951_782_400e9, 4_102_444_800e9 - 1, maxTime}
	for range 100_000 {
		ns := rng.Int64N(maxTime)
		switch rng.IntN(3) {
		case 0:
			ns -= ns % 1e9
		case 1:
			ns -= ns % 1e6
		}
		cases = append(cases, ns)
	}
	for _, ns := range cases {
		if got, want := FormatTime(ns), time.Unix(0, ns).UTC().Format(time.RFC3339Nano); got != want {
			t.Fatalf("FormatTime(%d) = %q, want %q", ns, got, want)
		}
	}
	if got := OccurrenceID("nightly", 1_767_225_600e9); got != "nightly@2026-01-01T00:00:00Z" {
		t.Fatalf("OccurrenceID = %q", got)
	}
}

func putCmd(now int64, def ScheduleDef, first int64) Command {
	return Command{Kind: KindPutSchedule, Now: now, Schedule: &def, At: first, Limit: 10}
}

var everySecond = ScheduleDef{ID: "s", WorkflowID: "w", Every: 1e9, Start: 10e9, CatchUp: CatchUpAll}

// An occurrence admits the execution OccurrenceID names once: a fire that
// repeats it no longer fits (the schedule moved on), and one whose ID a
// caller admitted first advances the schedule without a second execution.
func TestAnOccurrenceIsAdmittedOnceAndACallerWhoAdmitsItsIDFirstWins(t *testing.T) {
	s := New()
	s.Apply(&Command{Kind: KindAdmit, Now: 10e9, ExecutionID: OccurrenceID("s", 12e9), WorkflowID: "caller"})
	put := putCmd(10e9, everySecond, 11e9)
	s.Apply(&put)
	fire := func(now, at int64) Result {
		return s.Apply(&Command{Kind: KindFireSchedules, Now: now, Fires: []Fire{{ScheduleID: "s", At: at, Next: at + 1e9, Admit: true}}})
	}
	tests := []struct {
		now, at  int64
		admitted []string
		next     int64
	}{
		{11e9, 11e9, []string{OccurrenceID("s", 11e9)}, 12e9},
		{11e9, 11e9, nil, 12e9}, // the same fire again: no longer the next occurrence
		{12e9, 12e9, nil, 13e9}, // the caller took 12s's ID first
		{12e9, 13e9, nil, 13e9}, // not due yet
	}
	for i, tt := range tests {
		r := fire(tt.now, tt.at)
		sc, _ := s.Schedule("s")
		if !reflect.DeepEqual(r.Woken, tt.admitted) || sc.Next != tt.next {
			t.Fatalf("fire %d: admitted %q, next %d; want %q, %d", i, r.Woken, sc.Next, tt.admitted, tt.next)
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if e, _ := s.Get(OccurrenceID("s", 12e9)); e.WorkflowID != "caller" {
		t.Fatalf("the caller's execution became %+v", e)
	}
}

// A put of the definition a schedule has already changes nothing, its next
// occurrence included; a changed one takes the next occurrence the command
// carries and keeps the latest one reached.
func TestPutOfAnIdenticalScheduleIsANoOpAndAChangedOneMovesItsNextOccurrence(t *testing.T) {
	s := New()
	put := putCmd(10e9, everySecond, 11e9)
	s.Apply(&put)
	s.Apply(&Command{Kind: KindFireSchedules, Now: 11e9, Fires: []Fire{{ScheduleID: "s", At: 11e9, Next: 12e9, Admit: true}}})
	again := putCmd(11e9, everySecond, 12e9+5)
	if r, mutates := s.Precheck(&again); mutates || r.Schedule == nil || r.Schedule.Next != 12e9 {
		t.Fatalf("identical put: mutates %v, result %+v", mutates, r.Schedule)
	}
	changed := everySecond
	changed.Every = 2e9
	put = putCmd(11e9, changed, 12e9)
	r := s.Apply(&put)
	if want := (Schedule{ScheduleDef: changed, Next: 12e9, Last: 11e9}); r.Code != CodeOK || !reflect.DeepEqual(*r.Schedule, want) {
		t.Fatalf("changed put: %+v, want %+v", r, want)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// The schedule limit the command carries is the state machine's to enforce;
// deleting an unknown schedule is not found; both change nothing.
func TestScheduleLimitAndUnknownDeleteChangeNothing(t *testing.T) {
	s := New()
	put := putCmd(10e9, everySecond, 11e9)
	put.Limit = 1
	s.Apply(&put)
	other := everySecond
	other.ID = "t"
	second := putCmd(10e9, other, 11e9)
	second.Limit = 1
	before := dumpOf(s)
	if r, mutates := s.Precheck(&second); mutates || r.Code != CodeLimitExceeded {
		t.Fatalf("put past the limit: %v %v", r.Code, mutates)
	}
	if r, mutates := s.Precheck(&Command{Kind: KindDeleteSchedule, Now: 10e9, ScheduleID: "t"}); mutates || r.Code != CodeNotFound {
		t.Fatalf("delete of an unknown schedule: %v %v", r.Code, mutates)
	}
	if diff := cmp.Diff(before, dumpOf(s), cmpOpts); diff != "" {
		t.Fatal(diff)
	}
}

func TestCheckInvariantsFindsBrokenSchedules(t *testing.T) {
	build := func() *State {
		s := New()
		put := putCmd(10e9, everySecond, 11e9)
		s.Apply(&put)
		return s
	}
	breaks := map[string]func(s *State){
		"due entry missing": func(s *State) { s.schedDue.Delete(dueKey{At: 11e9, ID: "s"}) },
		"stale due entry":   func(s *State) { s.schedDue.Set(dueKey{At: 12e9, ID: "s"}) },
		"next not after last": func(s *State) {
			sc, _ := s.Schedule("s")
			sc.Last = sc.Next
			s.schedules.Set(sc)
		},
		"next before start": func(s *State) {
			sc, _ := s.Schedule("s")
			s.schedDue.Delete(dueKey{At: sc.Next, ID: "s"})
			sc.Next = 1
			s.schedules.Set(sc)
			s.schedDue.Set(dueKey{At: 1, ID: "s"})
		},
	}
	if err := build().CheckInvariants(); err != nil {
		t.Fatalf("intact state: %v", err)
	}
	for name, breakIt := range breaks {
		s := build()
		breakIt(s)
		if err := s.CheckInvariants(); err == nil {
			t.Errorf("%s: not detected", name)
		}
	}
}
