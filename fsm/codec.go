package fsm

import (
	"encoding/binary"
	"errors"
)

// CodecVersion is the first byte of every encoded command. Part of the WAL
// format: a reader refuses versions it does not know, and reads every older
// one. Version 2 adds an admission's attempt bound and a release's cause
// (trailing fields) and the cancel command; a version-1 command decodes with
// no bound and no cause. Version 3 adds a claim's request key (a trailing
// field); an older claim decodes with none. Version 4 adds the forget
// command. Version 5 adds queues (trailing fields): an admission's and a
// child start's queue, and the queues a claim serves; an older command
// decodes with the default queue and a claim of every queue. Version 6 adds
// the queues' settings commands (put-queue, delete-queue). Version 7 adds a
// put-queue's rate limit (trailing fields); an older put has none. Version 8
// adds an admission's priority (a trailing byte); an older admission has the
// default. Version 9 adds an admission's deadline (a trailing field) and the
// expire-deadlines command. Version 10 adds an admission's concurrency key
// and a put-queue's key limit (trailing fields); older ones have none.
const CodecVersion = 10

// maxErrorDepth bounds a recorded error's cause chain, here and in the codec.
const MaxErrorDepth = 16

// ErrDecode is wrapped by every decoding error.
var ErrDecode = errors.New("fsm: malformed command")

// Encoded command layout (all integers are unsigned varints unless noted;
// "str" is a varint length and the bytes; "opt" is a varint length+1 and the
// bytes, 0 meaning absent):
//
//	+---------+------+-----+----------------------------+
//	| version | kind | now | fields of the kind         |
//	| 1 byte  | 1 B  | uv  |                            |
//	+---------+------+-----+----------------------------+
//
// Each kind's fields are drawn beside its encoder in the table of kinds
// (kinds.go; the schedules' in schedule_codec.go). Version 1 has neither an
// admission's attempt bound nor a release's cause (trailing fields), nor the
// cancel command.

// AppendEncode appends c's encoding to dst. c must pass Check.
func AppendEncode(dst []byte, c *Command) []byte {
	return appendEncode(dst, c, CodecVersion)
}

// appendEncode appends c's encoding in the given codec version, leaving out
// what the version does not hold.
func appendEncode(dst []byte, c *Command, version byte) []byte {
	k := kindOf(c.Kind)
	if k == nil {
		panic("fsm: encode: unknown command kind " + c.Kind.String())
	}
	dst = append(dst, version, byte(c.Kind))
	dst = binary.AppendUvarint(dst, uint64(c.Now))
	return k.encode(dst, c, version)
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
	k := kindOf(c.Kind)
	switch {
	case d.err != nil:
		return d.err
	case k == nil:
		return decodeErr("unknown command kind " + itoa(uint64(c.Kind)))
	case version < k.since:
		return decodeErr(k.name + " command in codec version " + itoa(uint64(version)))
	}
	k.decode(&d, c, version)
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

// refuse fails with msg as it is: a value the format cannot hold, rather
// than bytes that end or run wrong at an offset.
func (d *Decoder) refuse(msg string) {
	if d.err == nil {
		d.err = decodeErr(msg)
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
	k := kindOf(c.Kind)
	if k == nil {
		return bad("unknown command kind")
	}
	if msg := k.check(c); msg != "" {
		return bad(msg)
	}
	return nil
}

func checkAck(id string, o *Outcome) string {
	if id == "" {
		return "empty execution ID"
	}
	switch o.Status {
	case StatusSuspended:
		if o.HasRes || o.Error != nil {
			return "suspended outcome with a result or error"
		}
	case StatusCompleted:
		if o.Error != nil {
			return "completed outcome with an error"
		}
	case StatusFailed:
		if o.Error == nil || o.HasRes {
			return "failed outcome without an error, or with a result"
		}
	default:
		return "outcome status must be suspended, completed or failed"
	}
	return ""
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
