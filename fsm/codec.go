package fsm

import (
	"encoding/binary"
	"errors"
)

// CodecVersion is the first byte of every encoded command. Part of the WAL
// format: a reader refuses versions it does not know, and reads every older
// one. Version 2 adds an admission's attempt bound and a release's cause
// (trailing fields) and the cancel command; a version-1 command decodes with
// no bound and no cause.
const CodecVersion = 2

// maxErrorDepth bounds a recorded error's cause chain, here and in the codec.
const MaxErrorDepth = 16

// ErrDecode is wrapped by every decoding error.
var ErrDecode = errors.New("fsm: malformed command")

// Encoded command layout (all integers are unsigned varints unless noted;
// "str" is a varint length and the bytes; "opt" is a varint length+1 and the
// bytes, 0 meaning absent):
//
//	+---------+------+-----+----------------------------+
//	| version | kind | now | fields of the kind, below  |
//	| 1 byte  | 1 B  | uv  |                            |
//	+---------+------+-----+----------------------------+
//
//	admit        id:str generated:1B workflow:str params:opt context:(count+1, then key:str value:str...)
//	wake         id:str at:uv
//	claim        limit:uv duration:uv
//	renew        id:str token:uv duration:uv
//	release      id:str token:uv delay:uv
//	acknowledge  id:str token:uv status:1B (completed: result:opt | failed: error)
//	             error = depth:uv, then per level name:str message:str code:str
//	save-step    id:str token:uv key:str value:str
//	start        id:str token:uv key:str workflow:str params:opt child:str
//	commit       count:uv, then per write key:str value:opt
//	watch        id:str count:uv, then key:str...
//	retire       before:uv limit:uv
//	acknowledge-batch  count:uv, then per acknowledgement id:str token:uv status:1B (as acknowledge)
//
// Version 2 (version 1 has neither the trailing fields nor the kind):
//
//	admit        ... context, then max-attempts:uv
//	release      ... delay, then cause: error (depth 0: none)
//	cancel       id:str reason:str
//	put-schedule, delete-schedule, fire-schedules: see schedule_codec.go

// AppendEncode appends c's encoding to dst. c must pass Check.
func AppendEncode(dst []byte, c *Command) []byte {
	return appendEncode(dst, c, CodecVersion)
}

// appendEncode appends c's encoding in the given codec version, leaving out
// what the version does not hold.
func appendEncode(dst []byte, c *Command, version byte) []byte {
	dst = append(dst, version, byte(c.Kind))
	dst = binary.AppendUvarint(dst, uint64(c.Now))
	switch c.Kind {
	case KindAdmit:
		dst = appendStr(dst, c.ExecutionID)
		dst = append(dst, boolByte(c.Generated))
		dst = appendStr(dst, c.WorkflowID)
		dst = appendOpt(dst, c.Params, c.HasParams)
		dst = appendContext(dst, c.Context)
		if version >= 2 {
			dst = binary.AppendUvarint(dst, uint64(c.MaxAttempts))
		}
	case KindWake:
		dst = appendStr(dst, c.ExecutionID)
		dst = binary.AppendUvarint(dst, uint64(c.At))
	case KindClaim:
		dst = binary.AppendUvarint(dst, uint64(c.Limit))
		dst = binary.AppendUvarint(dst, uint64(c.Duration))
	case KindRenew, KindRelease:
		dst = appendStr(dst, c.ExecutionID)
		dst = binary.AppendUvarint(dst, c.Token)
		dst = binary.AppendUvarint(dst, uint64(c.Duration))
		if c.Kind == KindRelease && version >= 2 {
			dst = AppendErrorInfo(dst, c.Cause)
		}
	case KindAcknowledge:
		dst = appendStr(dst, c.ExecutionID)
		dst = binary.AppendUvarint(dst, c.Token)
		dst = appendOutcome(dst, &c.Outcome)
	case KindAcknowledgeBatch:
		dst = binary.AppendUvarint(dst, uint64(len(c.Acks)))
		for i := range c.Acks {
			a := &c.Acks[i]
			dst = appendStr(dst, a.ExecutionID)
			dst = binary.AppendUvarint(dst, a.Token)
			dst = appendOutcome(dst, &a.Outcome)
		}
	case KindSaveStep:
		dst = appendStr(dst, c.ExecutionID)
		dst = binary.AppendUvarint(dst, c.Token)
		dst = appendStr(dst, c.Key)
		dst = appendStr(dst, c.Value)
	case KindStart:
		dst = appendStr(dst, c.ExecutionID)
		dst = binary.AppendUvarint(dst, c.Token)
		dst = appendStr(dst, c.Key)
		dst = appendStr(dst, c.WorkflowID)
		dst = appendOpt(dst, c.Params, c.HasParams)
		dst = appendStr(dst, c.ChildID)
	case KindCommit:
		dst = binary.AppendUvarint(dst, uint64(len(c.Writes)))
		for _, w := range c.Writes {
			dst = appendStr(dst, w.Key)
			dst = appendOpt(dst, w.Value, w.HasValue)
		}
	case KindWatch:
		dst = appendStr(dst, c.ExecutionID)
		dst = binary.AppendUvarint(dst, uint64(len(c.Keys)))
		for _, k := range c.Keys {
			dst = appendStr(dst, k)
		}
	case KindRetire:
		dst = binary.AppendUvarint(dst, uint64(c.At))
		dst = binary.AppendUvarint(dst, uint64(c.Limit))
	case KindCancel:
		dst = appendStr(dst, c.ExecutionID)
		dst = appendStr(dst, c.Reason)
	case KindPutSchedule, KindDeleteSchedule, KindFireSchedules:
		dst = appendScheduleCommand(dst, c) // schedule_codec.go
	default:
		panic("fsm: encode: unknown command kind " + c.Kind.String())
	}
	return dst
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendOpt(dst []byte, s string, has bool) []byte {
	if !has {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(s))+1)
	return append(dst, s...)
}

func appendContext(dst []byte, ctx *[]KV) []byte {
	if ctx == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(*ctx))+1)
	for _, kv := range *ctx {
		dst = appendStr(dst, kv.Key)
		dst = appendStr(dst, kv.Value)
	}
	return dst
}

func appendOutcome(dst []byte, o *Outcome) []byte {
	dst = append(dst, byte(o.Status))
	switch o.Status {
	case StatusCompleted:
		dst = appendOpt(dst, o.Result, o.HasRes)
	case StatusFailed, StatusCancelled:
		dst = AppendErrorInfo(dst, o.Error)
	}
	return dst
}

// AppendErrorInfo appends an error chain: its depth, then each level.
func AppendErrorInfo(dst []byte, e *ErrorInfo) []byte {
	depth := 0
	for x := e; x != nil; x = x.Cause {
		depth++
	}
	dst = binary.AppendUvarint(dst, uint64(depth))
	for x := e; x != nil; x = x.Cause {
		dst = appendStr(dst, x.Name)
		dst = appendStr(dst, x.Message)
		dst = appendStr(dst, x.Code)
	}
	return dst
}

// Decode parses an encoded command and checks it. Strings are copied out of
// b, so b may be reused afterwards.
func Decode(b []byte) (*Command, error) {
	c := new(Command)
	if err := DecodeInto(c, b); err != nil {
		return nil, err
	}
	return c, nil
}

// DecodeInto is Decode into a caller-provided command.
func DecodeInto(c *Command, b []byte) error {
	*c = Command{}
	d := Decoder{b: b}
	version := d.Byte()
	if version < 1 || version > CodecVersion {
		if d.err != nil {
			return d.err
		}
		return decodeErr("unknown codec version " + itoa(uint64(version)))
	}
	c.Kind = Kind(d.Byte())
	c.Now = d.Int()
	switch c.Kind {
	case KindAdmit:
		c.ExecutionID = d.Str()
		c.Generated = d.Bool()
		c.WorkflowID = d.Str()
		c.Params, c.HasParams = d.Opt()
		c.Context = d.context()
		if version >= 2 {
			c.MaxAttempts = int(d.Int())
		}
	case KindWake:
		c.ExecutionID = d.Str()
		c.At = d.Int()
	case KindClaim:
		c.Limit = int(d.Int())
		c.Duration = d.Int()
	case KindRenew, KindRelease:
		c.ExecutionID = d.Str()
		c.Token = d.Uvarint()
		c.Duration = d.Int()
		if c.Kind == KindRelease && version >= 2 {
			c.Cause = readErrorInfo(&d)
		}
	case KindAcknowledge:
		c.ExecutionID = d.Str()
		c.Token = d.Uvarint()
		d.outcome(&c.Outcome)
	case KindAcknowledgeBatch:
		n := d.Count(3) // at least an ID length, a token and a status
		if n > MaxAcksPerCommand {
			return decodeErr("acknowledge-batch of " + itoa(uint64(n)) + " acknowledgements")
		}
		if n > 0 {
			c.Acks = make([]Ack, n)
		}
		for i := range c.Acks {
			a := &c.Acks[i]
			a.ExecutionID = d.Str()
			a.Token = d.Uvarint()
			d.outcome(&a.Outcome)
		}
	case KindSaveStep:
		c.ExecutionID = d.Str()
		c.Token = d.Uvarint()
		c.Key = d.Str()
		c.Value = d.Str()
	case KindStart:
		c.ExecutionID = d.Str()
		c.Token = d.Uvarint()
		c.Key = d.Str()
		c.WorkflowID = d.Str()
		c.Params, c.HasParams = d.Opt()
		c.ChildID = d.Str()
	case KindCommit:
		n := d.Count(2)
		if n > 0 {
			c.Writes = make([]Write, n)
		}
		for i := range c.Writes {
			c.Writes[i].Key = d.Str()
			c.Writes[i].Value, c.Writes[i].HasValue = d.Opt()
		}
	case KindWatch:
		c.ExecutionID = d.Str()
		n := d.Count(1)
		if n > 0 {
			c.Keys = make([]string, n)
		}
		for i := range c.Keys {
			c.Keys[i] = d.Str()
		}
	case KindRetire:
		c.At = d.Int()
		c.Limit = int(d.Int())
	case KindCancel:
		if version < 2 {
			return decodeErr("cancel command in codec version " + itoa(uint64(version)))
		}
		c.ExecutionID = d.Str()
		c.Reason = d.Str()
	case KindPutSchedule, KindDeleteSchedule, KindFireSchedules:
		d.scheduleCommand(c) // schedule_codec.go
	default:
		if d.err == nil {
			return decodeErr("unknown command kind " + itoa(uint64(c.Kind)))
		}
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != d.off {
		return decodeErr("trailing bytes after " + c.Kind.String() + " command")
	}
	if err := c.Check(); err != nil {
		return err
	}
	return nil
}

func decodeErr(msg string) error {
	return &DecodeError{msg: msg}
}

// DecodeError describes malformed bytes; it wraps ErrDecode.
type DecodeError struct{ msg string }

func (e *DecodeError) Error() string { return "fsm: malformed command: " + e.msg }
func (e *DecodeError) Unwrap() error { return ErrDecode }

// Decoder reads the codec's primitives with bounds checks; the first error
// sticks and every later read returns zero values. Exported for the snapshot
// format, which uses the same primitives.
type Decoder struct {
	b   []byte
	off int
	err error
}

// NewDecoder returns a decoder over b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err returns the first error met.
func (d *Decoder) Err() error { return d.err }

// Remaining returns the number of unread bytes.
func (d *Decoder) Remaining() int { return len(d.b) - d.off }

func (d *Decoder) fail(msg string) {
	if d.err == nil {
		d.err = decodeErr(msg + " at offset " + itoa(uint64(d.off)))
	}
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail("unexpected end")
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	v := d.Byte()
	if v > 1 {
		d.fail("bad boolean")
	}
	return v == 1
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 || (n > 1 && d.b[d.off+n-1] == 0) {
		// Overlong encodings are refused, so that one value has one encoding.
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

// Int reads an unsigned varint that must fit a non-negative int64.
func (d *Decoder) Int() int64 {
	v := d.Uvarint()
	if v > uint64(maxTime) {
		d.fail("integer out of range")
		return 0
	}
	return int64(v)
}

// Count reads a collection length, refusing one that could not fit in the
// remaining bytes when each element takes at least minSize bytes.
func (d *Decoder) Count(minSize int) int {
	v := d.Uvarint()
	if v > uint64(d.Remaining()/minSize) {
		d.fail("count exceeds input")
		return 0
	}
	return int(v)
}

func (d *Decoder) bytes(n uint64) string {
	if d.err != nil {
		return ""
	}
	if n > uint64(d.Remaining()) {
		d.fail("length exceeds input")
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

// Str reads a length-prefixed string.
func (d *Decoder) Str() string { return d.bytes(d.Uvarint()) }

// Opt reads an optional string: length+1, 0 meaning absent.
func (d *Decoder) Opt() (string, bool) {
	n := d.Uvarint()
	if n == 0 || d.err != nil {
		return "", false
	}
	return d.bytes(n - 1), true
}

func (d *Decoder) context() *[]KV {
	n := d.Uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	n--
	if n > uint64(d.Remaining()/2) {
		d.fail("count exceeds input")
		return nil
	}
	kvs := make([]KV, n)
	for i := range kvs {
		kvs[i].Key = d.Str()
		kvs[i].Value = d.Str()
	}
	return &kvs
}

// primitives is what the command decoder (over a byte slice) and the state
// decoder (over a stream) share, so that the values both formats hold
// (outcomes, error chains) are read by one piece of code.
type primitives interface {
	Byte() byte
	Uvarint() uint64
	Str() string
	Opt() (string, bool)
	Err() error
	fail(msg string)
}

func (d *Decoder) outcome(o *Outcome) { readOutcome(d, o) }

// readOutcome reads an outcome written by appendOutcome.
func readOutcome(r primitives, o *Outcome) {
	o.Status = Status(r.Byte())
	switch o.Status {
	case StatusCompleted:
		o.Result, o.HasRes = r.Opt()
	case StatusFailed, StatusCancelled:
		o.Error = readErrorInfo(r)
	}
}

// readErrorInfo reads an error chain written by AppendErrorInfo.
func readErrorInfo(r primitives) *ErrorInfo {
	depth := r.Uvarint()
	if depth > MaxErrorDepth {
		r.fail("error chain too deep")
		return nil
	}
	var head *ErrorInfo
	link := &head
	for i := uint64(0); i < depth && r.Err() == nil; i++ {
		e := &ErrorInfo{Name: r.Str(), Message: r.Str(), Code: r.Str()}
		*link = e
		link = &e.Cause
	}
	return head
}

// Check verifies a command's structure: the invariants every command must
// hold whatever the state. The Store checks before encoding; Decode checks
// after decoding.
func (c *Command) Check() error {
	bad := func(msg string) error { return decodeErr(c.Kind.String() + ": " + msg) }
	if c.Now <= 0 {
		return bad("time must be positive")
	}
	switch c.Kind {
	case KindAdmit:
		if c.ExecutionID == "" || c.WorkflowID == "" {
			return bad("empty execution or workflow ID")
		}
		if c.MaxAttempts < 0 || c.MaxAttempts > MaxAttempts {
			return bad("attempt bound outside 0.." + itoa(MaxAttempts))
		}
		if c.Context != nil && !sortedUniqueKV(*c.Context) {
			return bad("context keys not sorted and unique")
		}
	case KindWake:
		if c.ExecutionID == "" || c.At <= 0 {
			return bad("empty execution ID or non-positive time")
		}
	case KindClaim:
		if c.Limit <= 0 || c.Duration <= 0 {
			return bad("non-positive limit or duration")
		}
	case KindRenew:
		if c.ExecutionID == "" || c.Duration <= 0 {
			return bad("empty execution ID or non-positive duration")
		}
	case KindRelease:
		if c.ExecutionID == "" || c.Duration < 0 {
			return bad("empty execution ID or negative delay")
		}
		if chainDepth(c.Cause) > MaxErrorDepth {
			return bad("cause chain deeper than " + itoa(MaxErrorDepth))
		}
	case KindAcknowledge:
		return checkAck(c.ExecutionID, &c.Outcome, bad)
	case KindAcknowledgeBatch:
		if len(c.Acks) == 0 || len(c.Acks) > MaxAcksPerCommand {
			return bad("acknowledgement count outside 1.." + itoa(MaxAcksPerCommand))
		}
		for i := range c.Acks {
			if err := checkAck(c.Acks[i].ExecutionID, &c.Acks[i].Outcome, bad); err != nil {
				return err
			}
		}
	case KindSaveStep:
		if c.ExecutionID == "" || c.Key == "" {
			return bad("empty execution ID or step key")
		}
	case KindStart:
		if c.ExecutionID == "" || c.Key == "" || c.WorkflowID == "" || c.ChildID == "" {
			return bad("empty caller, step key, workflow or child ID")
		}
	case KindCommit:
		for _, w := range c.Writes {
			if w.Key == "" {
				return bad("empty key")
			}
		}
	case KindWatch:
		if c.ExecutionID == "" || len(c.Keys) == 0 || !sortedUnique(c.Keys) || c.Keys[0] == "" {
			return bad("empty execution ID, or keys empty, unsorted or repeated")
		}
	case KindRetire:
		if c.At <= 0 || c.Limit <= 0 {
			return bad("non-positive time or limit")
		}
	case KindCancel:
		if c.ExecutionID == "" {
			return bad("empty execution ID")
		}
	case KindPutSchedule, KindDeleteSchedule, KindFireSchedules:
		return checkScheduleCommand(c, bad) // schedule_codec.go
	default:
		return bad("unknown command kind")
	}
	return nil
}

func checkAck(id string, o *Outcome, bad func(string) error) error {
	if id == "" {
		return bad("empty execution ID")
	}
	switch o.Status {
	case StatusSuspended:
		if o.HasRes || o.Error != nil {
			return bad("suspended outcome with a result or error")
		}
	case StatusCompleted:
		if o.Error != nil {
			return bad("completed outcome with an error")
		}
	case StatusFailed:
		if o.Error == nil || o.HasRes {
			return bad("failed outcome without an error, or with a result")
		}
	default:
		return bad("outcome status must be suspended, completed or failed")
	}
	return nil
}

func chainDepth(e *ErrorInfo) int {
	n := 0
	for ; e != nil; e = e.Cause {
		n++
	}
	return n
}

func sortedUnique(keys []string) bool {
	for i := 1; i < len(keys); i++ {
		if keys[i-1] >= keys[i] {
			return false
		}
	}
	return true
}

func sortedUniqueKV(kvs []KV) bool {
	for i := 1; i < len(kvs); i++ {
		if kvs[i-1].Key >= kvs[i].Key {
			return false
		}
	}
	return true
}
