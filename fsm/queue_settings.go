package fsm

import (
	"encoding/binary"
	"errors"

	"github.com/execstore/execstore/internal/mutant"
)

// Queue settings (codec version 6, state version 9). A queue's settings
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
//   - Paused: claims take nothing from the queue, not even its expired
//     leases; admissions, wakes and everything else go on.
//
// put-queue creates or replaces a queue's settings (an identical put writes
// nothing); delete-queue removes them, returning the queue to no limit and
// not paused. Neither touches the queue's executions. A queue at its limit
// or paused is left out of NextDue, so a dispatcher does not claim in a loop
// for work it cannot take; a command that ends a lease in a queue with a
// limit, or a put that may let claims take more, reports Became.Due.

// MaxQueueSettings bounds the queues with settings.
const MaxQueueSettings = 10_000

// MaxQueueConcurrency bounds QueueSettings.Concurrency.
const MaxQueueConcurrency = 1_000_000

// QueueSettings is a queue's flow control.
type QueueSettings struct {
	Name        string
	Concurrency int  // at most this many current leases at once; 0: no limit
	Paused      bool // claims take nothing
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

// dueRoom returns how many of a queue's due executions a claim may lease
// now: none when it is paused, its limit less its current leases when it
// has one, else limit (the claim's own bound). paused says whether the
// claim takes nothing at all from it.
func (s *State) dueRoom(q *queue, limit int) (room int, paused bool) {
	if s.qsettings.Len() == 0 {
		return limit, false
	}
	st, ok := s.qsettings.Get(QueueSettings{Name: q.name})
	switch {
	case !ok:
		return limit, false
	case st.Paused:
		if mutant.PausedQueueHandsOutOne {
			return 1, false
		}
		return 0, true
	case st.Concurrency > 0:
		room := max(0, st.Concurrency-q.leases.Len())
		if mutant.ConcurrencyLimitOneOver {
			room++
		}
		return min(limit, room), false
	}
	return limit, false
}

// firstClaimable returns a queue's first entry a claim could take now: its
// first expired lease or due wake, the due wakes only while it has room.
func (s *State) firstClaimable(q *queue) (claimKey, bool) {
	room, paused := s.dueRoom(q, 1)
	switch {
	case paused:
		return claimKey{}, false
	case room == 0:
		return q.leases.Min()
	}
	return q.first()
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
	return Result{Became: Transitions{Due: old.Paused || old.Concurrency > 0}}
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
	case st.Concurrency == 0 && !st.Paused:
		return "settings that change nothing"
	}
	return ""
}

// ---- Codec ---------------------------------------------------------------------

//	put-queue     name:str concurrency:uv paused:1B limit:uv   (version 6)
//	delete-queue  name:str                                     (version 6)

func encodePutQueue(dst []byte, c *Command, _ byte) []byte {
	st := c.QueueSettings
	dst = appendStr(dst, st.Name)
	dst = binary.AppendUvarint(dst, uint64(st.Concurrency))
	dst = append(dst, boolByte(st.Paused))
	return binary.AppendUvarint(dst, uint64(c.Limit))
}

func decodePutQueue(d *Decoder, c *Command, _ byte) {
	c.QueueSettings = &QueueSettings{Name: d.Str(), Concurrency: int(d.Int()), Paused: d.Bool()}
	c.Limit = int(d.Int())
}

func sizePutQueue(c *Command) int {
	return strLen(c.QueueSettings.Name) + uvarintLen(uint64(c.QueueSettings.Concurrency)) + 1 + uvarintLen(uint64(c.Limit))
}

func boundPutQueue(b *Bounds) int { return b.id() + boundNum + 1 + boundNum }

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
//	        name order

func (s *State) encodeQueueSettings(e *encoder) {
	e.uv(uint64(s.qsettings.Len()))
	s.qsettings.Scan(func(st QueueSettings) bool {
		e.buf = appendStr(e.buf, st.Name)
		e.uv(uint64(st.Concurrency))
		e.buf = append(e.buf, boolByte(st.Paused))
		e.flush(false)
		return e.err == nil
	})
}

func (s *State) decodeQueueSettings(d *streamDecoder) error {
	for i, n := 0, d.count(maxCount); i < n && d.err == nil; i++ {
		st := QueueSettings{Name: d.Str(), Concurrency: int(d.int()), Paused: d.Bool()}
		if d.err != nil {
			break
		}
		if last, ok := s.qsettings.Max(); ok && last.Name >= st.Name {
			return decodeErr("state: queue settings out of order at " + quote(st.Name))
		}
		if msg := st.check(); msg != "" {
			return decodeErr("state: queue " + quote(st.Name) + ": " + msg)
		}
		s.qsettings.Load(st)
	}
	return d.err
}

// queueSettings checks the queue settings as decodeQueueSettings reads them.
func (c *checker) queueSettings() error {
	for i, n := 0, c.count(maxCount); i < n && c.err == nil; i++ {
		name := c.str(&c.key[0])
		st := QueueSettings{Name: nonEmpty(len(name) > 0), Concurrency: int(c.int()), Paused: c.Bool()}
		if c.err != nil {
			break
		}
		if !c.after(i == 0, name, nil) {
			return decodeErr("state: queue settings out of order at " + quote(string(name)))
		}
		if msg := st.check(); msg != "" {
			return decodeErr("state: queue " + quote(string(name)) + ": " + msg)
		}
	}
	return c.err
}
