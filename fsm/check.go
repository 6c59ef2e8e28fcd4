package fsm

import (
	"bytes"
	"encoding/binary"
)

// StateSummary is what a decoded state would report of itself: its counters,
// its record count (State.Len) and its due count (State.DueLen).
type StateSummary struct {
	Meta      Meta
	Records   int
	Due       int
	Schedules int
	Grants    int // claim request keys remembered
}

// Summary returns the state's summary, as CheckState reports it of the
// state's encoding.
func (s *State) Summary() StateSummary {
	return StateSummary{Meta: s.meta, Records: s.Len(), Due: s.DueLen(), Schedules: s.schedules.Len(), Grants: s.grants.Len()}
}

// BufferedReader is a Reader whose buffer a reader may look into
// (bufio.Reader is one).
type BufferedReader interface {
	Reader
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
	Size() int
}

// CheckState reads a state written by Encode and checks every rule
// DecodeState checks, byte for byte, but builds nothing: no record, index or
// string outlives the check, and it parses straight from the reader's
// buffer, so it costs a fraction of a decoding and leaves next to no
// garbage. It is how a snapshot just written is read back before anything
// older is deleted. It returns the summary the decoded state would give; a
// test holds it to DecodeState on random states, every truncation, every
// one-byte change and fuzzed input, so the two cannot drift apart. On
// success the reader is left just after the state, as DecodeState leaves it.
func CheckState(r BufferedReader) (StateSummary, error) {
	c := &checker{r: r}
	version := c.Uvarint()
	if version < 1 || version > StateVersion {
		if c.err != nil {
			return StateSummary{}, c.err
		}
		return StateSummary{}, decodeErr("state: unknown version " + itoa(version))
	}
	var sum StateSummary
	sum.Meta.Now = c.int()
	sum.Meta.NextWatchID = c.Uvarint()
	sum.Meta.Terminal = int(c.int())
	sum.Meta.Retired = int(c.int())
	for _, step := range []func(*StateSummary) error{
		func(s *StateSummary) error { return c.execs(s, version) }, c.sides,
		func(s *StateSummary) error { return c.retired(s, version) },
		func(s *StateSummary) error { return c.archived(s, version) }, // archive.go
		func(s *StateSummary) error { // forget.go
			if version >= 7 {
				s.Meta.ForgotBefore = c.int()
				if c.err == nil && s.Meta.ForgotBefore > s.Meta.Now {
					return decodeErr("state: a forget cutoff after the state's time")
				}
			}
			return c.err
		},
	} {
		if err := step(&sum); err != nil {
			return StateSummary{}, err
		}
	}
	if version >= 3 {
		if err := c.schedules(&sum, version); err != nil { // schedule_state.go
			return StateSummary{}, err
		}
	}
	// The change log (list_codec.go): read from version 4, derived before.
	if version < 4 {
		sum.Meta.ChangeSeq, sum.Meta.Admitted = 2*uint64(c.live), uint64(c.live)
	} else if err := c.changes(&sum); err != nil {
		return StateSummary{}, err
	}
	if version >= 5 {
		if err := c.grants(&sum); err != nil { // claimkeys.go
			return StateSummary{}, err
		}
	}
	if version >= 9 {
		if err := c.queueSettings(version); err != nil { // queue_settings.go
			return StateSummary{}, err
		}
	}
	if version >= 12 {
		if err := c.deadlines(); err != nil { // deadline.go
			return StateSummary{}, err
		}
	}
	c.r.Discard(c.off) // what follows the state is the caller's to read
	return sum, nil
}

// checker holds the state of one CheckState: the reader's buffered bytes it
// parses from, and scratch buffers. Each buffer has one role, so that a
// field read into one never overwrites another still needed.
//
// Invariant: the reader's position is at win[0]; off bytes of win are
// parsed but not yet discarded from the reader.
type checker struct {
	r   BufferedReader
	win []byte
	off int
	err error

	key     [2][]byte // the key of the item being read (an ID; an ID and a step key...)
	prev    [2][]byte // the key of the previous item
	seq     [2][]byte // the current and the previous key of a sorted list inside an item
	liveIDs []byte    // every record's ID, back to back, for the retired records' check
	liveEnd []int     // liveEnd[i] is the end of record i's ID in liveIDs
	// open: a hash of the ID of every record that has not ended, for the
	// deadlines' check (deadline.go): 8 bytes per such record.
	open []uint64

	live int // records read (not retired), for the change log's check
}

func (c *checker) fail(msg string) {
	if c.err == nil {
		c.err = decodeErr("state: " + msg)
	}
}

// refill discards what was parsed and looks at as much as the reader buffers.
func (c *checker) refill() {
	if c.off > 0 {
		c.r.Discard(c.off)
		c.off = 0
	}
	c.win, _ = c.r.Peek(c.r.Size())
}

// avail returns at least n unparsed bytes, refilling if needed; fewer only at
// the end of the input.
func (c *checker) avail(n int) []byte {
	if len(c.win)-c.off < n {
		c.refill()
	}
	return c.win[c.off:]
}

// Uvarint reads a varint by the rules of streamDecoder.Uvarint.
func (c *checker) Uvarint() uint64 {
	if c.off < len(c.win) && c.win[c.off] < 0x80 && c.err == nil {
		c.off++ // the common one-byte varint
		return uint64(c.win[c.off-1])
	}
	if c.err != nil {
		return 0
	}
	v, n, msg := uvarint(c.avail(binary.MaxVarintLen64))
	c.off += n
	if msg != "" {
		c.fail(msg)
		return 0
	}
	return v
}

func (c *checker) int() int64 {
	v := c.Uvarint()
	if v > uint64(maxTime) {
		c.fail("integer out of range")
		return 0
	}
	return int64(v)
}

func (c *checker) u32() uint32 {
	v := c.Uvarint()
	if v > 1<<32-1 {
		c.fail("count out of range")
	}
	return uint32(v)
}

func (c *checker) u16() uint16 {
	v := c.Uvarint()
	if v > 1<<16-1 {
		c.fail("count out of range")
	}
	return uint16(v)
}

func (c *checker) count(max uint64) int {
	n := c.Uvarint()
	if n > max {
		c.fail("count " + itoa(n) + " over the limit")
		return 0
	}
	return int(n)
}

func (c *checker) Byte() byte {
	if c.err != nil {
		return 0
	}
	b := c.avail(1)
	if len(b) == 0 {
		c.fail("unexpected end")
		return 0
	}
	c.off++
	return b[0]
}

func (c *checker) Bool() bool {
	v := c.Byte()
	if v > 1 {
		c.fail("bad boolean")
	}
	return v == 1
}

// skip passes over n bytes whose contents are not needed.
func (c *checker) skip(n uint64) {
	if c.err != nil {
		return
	}
	if n > maxStr {
		c.fail("string too long")
		return
	}
	if rest := uint64(len(c.win) - c.off); n <= rest {
		c.off += int(n)
		return
	}
	want := c.off + int(n)
	got, _ := c.r.Discard(want)
	c.win, c.off = nil, 0
	if got < want {
		c.fail("unexpected end")
	}
}

// read copies n bytes into dst, reusing its memory.
func (c *checker) read(dst []byte, n uint64) []byte {
	dst = dst[:0]
	if c.err != nil {
		return dst
	}
	if n > maxStr {
		c.fail("string too long")
		return dst
	}
	if b := c.avail(int(min(n, uint64(c.r.Size())))); uint64(len(b)) >= n {
		c.off += int(n)
		return append(dst, b[:n]...)
	}
	// Longer than the reader's buffer, or cut short: read it through.
	c.r.Discard(c.off)
	c.win, c.off = nil, 0
	dst = append(dst, make([]byte, n)...)
	for off := 0; off < len(dst); {
		m, err := c.r.Read(dst[off:])
		off += m
		if err != nil && off < len(dst) {
			c.fail("unexpected end")
			return dst[:0]
		}
	}
	return dst
}

// str reads a length-prefixed string into *buf and returns it.
func (c *checker) str(buf *[]byte) []byte {
	*buf = c.read(*buf, c.Uvarint())
	return *buf
}

// skipStr passes over a length-prefixed string whose bytes are not needed,
// and reports whether it was not empty.
func (c *checker) skipStr() bool {
	n := c.Uvarint()
	c.skip(n)
	return n > 0
}

// opt passes over an optional string and reports whether it is present.
func (c *checker) opt() (ok bool) {
	n := c.Uvarint()
	if n == 0 || c.err != nil {
		return false
	}
	c.skip(n - 1)
	return true
}

// sortedNext reads the next key of a sorted list inside an item and reports
// whether it comes strictly after the one before (first: there is none).
func (c *checker) sortedNext(first bool) bool {
	key := c.str(&c.seq[0])
	ok := first || bytes.Compare(c.seq[1], key) < 0
	c.seq[0], c.seq[1] = c.seq[1], key
	return ok
}

// after reports whether the key (a, b) comes strictly after the previous
// item's, and makes it the previous one. The first item has none.
func (c *checker) after(first bool, a, b []byte) bool {
	ok := first || bytes.Compare(a, c.prev[0]) > 0 || (bytes.Equal(a, c.prev[0]) && bytes.Compare(b, c.prev[1]) > 0)
	c.prev[0] = append(c.prev[0][:0], a...)
	c.prev[1] = append(c.prev[1][:0], b...)
	return ok
}

// nonEmpty stands for a string check() only needs to know is not empty.
func nonEmpty(ok bool) string {
	if !ok {
		return ""
	}
	return "x"
}

func (c *checker) execs(sum *StateSummary, version uint64) error {
	n := c.count(maxCount)
	// The retired records' IDs are checked against the records' only if the
	// counters say there are any (a disagreement is caught in retired).
	keepIDs := sum.Meta.Retired > 0
	var out Outcome
	for i := 0; i < n && c.err == nil; i++ {
		var e Execution
		id := c.str(&c.key[0])
		wf := c.str(&c.key[1])
		e.ID, e.WorkflowID = nonEmpty(len(id) > 0), nonEmpty(len(wf) > 0)
		e.HasParams = c.opt()
		if m := c.Uvarint(); m > 0 && c.err == nil {
			sorted := true
			for j := uint64(0); j < m-1 && c.err == nil; j++ {
				sorted = c.sortedNext(j == 0) && sorted
				c.skipStr() // the value
			}
			if !sorted {
				e.Context = &[]KV{{Key: "b"}, {Key: "a"}} // check() reports it
			}
		}
		if c.Bool() {
			c.skipStr()
			c.skipStr()
		}
		e.Status = Status(c.Byte())
		if e.Status.Terminal() {
			c.outcome(&out)
			e.Outcome = &out
		}
		e.AdmittedAt, e.UpdatedAt, e.DueAt, e.CoveredAt, e.LeaseExpiresAt = c.int(), c.int(), c.int(), c.int(), c.int()
		e.LeaseToken, e.LastToken = c.Uvarint(), c.Uvarint()
		e.StepCount, e.WatchCount = c.u32(), c.u16()
		if version >= 3 {
			e.MaxAttempts, e.Tries = c.u16(), c.u16()
		}
		upgradeTries(&e, version)
		if version >= 8 {
			if q := c.str(&c.seq[0]); len(q) > 0 {
				if bytes.Equal(q, wf) {
					return decodeErr("state: record " + quote(string(id)) + ": names its default queue")
				}
				e.Queue = "q" // checkRecord needs only to know it is named
			}
		}
		if version >= 11 {
			if p := c.Byte(); p < PriorityFirst || p > PriorityLast {
				return decodeErr("state: record " + quote(string(id)) + ": priority " + itoa(uint64(p)))
			}
		}
		if version >= 13 {
			if k := c.str(&c.seq[0]); c.err == nil && !validConcurrencyKey(string(k)) {
				return decodeErr("state: record " + quote(string(id)) + ": concurrency key not 0 to " + itoa(MaxConcurrencyKeyBytes) + " bytes of UTF-8")
			}
		}
		if c.err != nil {
			break
		}
		if !c.after(i == 0, id, nil) {
			return decodeErr("state: records out of order at " + quote(string(id)))
		}
		if msg := checkRecord(&e); msg != "" {
			return decodeErr("state: record " + quote(string(id)) + ": " + msg)
		}
		if keepIDs {
			c.liveIDs = append(c.liveIDs, id...)
			c.liveEnd = append(c.liveEnd, len(c.liveIDs))
		}
		if version >= 12 && !e.Status.Terminal() {
			c.open = append(c.open, idHash(id))
		}
		sum.Records++
		c.live++
		if _, ok := e.ClaimableAt(); ok {
			sum.Due++
		}
	}
	return c.err
}

// outcome reads an outcome as readOutcome does, keeping only its status.
func (c *checker) outcome(o *Outcome) {
	*o = Outcome{Status: Status(c.Byte())}
	switch o.Status {
	case StatusCompleted:
		o.HasRes = c.opt()
	case StatusFailed, StatusCancelled:
		c.errorInfo(o)
	}
}

// errorInfo reads an error chain as readErrorInfo does.
func (c *checker) errorInfo(o *Outcome) {
	depth := c.Uvarint()
	if depth > MaxErrorDepth {
		c.fail("error chain too deep")
		return
	}
	for i := uint64(0); i < depth && c.err == nil; i++ {
		c.skipStr()
		c.skipStr()
		c.skipStr()
	}
	if depth > 0 {
		o.Error = &ErrorInfo{}
	}
}

func (c *checker) sides(*StateSummary) error {
	for i, n := 0, c.count(maxCount); i < n && c.err == nil; i++ {
		id, key := c.str(&c.key[0]), c.str(&c.key[1])
		c.skipStr()
		if c.err == nil && !c.after(i == 0, id, key) {
			return decodeErr("state: steps out of order")
		}
	}
	for i, n := 0, c.count(maxCount); i < n && c.err == nil; i++ {
		caller, key := c.str(&c.key[0]), c.str(&c.key[1])
		c.skipStr() // child
		c.skipStr() // workflow
		c.skip(32)
		c.Byte()
		if c.err == nil && !c.after(i == 0, caller, key) {
			return decodeErr("state: start requests out of order")
		}
	}
	for i, n := 0, c.count(maxCount); i < n && c.err == nil; i++ {
		key := c.str(&c.key[0])
		c.skipStr()
		if c.err == nil && !c.after(i == 0, key, nil) {
			return decodeErr("state: keys out of order")
		}
	}
	var lastID uint64
	for i, n := 0, c.count(maxCount); i < n && c.err == nil; i++ {
		id := c.Uvarint()
		c.skipStr()
		sorted := true
		for j, k := 0, c.count(1<<16); j < k && c.err == nil; j++ {
			sorted = c.sortedNext(j == 0) && sorted
		}
		if c.err == nil && ((i > 0 && lastID >= id) || !sorted) {
			return decodeErr("state: watches out of order")
		}
		lastID = id
	}
	return c.err
}

func (c *checker) retired(sum *StateSummary, version uint64) error {
	live, n := 0, c.count(maxCount)
	var out Outcome
	for i := 0; i < n && c.err == nil; i++ {
		id := c.str(&c.key[0])
		c.skipStr()
		if version == 1 {
			hasRes := c.opt()
			out.Error = nil
			c.errorInfo(&out)
			c.int()
			c.int()
			c.u32()
			out.Status = Status(c.Byte())
			out.HasRes = hasRes && out.Status == StatusCompleted
		} else {
			c.outcome(&out)
			c.int()
			c.int()
			c.Uvarint()
			if c.Bool() {
				c.skipStr()
				c.skipStr()
			}
		}
		if c.err != nil {
			break
		}
		if !c.after(i == 0, id, nil) || !out.Status.Terminal() || len(id) == 0 {
			return decodeErr("state: retired records out of order or invalid")
		}
		if msg := checkOutcome(&out); msg != "" {
			return decodeErr("state: retired record " + quote(string(id)) + ": " + msg)
		}
		// Both lists are in ID order: one pass finds an ID in both.
		for live < len(c.liveEnd) && bytes.Compare(c.liveID(live), id) < 0 {
			live++
		}
		if live < len(c.liveEnd) && bytes.Equal(c.liveID(live), id) {
			return decodeErr("state: retired record " + quote(string(id)) + " is also live")
		}
	}
	if c.err != nil {
		return c.err
	}
	if n != sum.Meta.Retired {
		return decodeErr("state: retired count disagrees with the retired records")
	}
	sum.Records += n
	return nil
}

// liveID is record i's ID.
func (c *checker) liveID(i int) []byte {
	start := 0
	if i > 0 {
		start = c.liveEnd[i-1]
	}
	return c.liveIDs[start:c.liveEnd[i]]
}
