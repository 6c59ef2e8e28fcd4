package fsm

import "encoding/binary"

// The schedules' commands in the command codec (see codec.go for the
// primitives), their encoded lengths and their structural checks.
//
//	put-schedule     id:str workflow:str params:opt every:uv cron:str offset:zz
//	                 start:uv end:uv catch-up:1B first:uv limit:uv
//	delete-schedule  id:str
//	fire-schedules   count:uv, then per fire id:str at:uv next:uv flags:1B
//	                 (flags: 1 admit, 2 missed; missed only with admit)
//
// zz is a zigzag varint: a signed integer n as (n << 1) ^ (n >> 63).

const (
	fireAdmit  = 1
	fireMissed = 2
)

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func appendScheduleDef(dst []byte, d *ScheduleDef) []byte {
	dst = appendStr(dst, d.ID)
	dst = appendStr(dst, d.WorkflowID)
	dst = appendOpt(dst, d.Params, d.HasParams)
	dst = binary.AppendUvarint(dst, uint64(d.Every))
	dst = appendStr(dst, d.Cron)
	dst = binary.AppendUvarint(dst, zigzag(int64(d.Offset)))
	dst = binary.AppendUvarint(dst, uint64(d.Start))
	dst = binary.AppendUvarint(dst, uint64(d.End))
	return append(dst, byte(d.CatchUp))
}

func scheduleDefLen(d *ScheduleDef) int {
	return strLen(d.ID) + strLen(d.WorkflowID) + optLen(d.Params, d.HasParams) + uvarintLen(uint64(d.Every)) +
		strLen(d.Cron) + uvarintLen(zigzag(int64(d.Offset))) + uvarintLen(uint64(d.Start)) + uvarintLen(uint64(d.End)) + 1
}

// readScheduleDef reads what appendScheduleDef wrote, from either decoder.
func readScheduleDef(r schedulePrimitives, d *ScheduleDef) {
	d.ID = r.Str()
	d.WorkflowID = r.Str()
	d.Params, d.HasParams = r.Opt()
	d.Every = r.int()
	d.Cron = r.Str()
	off := unzigzag(r.Uvarint())
	if off < -1<<31 || off >= 1<<31 {
		r.fail("cron offset out of range")
	}
	d.Offset = int32(off)
	d.Start = r.int()
	d.End = r.int()
	d.CatchUp = CatchUp(r.Byte())
}

// schedulePrimitives is what both decoders offer for a schedule.
type schedulePrimitives interface {
	primitives
	int() int64
}

func (d *Decoder) int() int64 { return d.Int() }

func appendScheduleCommand(dst []byte, c *Command) []byte {
	switch c.Kind {
	case KindPutSchedule:
		dst = appendScheduleDef(dst, c.Schedule)
		dst = binary.AppendUvarint(dst, uint64(c.At))
		dst = binary.AppendUvarint(dst, uint64(c.Limit))
	case KindDeleteSchedule:
		dst = appendStr(dst, c.ScheduleID)
	case KindFireSchedules:
		dst = binary.AppendUvarint(dst, uint64(len(c.Fires)))
		for i := range c.Fires {
			f := &c.Fires[i]
			dst = appendStr(dst, f.ScheduleID)
			dst = binary.AppendUvarint(dst, uint64(f.At))
			dst = binary.AppendUvarint(dst, uint64(f.Next))
			dst = append(dst, fireFlags(f))
		}
	}
	return dst
}

func fireFlags(f *Fire) byte {
	var b byte
	if f.Admit {
		b |= fireAdmit
	}
	if f.Missed {
		b |= fireMissed
	}
	return b
}

func (d *Decoder) scheduleCommand(c *Command) {
	switch c.Kind {
	case KindPutSchedule:
		c.Schedule = new(ScheduleDef)
		readScheduleDef(d, c.Schedule)
		c.At = d.Int()
		c.Limit = int(d.Int())
	case KindDeleteSchedule:
		c.ScheduleID = d.Str()
	case KindFireSchedules:
		n := d.Count(4) // at least an ID length, two times and the flags
		if n > MaxFiresPerCommand {
			d.fail("fire-schedules of " + itoa(uint64(n)) + " fires")
			return
		}
		if n > 0 {
			c.Fires = make([]Fire, n)
		}
		for i := range c.Fires {
			f := &c.Fires[i]
			f.ScheduleID = d.Str()
			f.At = d.Int()
			f.Next = d.Int()
			flags := d.Byte()
			if flags > fireAdmit|fireMissed || flags == fireMissed {
				d.fail("bad fire flags")
			}
			f.Admit, f.Missed = flags&fireAdmit != 0, flags&fireMissed != 0
		}
	}
}

func scheduleCommandLen(c *Command) int {
	switch c.Kind {
	case KindPutSchedule:
		// The first occurrence is set once the command is stamped, after it
		// was sized: counted at its widest, as the time is.
		return scheduleDefLen(c.Schedule) + binary.MaxVarintLen64 + uvarintLen(uint64(c.Limit))
	case KindDeleteSchedule:
		return strLen(c.ScheduleID)
	}
	n := uvarintLen(uint64(len(c.Fires)))
	for i := range c.Fires {
		f := &c.Fires[i]
		n += strLen(f.ScheduleID) + uvarintLen(uint64(f.At)) + uvarintLen(uint64(f.Next)) + 1
	}
	return n
}

// checkScheduleCommand is Command.Check for the schedules' kinds.
func checkScheduleCommand(c *Command, bad func(string) error) error {
	switch c.Kind {
	case KindPutSchedule:
		if c.Schedule == nil {
			return bad("no schedule")
		}
		sc := Schedule{ScheduleDef: *c.Schedule, Next: c.At}
		if msg := sc.check(); msg != "" {
			return bad(msg)
		}
		if len(sc.Cron) > MaxCronBytes || c.Limit <= 0 || (c.At != 0 && c.At <= c.Now) {
			return bad("cron expression too long, non-positive limit, or first occurrence not after the command")
		}
	case KindDeleteSchedule:
		if c.ScheduleID == "" {
			return bad("empty schedule ID")
		}
	case KindFireSchedules:
		if len(c.Fires) == 0 || len(c.Fires) > MaxFiresPerCommand {
			return bad("fire count outside 1.." + itoa(MaxFiresPerCommand))
		}
		for i := range c.Fires {
			f := &c.Fires[i]
			if f.ScheduleID == "" || f.At <= 0 || (f.Next != 0 && f.Next <= f.At) || (f.Missed && !f.Admit) {
				return bad("empty schedule ID, non-positive occurrence, next not after it, or missed and not admitted")
			}
		}
	}
	return nil
}
