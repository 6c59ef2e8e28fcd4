package fsm

import "encoding/binary"

// The schedules' commands in the command codec (see codec.go for the
// primitives), their encoded lengths and their structural checks.
//
//	put-schedule     id:str workflow:str params:opt every:uv cron:str offset:zz
//	                 start:uv end:uv catch-up:1B first:uv limit:uv
//	                 queue:str (version 5; before, and "": the default)
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

func encodePutSchedule(dst []byte, c *Command, version byte) []byte {
	dst = appendScheduleDef(dst, c.Schedule)
	dst = binary.AppendUvarint(dst, uint64(c.At))
	dst = binary.AppendUvarint(dst, uint64(c.Limit))
	if version >= 5 {
		dst = appendStr(dst, c.Schedule.Queue)
	}
	return dst
}

func encodeDeleteSchedule(dst []byte, c *Command, _ byte) []byte { return appendStr(dst, c.ScheduleID) }

func encodeFireSchedules(dst []byte, c *Command, _ byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(c.Fires)))
	for i := range c.Fires {
		f := &c.Fires[i]
		dst = appendStr(dst, f.ScheduleID)
		dst = binary.AppendUvarint(dst, uint64(f.At))
		dst = binary.AppendUvarint(dst, uint64(f.Next))
		dst = append(dst, fireFlags(f))
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

func decodePutSchedule(d *Decoder, c *Command, version byte) {
	c.Schedule = new(ScheduleDef)
	readScheduleDef(d, c.Schedule)
	c.At = d.Int()
	c.Limit = int(d.Int())
	if version >= 5 {
		c.Schedule.Queue = d.Str()
	}
}

func decodeDeleteSchedule(d *Decoder, c *Command, _ byte) { c.ScheduleID = d.Str() }

func decodeFireSchedules(d *Decoder, c *Command, _ byte) {
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

// sizePutSchedule: the first occurrence is set once the command is stamped,
// after it was sized: counted at its widest, as the time is.
func sizePutSchedule(c *Command) int {
	return scheduleDefLen(c.Schedule) + binary.MaxVarintLen64 + uvarintLen(uint64(c.Limit)) + strLen(c.Schedule.Queue)
}

func sizeDeleteSchedule(c *Command) int { return strLen(c.ScheduleID) }

func sizeFireSchedules(c *Command) int {
	n := uvarintLen(uint64(len(c.Fires)))
	for i := range c.Fires {
		f := &c.Fires[i]
		n += strLen(f.ScheduleID) + uvarintLen(uint64(f.At)) + uvarintLen(uint64(f.Next)) + 1
	}
	return n
}

// boundPutSchedule: ID, workflow, params (Event), interval, cron, offset,
// start, end, policy, first occurrence, limit, queue.
func boundPutSchedule(b *Bounds) int {
	return b.scheduleID() + b.id() + boundNum + b.Event + boundNum + b.str(MaxCronBytes) + 3*boundNum + 1 + 2*boundNum + b.id()
}

func boundDeleteSchedule(b *Bounds) int { return b.scheduleID() }

func boundFireSchedules(b *Bounds) int {
	return boundNum + MaxFiresPerCommand*(b.scheduleID()+2*boundNum+1)
}

func checkPutSchedule(c *Command) string {
	if c.Schedule == nil {
		return "no schedule"
	}
	sc := Schedule{ScheduleDef: *c.Schedule, Next: c.At}
	if msg := sc.check(); msg != "" {
		return msg
	}
	if len(sc.Cron) > MaxCronBytes || c.Limit <= 0 || (c.At != 0 && c.At <= c.Now) {
		return "cron expression too long, non-positive limit, or first occurrence not after the command"
	}
	return ""
}

func checkDeleteSchedule(c *Command) string {
	if c.ScheduleID == "" {
		return "empty schedule ID"
	}
	return ""
}

func checkFireSchedules(c *Command) string {
	if len(c.Fires) == 0 || len(c.Fires) > MaxFiresPerCommand {
		return "fire count outside 1.." + itoa(MaxFiresPerCommand)
	}
	for i := range c.Fires {
		f := &c.Fires[i]
		if f.ScheduleID == "" || f.At <= 0 || (f.Next != 0 && f.Next <= f.At) || (f.Missed && !f.Admit) {
			return "empty schedule ID, non-positive occurrence, next not after it, or missed and not admitted"
		}
	}
	return ""
}
