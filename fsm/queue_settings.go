package fsm

import (
	"encoding/binary"
	"errors"

	"github.com/execstore/execstore/internal/mutant"
)

// Queue settings (codec version 6, state version 9; the rate limit, version
// 7 and 10: rate.go). A queue's settings
// bound what claims take from it; they are kept by queue name, apart from
// the queue's executions, so they outlive a queue that empties and apply to
// one not yet made:
//
//   - Concurrency n > 0: at most n of the queue's executions hold a current
//     lease at once, across every worker. A claim takes at most n minus the
//     queue's current leases of its due executions; it still takes its
//     expired leases (a redelivery supersedes a lease, it adds none). The
//     count is of current leases, expired or not, since an expired lease is
//     current until a claim supersedes it: a worker that stalls holds its
//     place until then. Lowering the limit below the leases held takes none
//     away; claims take nothing new until enough end.
//   - Rate n > 0 over Period p: claims grant at most n leases of the queue
//     in every window of length p (rate.go).
//   - Paused: claims take nothing from the queue, not even its expired
//     leases; admissions, wakes and everything else go on.
//
// put-queue creates or replaces a queue's settings (an identical put writes
// nothing); delete-queue removes them, returning the queue to no limit and
// not paused. Neither touches the queue's executions. A queue at its limit
// or paused is left out of NextDue, one without rate room is in it at its
// release time, so a dispatcher does not claim in a loop
// for work it cannot take; a command that ends a lease in a queue with a
// limit, or a put that may let claims take more, reports Became.Due.

// MaxQueueSettings bounds the queues with settings.
const MaxQueueSettings = 10_000

// MaxQueueConcurrency bounds QueueSettings.Concurrency.
const MaxQueueConcurrency = 1_000_000

// QueueSettings is a queue's flow control.
type QueueSettings struct {
	Name        string
	Concurrency int   // at most this many current leases at once; 0: no limit
	Paused      bool  // claims take nothing
	Rate        int   // at most this many leases granted in any Period; 0: no limit
	Period      int64 // the rate's window (ns): 0 without a rate
	// KeyLimit: at most this many executions of one concurrency key hold a
	// slot at once; 0: no limit. KeyLive: an execution holds its slot from
	// its first lease until it ends, not only while leased (conckeys.go).
	KeyLimit int
	KeyLive  bool
}

func settingsLess(a, b QueueSettings) bool { return a.Name < b.Name }

// QueueSettingsOf returns a queue's settings, and whether it has any.
func (s *State) QueueSettingsOf(name string) (QueueSettings, bool) {
	if s.qsettings.Len() == 0 {
		return QueueSettings{Name: name}, false
	}
	st, ok := s.qsettings.Get(QueueSettings{Name: name})
	if !ok {
		st.Name = name
	}
	return st, ok
}

// EachQueueSettings calls fn with every queue's settings in name order, from
// the first name after `after`, until fn returns false.
func (s *State) EachQueueSettings(after string, fn func(QueueSettings) bool) {
	s.qsettings.Ascend(QueueSettings{Name: after}, func(st QueueSettings) bool {
		if st.Name == after {
			return true
		}
		return fn(st)
	})
}

// QueueSettingsCount returns the number of queues with settings.
func (s *State) QueueSettingsCount() int { return s.qsettings.Len() }

// claimBounds returns what a claim at now may take from a queue: at most
// most leases in all (its limit, or less by the queue's rate room), at most
// due of them due wakes (less by its concurrency room); skip: nothing at
// all, not even a lease to fail (it is paused, or has no rate room). It
// brings the queue's rate window up to now, so only a claim that takes
// calls it.
func (s *State) claimBounds(q *queue, limit int, now int64) (most, due int, skip bool) {
	if s.qsettings.Len() == 0 {
		return limit, limit, false
	}
	st, ok := s.qsettings.Get(QueueSettings{Name: q.name})
	switch {
	case !ok:
		return limit, limit, false
	case st.Paused:
		if mutant.PausedQueueHandsOutOne {
			return limit, 1, false
		}
		return 0, 0, true
	}
	most = limit
	if st.Rate > 0 {
		if most = min(limit, s.rates[q.name].room(now)); most == 0 {
			return 0, 0, true
		}
	}
	return most, min(most, concurrencyRoom(st, q, most)), false
}

// concurrencyRoom returns how many due executions a queue's concurrency
// limit lets a claim lease (at most limit).
func concurrencyRoom(st QueueSettings, q *queue, limit int) int {
	if st.Concurrency == 0 {
		return limit
	}
	room := max(0, st.Concurrency-q.leased())
	if mutant.ConcurrencyLimitOneOver {
		room++
	}
	return min(limit, room)
}

// firstClaimable returns a queue's first entry a claim could take, at the
// earliest time it could: none of a paused queue, its due wakes only while
// it has concurrency room, and none before its rate's release time (the
// entry's time is then the release time).
func (s *State) firstClaimable(q *queue) (claimKey, bool) {
	if s.qsettings.Len() == 0 {
		return q.first()
	}
	st, ok := s.qsettings.Get(QueueSettings{Name: q.name})
	if !ok {
		return q.first()
	}
	var k claimKey
	switch {
	case st.Paused && !mutant.PausedQueueHandsOutOne:
		return claimKey{}, false
	case concurrencyRoom(st, q, 1) == 0:
		k, ok = q.firstLease()
	default:
		k, ok = q.first()
	}
	if ok && st.Rate > 0 {
		k.At = max(k.At, s.rates[q.name].release())
	}
	return k, ok
}

// limited reports whether a queue has a concurrency limit, so that a lease
// of it that ends may let a claim take more.
func (s *State) limited(name string) bool {
	if s.qsettings.Len() == 0 {
		return false
	}
	st, ok := s.qsettings.Get(QueueSettings{Name: name})
	return ok && st.Concurrency > 0
}

func (s *State) putQueue(c *Command, dry bool) Result {
	st := *c.QueueSettings
	old, exists := s.qsettings.Get(st)
	switch {
	case exists && old == st:
		return Result{QueueSettings: &old} // the same settings again: nothing changes
	case !exists && s.qsettings.Len() >= c.Limit:
		return Result{Code: CodeLimitExceeded}
	case dry:
		return mutates
	}
	s.qsettings.Set(st)
	s.setRate(old, exists, st) // rate.go
	if old.KeyLimit != st.KeyLimit || old.KeyLive != st.KeyLive {
		s.rekey(st.Name, st, true) // conckeys.go
	}
	// A resume or a higher limit may let claims take what they could not.
	return Result{QueueSettings: &st, Became: Transitions{Due: true}}
}

func (s *State) deleteQueue(c *Command, dry bool) Result {
	old, ok := s.qsettings.Get(QueueSettings{Name: c.Queue})
	switch {
	case !ok:
		return Result{} // nothing to delete: nothing changes
	case dry:
		return mutates
	}
	s.qsettings.Delete(old)
	delete(s.rates, old.Name)
	if old.KeyLimit > 0 {
		s.rekey(old.Name, QueueSettings{}, false) // conckeys.go
	}
	return Result{Became: Transitions{Due: old.Paused || old.Concurrency > 0 || old.Rate > 0 || old.KeyLimit > 0}}
}

// checkQueueSettings verifies the settings: each one valid, none the
// defaults (which a delete gives instead).
func (s *State) checkQueueSettings() error {
	var err error
	s.qsettings.Scan(func(st QueueSettings) bool {
		if msg := st.check(); msg != "" {
			err = errors.New("fsm: invariant violated: queue " + quote(st.Name) + ": " + msg)
		}
		return err == nil
	})
	return err
}

func (st *QueueSettings) check() string {
	switch {
	case st.Name == "":
		return "settings of a queue without a name"
	case st.Concurrency < 0 || st.Concurrency > MaxQueueConcurrency:
		return "concurrency outside 0.." + itoa(MaxQueueConcurrency)
	case st.Rate < 0 || st.Rate > MaxQueueRate:
		return "rate outside 0.." + itoa(MaxQueueRate)
	case st.Rate > 0 && (st.Period < MinRatePeriod || st.Period > MaxRatePeriod):
		return "rate period outside " + itoa(uint64(MinRatePeriod)) + ".." + itoa(uint64(MaxRatePeriod)) + " ns"
	case st.Period%MinRatePeriod != 0:
		return "rate period not a whole number of milliseconds"
	case st.Rate == 0 && st.Period != 0:
		return "a rate period without a rate"
	case st.KeyLimit < 0 || st.KeyLimit > MaxQueueConcurrency:
		return "key limit outside 0.." + itoa(MaxQueueConcurrency)
	case st.KeyLimit == 0 && st.KeyLive:
		return "a key limit's meaning without a key limit"
	case st.Concurrency == 0 && !st.Paused && st.Rate == 0 && st.KeyLimit == 0:
		return "settings that change nothing"
	}
	return ""
}

// ---- Codec ---------------------------------------------------------------------

//	put-queue     name:str concurrency:uv paused:1B limit:uv   (version 6)
//	              rate:uv period:uv                            (version 7)
//	              key-limit:uv key-live:1B                     (version 10)
//	delete-queue  name:str                                     (version 6)

func encodePutQueue(dst []byte, c *Command, version byte) []byte {
	st := c.QueueSettings
	dst = appendStr(dst, st.Name)
	dst = binary.AppendUvarint(dst, uint64(st.Concurrency))
	dst = append(dst, boolByte(st.Paused))
	dst = binary.AppendUvarint(dst, uint64(c.Limit))
	if version >= 7 {
		dst = appendRate(dst, st) // rate.go
	}
	if version >= 10 {
		dst = appendKeyLimit(dst, st)
	}
	return dst
}

func appendKeyLimit(dst []byte, st *QueueSettings) []byte {
	return append(binary.AppendUvarint(dst, uint64(st.KeyLimit)), boolByte(st.KeyLive))
}

func decodePutQueue(d *Decoder, c *Command, version byte) {
	c.QueueSettings = &QueueSettings{Name: d.Str(), Concurrency: int(d.Int()), Paused: d.Bool()}
	c.Limit = int(d.Int())
	if version >= 7 {
		c.QueueSettings.Rate, c.QueueSettings.Period = int(d.Int()), d.Int()
	}
	if version >= 10 {
		c.QueueSettings.KeyLimit, c.QueueSettings.KeyLive = int(d.Int()), d.Bool()
	}
}

func sizePutQueue(c *Command) int {
	st := c.QueueSettings
	return strLen(st.Name) + uvarintLen(uint64(st.Concurrency)) + 1 + uvarintLen(uint64(c.Limit)) +
		uvarintLen(uint64(st.Rate)) + uvarintLen(uint64(st.Period)) + uvarintLen(uint64(st.KeyLimit)) + 1
}

func boundPutQueue(b *Bounds) int { return b.id() + boundNum + 1 + 3*boundNum + boundNum + 1 }

func checkPutQueue(c *Command) string {
	switch {
	case c.QueueSettings == nil:
		return "no queue settings"
	case c.Limit <= 0:
		return "non-positive limit of queues with settings"
	}
	return c.QueueSettings.check()
}

func encodeDeleteQueue(dst []byte, c *Command, _ byte) []byte { return appendStr(dst, c.Queue) }

func decodeDeleteQueue(d *Decoder, c *Command, _ byte) { c.Queue = d.Str() }

func sizeDeleteQueue(c *Command) int { return strLen(c.Queue) }

func boundDeleteQueue(b *Bounds) int { return b.id() }

func checkDeleteQueue(c *Command) string {
	if c.Queue == "" {
		return "empty queue name"
	}
	return ""
}

// ---- Batch view ----------------------------------------------------------------

// settlesPutQueue: a put of the settings a logged put gives.
func (v *BatchView) settlesPutQueue(c *Command) bool {
	st, ok := v.queues[c.QueueSettings.Name]
	return ok && st != nil && *st == *c.QueueSettings
}

func (v *BatchView) notePutQueue(c *Command, _ *State) {
	v.noteQueue(c.QueueSettings.Name, c.QueueSettings)
}

// settlesDeleteQueue: a delete of what a logged delete removes.
func (v *BatchView) settlesDeleteQueue(c *Command) bool {
	st, ok := v.queues[c.Queue]
	return ok && st == nil
}

func (v *BatchView) noteDeleteQueue(c *Command, _ *State) { v.noteQueue(c.Queue, nil) }

func (v *BatchView) noteQueue(name string, st *QueueSettings) {
	if v.queues == nil {
		v.queues = make(map[string]*QueueSettings)
	}
	v.queues[name] = st
}

// ---- State encoding ------------------------------------------------------------

//	queues  (version 9) count:uv, then (name:str concurrency:uv paused:1B) in
//	        name order, each followed (version 10) by its rate and grant log
//	        (rate.go): rate:uv period:uv, then (version 13) key-limit:uv
//	        key-live:1B, then the log when the rate is not 0

func (s *State) encodeQueueSettings(e *encoder, version uint64) {
	e.uv(uint64(s.qsettings.Len()))
	s.qsettings.Scan(func(st QueueSettings) bool {
		e.buf = appendStr(e.buf, st.Name)
		e.uv(uint64(st.Concurrency))
		e.buf = append(e.buf, boolByte(st.Paused))
		if version >= 10 {
			e.buf = appendRate(e.buf, &st)
			if version >= 13 {
				e.buf = appendKeyLimit(e.buf, &st)
			}
			if st.Rate > 0 {
				s.rates[st.Name].encode(e)
			}
		}
		e.flush(false)
		return e.err == nil
	})
}

func (s *State) decodeQueueSettings(d *streamDecoder, version uint64) error {
	for i, n := 0, d.count(maxCount); i < n && d.err == nil; i++ {
		st := QueueSettings{Name: d.Str(), Concurrency: int(d.int()), Paused: d.Bool()}
		if version >= 10 {
			st.Rate, st.Period = int(d.int()), d.int()
		}
		if version >= 13 {
			st.KeyLimit, st.KeyLive = int(d.int()), d.Bool()
		}
		if d.err != nil {
			break
		}
		if last, ok := s.qsettings.Max(); ok && last.Name >= st.Name {
			return decodeErr("state: queue settings out of order at " + quote(st.Name))
		}
		if msg := st.check(); msg != "" {
			return decodeErr("state: queue " + quote(st.Name) + ": " + msg)
		}
		if st.Rate > 0 {
			l, err := decodeRateLog(d, st) // rate.go
			if err != nil {
				return err
			}
			if s.rates == nil {
				s.rates = make(map[string]*rateLog)
			}
			s.rates[st.Name] = l
		}
		s.qsettings.Load(st)
	}
	return d.err
}

// queueSettings checks the queue settings as decodeQueueSettings reads them.
func (c *checker) queueSettings(version uint64) error {
	for i, n := 0, c.count(maxCount); i < n && c.err == nil; i++ {
		name := c.str(&c.key[0])
		st := QueueSettings{Name: nonEmpty(len(name) > 0), Concurrency: int(c.int()), Paused: c.Bool()}
		if version >= 10 {
			st.Rate, st.Period = int(c.int()), c.int()
		}
		if version >= 13 {
			st.KeyLimit, st.KeyLive = int(c.int()), c.Bool()
		}
		if c.err != nil {
			break
		}
		if !c.after(i == 0, name, nil) {
			return decodeErr("state: queue settings out of order at " + quote(string(name)))
		}
		if msg := st.check(); msg != "" {
			return decodeErr("state: queue " + quote(string(name)) + ": " + msg)
		}
		if st.Rate > 0 {
			if err := c.rateLog(name, st); err != nil { // rate.go
				return err
			}
		}
	}
	return c.err
}
