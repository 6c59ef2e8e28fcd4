package fsm

import (
	"cmp"
	"encoding/binary"
	"github.com/execstore/execstore/fsm/internal/record"
	"slices"
	"strings"

	"github.com/tidwall/btree"

	"github.com/execstore/execstore/internal/mutant"
)

// StateVersion is the version of the state encoding. Part of the snapshot
// format: a reader refuses versions it does not know, and reads every older
// one. Version 2 keeps a retired record's outcome as records keep theirs,
// and its parent link. Version 3 keeps each record's attempt bound and
// count, and knows the cancelled status (its outcome is written as a failed
// one's), and adds the schedules. Version 4 adds the change log
// (list_codec.go). Version 5 counts tries without an attempt bound too (an
// older record without a bound decodes with tries 1 once it was ever
// claimed: upgradeTries), and adds the claims' request keys
// (claimkeys.go). Version 6 counts the executions retired to the archive
// (archive.go). Version 8 keeps each record's queue (queues.go).
// Version 9 adds the queues' settings (queue_settings.go). Version 10
// adds their rate limits and grant logs (rate.go). Version 11 keeps each
// record's priority (priority.go). Version 12 adds the deadlines
// (deadline.go). Version 13 keeps each record's concurrency key and the
// queues' key limits (conckeys.go).
// Version 7 adds the cutoff of the forgotten executions
// (forget.go).
const StateVersion = 13

// Writer receives encoded state. It is io.Writer's method, declared here so
// that this package stays free of io (and its synchronisation).
type Writer interface {
	Write(p []byte) (n int, err error)
}

// Reader supplies encoded state; io.ByteReader plus io.Reader's method.
type Reader interface {
	Read(p []byte) (n int, err error)
	ReadByte() (byte, error)
}

// Encoded state layout (varints and strings as in the command codec):
//
//	version  uv  StateVersion
//	meta     now:uv next-watch:uv terminal:uv retired:uv
//	execs    count:uv, then per record in ID order:
//	         id:str workflow:str params:opt context:(count+1, pairs)
//	         parent:(0 | 1 caller:str key:str) status:1B [outcome if terminal]
//	         admitted:uv updated:uv due:uv covered:uv expires:uv
//	         lease-token:uv last-token:uv steps:uv watches:uv
//	         max-attempts:uv tries:uv  (version 3; before: both 0; before
//	         version 5, tries without a bound: see upgradeTries)
//	         queue:str  (version 8; before, and "": the default queue)
//	         priority:1B  (version 11; before: the default)
//	steps    count:uv, then (execution:str key:str value:str) in order
//	starts   count:uv, then (caller:str key:str child:str workflow:str
//	         sum:32B has-params:1B) in order
//	kv       count:uv, then (key:str value:str) in key order
//	watches  count:uv, then (id:uv execution:str count:uv key:str...) in ID order
//	retired  count:uv, then (id:str workflow:str status:1B [outcome as in
//	         records] admitted:uv updated:uv deliveries:uv
//	         parent:(0 | 1 caller:str key:str)) in ID order
//	         (version 1: id:str workflow:str result:opt error admitted:uv
//	         updated:uv deliveries:uv status:1B, and no parent)
//	archived (version 6) the counts of the executions retired to the
//	         archive: count:uv, then if it is not 0, by terminal status
//	         (completed, failed, cancelled) uv each, then count:uv and
//	         (workflow:str n:uv) in workflow order, n > 0
//	forgot   (version 7) before:uv, the forget cutoff (forget.go)
//	schedules (version 3) count:uv, then per schedule in ID order its
//	         definition as put-schedule encodes it, then next:uv last:uv
//	         caught-up:uv, then (version 8) queue:str
//	changes  (version 4) the change log: see list_codec.go
//	grants   (version 5) the claims' request keys: see claimkeys.go
//	queues   (version 9) the queues' settings: see queue_settings.go
//	         (version 10: and their rate limits, rate.go)
//	deadlines (version 12) see deadline.go
//
// The due index, the retirement queue, the two watch indexes and the
// schedules' due index are derived, not stored: decoding rebuilds the due
// index, the watch indexes and the schedules' index from what they index; the retirement queue is rebuilt by
// TrackRetirement, when retention is on.

// flushAt is how much encoded state is buffered before it is written.
const flushAt = 64 << 10

// encoder buffers output for a Writer; the first error sticks.
type encoder struct {
	w   Writer
	buf []byte
	err error
}

func (e *encoder) flush(force bool) {
	if e.err != nil || (len(e.buf) < flushAt && !force) {
		return
	}
	_, e.err = e.w.Write(e.buf)
	e.buf = e.buf[:0]
}

func (e *encoder) uv(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }

// Encode writes the whole state to w. It only reads the state, so it may run
// on a Copy in another goroutine while the original keeps applying.
func (s *State) Encode(w Writer) error { return s.encodeAs(w, StateVersion) }

// encodeAs writes the state in the layout of a version: StateVersion, or for
// tests of older layouts, version 5 (which has no archived section, and so
// holds no archived execution).
func (s *State) encodeAs(w Writer, version uint64) error {
	if version < 5 || version > StateVersion || (version < 6 && s.meta.Archived > 0) || (version < 7 && s.meta.ForgotBefore > 0) ||
		(version < 8 && s.namesQueues()) || (version < 9 && s.qsettings.Len() > 0) ||
		(version < 10 && len(s.rates) > 0) || (version < 11 && s.prio.Len() > 0) ||
		(version < 12 && s.deadlineOf.Len() > 0) || (version < 13 && (s.ckeys.Len() > 0 || s.limitsKeys())) {
		panic("fsm: encode in version " + itoa(version))
	}
	e := &encoder{w: w, buf: make([]byte, 0, flushAt+4096)}
	e.uv(version)
	e.uv(uint64(s.meta.Now))
	e.uv(s.meta.NextWatchID)
	e.uv(uint64(s.meta.Terminal))
	e.uv(uint64(s.meta.Retired))
	e.uv(uint64(s.execs.Len()))
	skip := ""
	if mutant.EncodeSkipsLastRecord {
		last, _ := s.execs.Max()
		skip = last.ID
	}
	s.execs.Scan(func(it execItem) bool {
		if skip != "" && it.ID == skip {
			return true
		}
		v := s.rec(it).Value()
		e.buf = appendExecution(e.buf, &v, version)
		if version >= 11 {
			e.buf = append(e.buf, s.priorityOf(v.ID))
		}
		if version >= 13 {
			e.buf = appendStr(e.buf, s.ConcurrencyKeyOf(v.ID))
		}
		e.flush(false)
		return e.err == nil
	})
	e.uv(uint64(s.steps.Len()))
	s.steps.Scan(func(st stepEntry) bool {
		e.buf = appendStr(appendStr(appendStr(e.buf, st.ExecutionID), st.Key), st.Value)
		e.flush(false)
		return e.err == nil
	})
	e.uv(uint64(s.starts.Len()))
	s.starts.Scan(func(st startEntry) bool {
		e.buf = appendStr(appendStr(appendStr(appendStr(e.buf, st.Caller), st.Key), st.Child), st.WorkflowID)
		e.buf = append(append(e.buf, st.ParamsSum[:]...), boolByte(st.HasParams))
		e.flush(false)
		return e.err == nil
	})
	e.uv(uint64(s.kv.Len()))
	s.kv.Scan(func(kv kvEntry) bool {
		e.buf = appendStr(appendStr(e.buf, kv.Key), kv.Value)
		e.flush(false)
		return e.err == nil
	})
	e.uv(uint64(s.watches.Len()))
	s.watches.Scan(func(w watch) bool {
		e.buf = binary.AppendUvarint(e.buf, w.ID)
		e.buf = appendStr(e.buf, w.ExecutionID)
		e.buf = binary.AppendUvarint(e.buf, uint64(len(w.Keys)))
		for _, k := range w.Keys {
			e.buf = appendStr(e.buf, k)
		}
		e.flush(false)
		return e.err == nil
	})
	e.uv(uint64(s.retired.Len()))
	s.retired.Scan(func(it retiredItem) bool {
		r := it.r
		e.buf = appendStr(appendStr(e.buf, it.ID), r.WorkflowID)
		e.buf = appendOutcome(e.buf, r.Outcome)
		e.uv(uint64(r.AdmittedAt))
		e.uv(uint64(r.UpdatedAt))
		e.uv(r.Deliveries)
		e.buf = appendParent(e.buf, r.Parent)
		e.flush(false)
		return e.err == nil
	})
	if version >= 6 {
		s.encodeArchived(e) // archive.go
	}
	if version >= 7 {
		e.uv(uint64(s.meta.ForgotBefore)) // forget.go
	}
	s.encodeSchedules(e, version) // schedule_state.go
	if e.err == nil {
		s.encodeChanges(e)
	}
	if e.err == nil {
		s.encodeGrants(e) // claimkeys.go
	}
	if e.err == nil && version >= 9 {
		s.encodeQueueSettings(e, version) // queue_settings.go
	}
	if e.err == nil && version >= 12 {
		s.encodeDeadlines(e) // deadline.go
	}
	e.flush(true)
	return e.err
}

func appendParent(dst []byte, p *Parent) []byte {
	if p == nil {
		return append(dst, 0)
	}
	return appendStr(appendStr(append(dst, 1), p.ExecutionID), p.StepKey)
}

func appendExecution(dst []byte, e *Execution, version uint64) []byte {
	dst = appendStr(dst, e.ID)
	dst = appendStr(dst, e.WorkflowID)
	dst = appendOpt(dst, e.Params, e.HasParams)
	dst = appendContext(dst, e.Context)
	dst = appendParent(dst, e.Parent)
	dst = append(dst, byte(e.Status))
	if e.Outcome != nil {
		dst = appendOutcome(dst, e.Outcome)
	}
	for _, v := range [...]uint64{uint64(e.AdmittedAt), uint64(e.UpdatedAt), uint64(e.DueAt), uint64(e.CoveredAt),
		uint64(e.LeaseExpiresAt), e.LeaseToken, e.LastToken, uint64(e.StepCount), uint64(e.WatchCount),
		uint64(e.MaxAttempts), uint64(e.Tries)} {
		dst = binary.AppendUvarint(dst, v)
	}
	if version >= 8 {
		dst = appendStr(dst, e.Queue)
	}
	return dst
}

// streamDecoder reads the codec's primitives from a Reader; the first error
// sticks. Strings are read into fresh memory.
type streamDecoder struct {
	r   Reader
	pk  peeker // r, when it is one; nil otherwise
	err error
}

func newStreamDecoder(r Reader) streamDecoder {
	pk, _ := r.(peeker)
	return streamDecoder{r: r, pk: pk}
}

// Err returns the first error met.
func (d *streamDecoder) Err() error { return d.err }

func (d *streamDecoder) fail(msg string) {
	if d.err == nil {
		d.err = decodeErr("state: " + msg)
	}
}

// peeker is what a buffered reader (bufio.Reader) offers beyond Reader: the
// decoder then reads a varint from the buffer in one step instead of one
// method call per byte.
type peeker interface {
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
}

func (d *streamDecoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	if d.pk != nil {
		buf, _ := d.pk.Peek(binary.MaxVarintLen64)
		v, n, msg := uvarint(buf)
		if n > 0 {
			d.pk.Discard(n)
		}
		if msg != "" {
			d.fail(msg)
			return 0
		}
		return v
	}
	var v uint64
	for shift := uint(0); ; shift += 7 {
		b, err := d.r.ReadByte()
		if err != nil {
			d.fail("unexpected end")
			return 0
		}
		if shift == 63 && b > 1 {
			d.fail("varint overflows")
			return 0
		}
		v |= uint64(b&0x7f) << shift
		if b < 0x80 {
			if b == 0 && shift > 0 {
				d.fail("overlong varint")
			}
			return v
		}
	}
}

// uvarint parses a varint at the start of buf by the rules of the byte-wise
// loop in Uvarint, and returns the bytes it consumed and the failure, if any.
func uvarint(buf []byte) (v uint64, n int, fail string) {
	v, n = binary.Uvarint(buf)
	switch {
	case n == 0:
		return 0, len(buf), "unexpected end"
	case n < 0:
		return 0, -n, "varint overflows"
	case n > 1 && buf[n-1] == 0:
		return 0, n, "overlong varint"
	}
	return v, n, ""
}

func (d *streamDecoder) int() int64 {
	v := d.Uvarint()
	if v > uint64(maxTime) {
		d.fail("integer out of range")
		return 0
	}
	return int64(v)
}

// maxStr bounds one string in a snapshot: larger than any limit the store
// accepts, small enough that a corrupt length cannot exhaust memory.
const maxStr = 256 << 20

func (d *streamDecoder) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > maxStr {
		d.fail("string too long")
		return nil
	}
	b := make([]byte, n)
	for off := 0; off < len(b); {
		m, err := d.r.Read(b[off:])
		off += m
		if err != nil && off < len(b) {
			d.fail("unexpected end")
			return nil
		}
	}
	return b
}

func (d *streamDecoder) Str() string { return string(d.bytes(d.Uvarint())) }

func (d *streamDecoder) Opt() (string, bool) {
	n := d.Uvarint()
	if n == 0 || d.err != nil {
		return "", false
	}
	return string(d.bytes(n - 1)), true
}

func (d *streamDecoder) Byte() byte {
	if d.err != nil {
		return 0
	}
	b, err := d.r.ReadByte()
	if err != nil {
		d.fail("unexpected end")
	}
	return b
}

// count reads a collection length, refusing absurd ones before allocating.
func (d *streamDecoder) count(max uint64) int {
	n := d.Uvarint()
	if n > max {
		d.fail("count " + itoa(n) + " over the limit")
		return 0
	}
	return int(n)
}

// maxCount bounds any collection in a snapshot (a corrupt count must not
// make the decoder allocate without bound before the checksum fails).
const maxCount = 1 << 32

// DecodeState reads a state written by Encode. It checks each record and the
// order of every collection; the caller checks the snapshot's checksum.
func DecodeState(r Reader) (*State, error) {
	sd := newStreamDecoder(r)
	d := &sd
	version := d.Uvarint()
	if version < 1 || version > StateVersion {
		if d.err != nil {
			return nil, d.err
		}
		return nil, decodeErr("state: unknown version " + itoa(version))
	}
	s := New()
	s.meta.Now = d.int()
	s.meta.NextWatchID = d.Uvarint()
	s.meta.Terminal = int(d.int())
	s.meta.Retired = int(d.int())
	recs, err := s.decodeExecs(d, version)
	if err != nil {
		return nil, err
	}
	if err := s.decodeSides(d); err != nil {
		return nil, err
	}
	if err := s.decodeRetired(d, version, recs); err != nil {
		return nil, err
	}
	if version >= 6 {
		if err := s.decodeArchived(d); err != nil { // archive.go
			return nil, err
		}
	}
	if version >= 7 {
		s.meta.ForgotBefore = d.int() // forget.go
		if d.err == nil && s.meta.ForgotBefore > s.meta.Now {
			return nil, decodeErr("state: a forget cutoff after the state's time")
		}
	}
	if version >= 3 {
		if err := s.decodeSchedules(d, version); err != nil { // schedule_state.go
			return nil, err
		}
	}
	if version == 1 {
		// Version 1 kept the child-start requests of retired executions;
		// retirement now drops them, as replaying its commands would.
		s.retired.Scan(func(it retiredItem) bool { s.deleteStarts(it.ID); return true })
	}
	// The change log, and the listing indexes built with it (list_codec.go).
	if version < 4 {
		s.deriveChanges(recs)
	} else if err := s.decodeChanges(d, recs); err != nil {
		return nil, err
	}
	if version >= 5 {
		if err := s.decodeGrants(d); err != nil { // claimkeys.go
			return nil, err
		}
	}
	if version >= 9 {
		if err := s.decodeQueueSettings(d, version); err != nil { // queue_settings.go
			return nil, err
		}
	}
	// Every record has its admission number now: the records tree.
	for _, e := range recs {
		s.execs.Load(execItem{ID: e.ID(), no: e.AdmitNo()})
	}
	s.execsWritten()
	if version >= 12 {
		if err := s.decodeDeadlines(d); err != nil { // deadline.go, which looks the records up
			return nil, err
		}
	}
	// The queues that limit keys count them, which needs the records: all
	// of them in one pass over the keys (conckeys.go).
	keyed := map[string]*queue{}
	s.qsettings.Scan(func(st QueueSettings) bool {
		if q, ok := s.queues[st.Name]; ok && st.KeyLimit > 0 {
			q.keyed = newKeyBook(st)
			keyed[st.Name] = q
		}
		return true
	})
	if len(keyed) > 0 {
		s.countKeys(keyed)
	}
	s.roomFreed = false
	return s, nil
}

// decodeExecs reads the records, in ID order, and indexes them by due time
// and lease expiry. The records tree is loaded once the change log has given
// them their admission numbers.
func (s *State) decodeExecs(d *streamDecoder, version uint64) ([]*stored, error) {
	n := d.count(maxCount)
	recs := make([]*stored, 0, min(n, 1<<20))
	workflows := map[string]string{} // interned: most records share a few
	// Each queue's lane's entries, in ID order.
	type entries struct{ due, leases []claimKey }
	byLane := map[*lane]*entries{}
	prev := ""
	for i := 0; i < n && d.err == nil; i++ {
		var e Execution
		d.execution(&e, workflows, version)
		prio := uint8(PriorityDefault)
		if version >= 11 {
			prio = d.Byte()
		}
		key := ""
		if version >= 13 {
			key = d.Str()
		}
		if d.err != nil {
			break
		}
		if !validConcurrencyKey(key) {
			return nil, decodeErr("state: record " + quote(e.ID) + ": concurrency key not 0 to " + itoa(MaxConcurrencyKeyBytes) + " bytes of UTF-8")
		}
		s.setConcurrencyKey(e.ID, key)
		if i > 0 && e.ID <= prev {
			return nil, decodeErr("state: records out of order at " + quote(e.ID))
		}
		if msg := checkRecord(&e); msg != "" {
			return nil, decodeErr("state: record " + quote(e.ID) + ": " + msg)
		}
		if prio < PriorityFirst || prio > PriorityLast {
			return nil, decodeErr("state: record " + quote(e.ID) + ": priority " + itoa(uint64(prio)))
		}
		s.setPriority(e.ID, prio)
		prev = e.ID
		st := record.New(&e, s.gen)
		recs = append(recs, st)
		if e.Terminal() {
			continue
		}
		q := s.queueNamed(e.QueueName())
		q.live++
		l := q.lane(prio)
		en := byLane[l]
		if en == nil {
			en = &entries{}
			byLane[l] = en
		}
		if at, ok := e.ClaimableAt(); ok && e.Leased() {
			en.leases = append(en.leases, claimKey{At: at, e: st})
		} else if ok {
			en.due = append(en.due, claimKey{At: at, e: st})
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	for l, en := range byLane {
		loadByTime(l.due, en.due)
		loadByTime(l.leases, en.leases)
	}
	return recs, nil
}

func (d *streamDecoder) execution(e *Execution, workflows map[string]string, version uint64) {
	*e = Execution{ID: d.Str()}
	e.WorkflowID = intern(workflows, d.Str())
	e.Params, e.HasParams = d.Opt()
	if n := d.Uvarint(); n > 0 && d.err == nil {
		kvs := make([]KV, 0, min(n-1, 1024))
		for i := uint64(0); i < n-1 && d.err == nil; i++ {
			kvs = append(kvs, KV{Key: d.Str(), Value: d.Str()})
		}
		e.Context = &kvs
	}
	e.Parent = d.parent()
	e.Status = Status(d.Byte())
	if e.Status.Terminal() {
		var out Outcome
		readOutcome(d, &out)
		e.Outcome = internOutcome(&out)
	}
	e.AdmittedAt, e.UpdatedAt, e.DueAt, e.CoveredAt, e.LeaseExpiresAt = d.int(), d.int(), d.int(), d.int(), d.int()
	e.LeaseToken, e.LastToken = d.Uvarint(), d.Uvarint()
	e.StepCount, e.WatchCount = d.u32(), d.u16()
	if version >= 3 {
		e.MaxAttempts, e.Tries = d.u16(), d.u16()
	}
	upgradeTries(e, version)
	if version >= 8 {
		e.Queue = intern(workflows, d.Str())
	}
}

// upgradeTries gives a record of a state version before 5 the try count
// version 5 keeps. Before it, a record without an attempt bound counted no
// tries, so how its last delivery ended is unknown: it decodes with one try
// once it was ever claimed (at least one claim, none known to have been
// acknowledged suspended), so that no repeated suspension of it is taken
// for a replay. A record with a bound kept its count.
func upgradeTries(e *Execution, version uint64) {
	if version < 5 && e.MaxAttempts == 0 {
		e.Tries = uint16(min(e.LastToken, 1))
	}
}

// Bool reads a byte that must be 0 or 1.
func (d *streamDecoder) Bool() bool {
	v := d.Byte()
	if v > 1 {
		d.fail("bad boolean")
	}
	return v == 1
}

// parent reads a parent link written by appendParent.
func (d *streamDecoder) parent() *Parent {
	if d.Bool() {
		return &Parent{ExecutionID: d.Str(), StepKey: d.Str()}
	}
	return nil
}

func (d *streamDecoder) u32() uint32 {
	v := d.Uvarint()
	if v > 1<<32-1 {
		d.fail("count out of range")
	}
	return uint32(v)
}

func (d *streamDecoder) u16() uint16 {
	v := d.Uvarint()
	if v > 1<<16-1 {
		d.fail("count out of range")
	}
	return uint16(v)
}

// decodeSides reads steps, start requests, the key-value store and watches,
// checking order, and rebuilds the watch indexes.
func (s *State) decodeSides(d *streamDecoder) error {
	for i, n := 0, d.count(maxCount); i < n && d.err == nil; i++ {
		st := stepEntry{ExecutionID: d.Str(), Key: d.Str(), Value: d.Str()}
		if last, ok := s.steps.Max(); ok && !stepLess(last, st) {
			return decodeErr("state: steps out of order")
		}
		s.steps.Load(st)
	}
	for i, n := 0, d.count(maxCount); i < n && d.err == nil; i++ {
		st := startEntry{Caller: d.Str(), Key: d.Str(), Child: d.Str(), WorkflowID: d.Str()}
		copy(st.ParamsSum[:], d.bytes(32))
		st.HasParams = d.Byte() == 1
		if last, ok := s.starts.Max(); ok && !startLess(last, st) {
			return decodeErr("state: start requests out of order")
		}
		s.starts.Load(st)
	}
	for i, n := 0, d.count(maxCount); i < n && d.err == nil; i++ {
		kv := kvEntry{Key: d.Str(), Value: d.Str()}
		if last, ok := s.kv.Max(); ok && !kvLess(last, kv) {
			return decodeErr("state: keys out of order")
		}
		s.kv.Load(kv)
	}
	var wkeys []watchKey
	for i, n := 0, d.count(maxCount); i < n && d.err == nil; i++ {
		w := watch{ID: d.Uvarint(), ExecutionID: d.Str()}
		k := d.count(1 << 16)
		for j := 0; j < k && d.err == nil; j++ {
			w.Keys = append(w.Keys, d.Str())
		}
		if last, ok := s.watches.Max(); (ok && last.ID >= w.ID) || !sortedUnique(w.Keys) {
			return decodeErr("state: watches out of order")
		}
		s.watches.Load(w)
		s.wexecs.Set(execWatch{ExecutionID: w.ExecutionID, ID: w.ID})
		for _, key := range w.Keys {
			wkeys = append(wkeys, watchKey{Key: key, ID: w.ID})
		}
	}
	if d.err != nil {
		return d.err
	}
	loadSorted(s.wkeys, wkeys, watchKeyLess)
	return nil
}

func (s *State) decodeRetired(d *streamDecoder, version uint64, live []*stored) error {
	workflows := map[string]string{}
	for i, n := 0, d.count(maxCount); i < n && d.err == nil; i++ {
		id := d.Str()
		r := &Retired{WorkflowID: intern(workflows, d.Str())}
		if version == 1 {
			r.Outcome = readRetiredV1(d, r)
		} else {
			var o Outcome
			readOutcome(d, &o)
			r.Outcome = internOutcome(&o)
			r.AdmittedAt, r.UpdatedAt = d.int(), d.int()
			r.Deliveries = d.Uvarint()
			r.Parent = d.parent()
		}
		if d.err != nil {
			break
		}
		it := retiredItem{ID: id, r: r}
		if last, ok := s.retired.Max(); (ok && !retiredLess(last, it)) || !r.Outcome.Status.Terminal() || id == "" {
			return decodeErr("state: retired records out of order or invalid")
		}
		if msg := checkOutcome(r.Outcome); msg != "" {
			return decodeErr("state: retired record " + quote(id) + ": " + msg)
		}
		if _, found := slices.BinarySearchFunc(live, id, func(e *stored, id string) int { return strings.Compare(e.ID(), id) }); found {
			return decodeErr("state: retired record " + quote(id) + " is also live")
		}
		s.retired.Load(it)
	}
	if d.err != nil {
		return d.err
	}
	if s.retired.Len() != s.meta.Retired {
		return decodeErr("state: retired count disagrees with the retired records")
	}
	return nil
}

// intern returns the one copy of s kept in seen: most records share a few
// workflow IDs. (The map is only looked up, never iterated.)
func intern(seen map[string]string, s string) string {
	if v, ok := seen[s]; ok {
		return v
	}
	seen[s] = s
	return s
}

// loadSorted sorts a derived index's items in the tree's order and bulk-loads
// them.
// loadByTime loads a claimable index from entries in ID order (the records'
// order in the encoding): a stable sort by time alone puts them in (time, ID)
// order, comparing integers, not IDs through the records.
func loadByTime(tr *btree.BTreeG[claimKey], items []claimKey) {
	byTime := func(a, b claimKey) int { return cmp.Compare(a.At, b.At) }
	if !slices.IsSortedFunc(items, byTime) {
		slices.SortStableFunc(items, byTime)
	}
	for _, it := range items {
		tr.Load(it)
	}
}

func loadSorted[T any](tr *btree.BTreeG[T], items []T, less func(a, b T) bool) {
	slices.SortFunc(items, func(a, b T) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
	for _, it := range items {
		tr.Load(it)
	}
}

// readRetiredV1 reads the rest of a version-1 retired record into r and
// returns its outcome.
func readRetiredV1(d *streamDecoder, r *Retired) *Outcome {
	var o Outcome
	o.Result, o.HasRes = d.Opt()
	o.Error = readErrorInfo(d)
	r.AdmittedAt, r.UpdatedAt = d.int(), d.int()
	r.Deliveries = uint64(d.u32())
	o.Status = Status(d.Byte())
	if o.Status != StatusCompleted {
		o.Result, o.HasRes = "", false
	}
	return internOutcome(&o)
}
