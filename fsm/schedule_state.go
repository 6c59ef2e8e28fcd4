package fsm

import (
	"encoding/binary"
	"errors"
)

// The schedules in the state encoding (version 3, see encode.go), in
// CheckState (check.go) and in CheckInvariants (invariants.go).

func (s *State) encodeSchedules(e *encoder, version uint64) {
	e.uv(uint64(s.schedules.Len()))
	s.schedules.Scan(func(sc Schedule) bool {
		e.buf = appendScheduleDef(e.buf, &sc.ScheduleDef)
		e.buf = binary.AppendUvarint(e.buf, uint64(sc.Next))
		e.buf = binary.AppendUvarint(e.buf, uint64(sc.Last))
		e.buf = binary.AppendUvarint(e.buf, uint64(sc.CaughtUp))
		if version >= 8 {
			e.buf = appendStr(e.buf, sc.Queue)
		}
		e.flush(false)
		return e.err == nil
	})
}

func (s *State) decodeSchedules(d *streamDecoder, version uint64) error {
	var due []dueKey
	for i, n := 0, d.count(maxCount); i < n && d.err == nil; i++ {
		var sc Schedule
		readScheduleDef(d, &sc.ScheduleDef)
		sc.Next, sc.Last = d.int(), d.int()
		sc.CaughtUp = d.u32()
		if version >= 8 {
			sc.Queue = d.Str()
		}
		if d.err != nil {
			break
		}
		if last, ok := s.schedules.Max(); ok && !scheduleLess(last, sc) {
			return decodeErr("state: schedules out of order at " + quote(sc.ID))
		}
		if msg := sc.check(); msg != "" {
			return decodeErr("state: schedule " + quote(sc.ID) + ": " + msg)
		}
		s.schedules.Load(sc)
		if sc.Next != 0 {
			due = append(due, dueKey{At: sc.Next, ID: sc.ID})
		}
	}
	if d.err != nil {
		return d.err
	}
	loadSorted(s.schedDue, due, dueLess)
	return nil
}

// schedules checks the schedules as decodeSchedules reads them.
func (c *checker) schedules(sum *StateSummary, version uint64) error {
	for i, n := 0, c.count(maxCount); i < n && c.err == nil; i++ {
		var sc Schedule
		id := c.str(&c.key[0])
		sc.ID, sc.WorkflowID = nonEmpty(len(id) > 0), nonEmpty(c.skipStr())
		sc.HasParams = c.opt()
		sc.Every = c.int()
		sc.Cron = nonEmpty(c.skipStr())
		if off := unzigzag(c.Uvarint()); off < -1<<31 || off >= 1<<31 {
			c.fail("cron offset out of range")
		} else {
			sc.Offset = int32(off)
		}
		sc.Start, sc.End = c.int(), c.int()
		sc.CatchUp = CatchUp(c.Byte())
		sc.Next, sc.Last = c.int(), c.int()
		sc.CaughtUp = c.u32()
		if version >= 8 {
			c.skipStr()
		}
		if c.err != nil {
			break
		}
		if !c.after(i == 0, id, nil) {
			return decodeErr("state: schedules out of order at " + quote(string(id)))
		}
		if msg := sc.check(); msg != "" {
			return decodeErr("state: schedule " + quote(string(id)) + ": " + msg)
		}
		sum.Schedules++
	}
	return c.err
}

// checkSchedules verifies each schedule and the schedules' due index.
func (s *State) checkSchedules() error {
	var err error
	due := 0
	s.schedules.Scan(func(sc Schedule) bool {
		if msg := sc.check(); msg != "" {
			err = errors.New("fsm: invariant violated: schedule " + quote(sc.ID) + ": " + msg)
			return false
		}
		if sc.Next == 0 {
			return true
		}
		due++
		if _, ok := s.schedDue.Get(dueKey{At: sc.Next, ID: sc.ID}); !ok {
			err = errors.New("fsm: invariant violated: schedule " + quote(sc.ID) + " missing from the schedules' due index")
			return false
		}
		return true
	})
	if err == nil && s.schedDue.Len() != due {
		err = errors.New("fsm: invariant violated: the schedules' due index has " + itoa(uint64(s.schedDue.Len())) +
			" entries, schedules want " + itoa(uint64(due)))
	}
	return err
}
