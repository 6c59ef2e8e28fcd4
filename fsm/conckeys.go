package fsm

import (
	"errors"
	"maps"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/execstore/execstore/internal/mutant"

	"github.com/tidwall/btree"
)

// Concurrency keys (codec version 10, state version 13). An admission may
// give an execution a concurrency key; a queue's settings may limit how many
// executions of one key hold a slot at once (QueueSettings.KeyLimit), with
// one of two meanings of holding one:
//
//   - leased (the default): an execution holds a slot while it has a current
//     lease, expired or not. It protects a downstream service from more
//     than n calls at once for one key.
//   - live (QueueSettings.KeyLive): an execution holds a slot from its first
//     lease until it ends, through its suspensions and sleeps: a key's
//     executions run one after another (n = 1), each to its end.
//
// An execution that needs a slot and has a pending wake is waiting. A key's
// waiting executions get its free slots in the order they became due, (due
// time, ID), whatever their priority: with r slots free, its first r
// waiting executions are ready, in their lanes' due indexes, where claims
// take them by (priority, time, ID) among everything else; the rest are
// parked in no claimable index, so claims never look at them (no
// head-of-line blocking: a key with a million waiting executions costs a
// claim nothing). A claim that leases a ready execution gives it a slot, so
// the key's free slots and ready executions fall together and stay equal;
// an execution that gives its slot back (its lease ends, or, live, it
// ends) moves the key's first parked execution into the lanes. That rule
// is also the fair share between keys: a key never has more of its
// executions claimable at once than its free slots, so one key's backlog
// cannot fill the claims of others.
//
// The bookkeeping is the queue's (keyed), made when the queue's settings
// limit keys and rebuilt from the records when the limit or its meaning
// changes, and on decoding a snapshot: a snapshot keeps each record's key,
// not what is derived from it. The keys themselves are kept by execution
// ID beside the records, as priorities are, so a record without one pays
// nothing.

// MaxConcurrencyKeyBytes bounds a concurrency key.
const MaxConcurrencyKeyBytes = 200

// validConcurrencyKey reports whether a key is one a command may carry:
// "" (none), or 1 to MaxConcurrencyKeyBytes bytes of UTF-8.
func validConcurrencyKey(k string) bool {
	return len(k) <= MaxConcurrencyKeyBytes && utf8.ValidString(k)
}

// keyItem is an execution's concurrency key.
type keyItem struct{ id, key string }

func keyItemLess(a, b keyItem) bool { return a.id < b.id }

// ConcurrencyKeyOf returns an execution's concurrency key, "" for none (and
// for an execution without a record). It may run in several goroutines at
// once.
func (s *State) ConcurrencyKeyOf(id string) string {
	if s.ckeys.Len() == 0 {
		return ""
	}
	it, _ := s.ckeys.Get(keyItem{id: id})
	return it.key
}

// setConcurrencyKey keeps an execution's key, before its record is stored.
func (s *State) setConcurrencyKey(id, key string) {
	if key != "" {
		s.ckeys.Set(keyItem{id: id, key: key})
	}
}

// keyEntry is a waiting execution in a queue's ready or parked tree: by key,
// then (due time, ID), the order in which a key's slots are given.
type keyEntry struct {
	key string
	at  int64
	id  string
}

func keyEntryLess(a, b keyEntry) bool {
	switch {
	case a.key != b.key:
		return a.key < b.key
	case a.at != b.at:
		return a.at < b.at
	}
	return a.id < b.id
}

// keyCount is one key's slots held and waiting executions, ready and parked.
type keyCount struct{ holders, ready, parked int }

func (c keyCount) String() string {
	return itoa(uint64(c.holders)) + " holding, " + itoa(uint64(c.ready)) + " ready, " + itoa(uint64(c.parked)) + " parked"
}

// keyBook is a queue's concurrency-key bookkeeping while its settings limit
// keys.
type keyBook struct {
	limit  int
	live   bool
	counts map[string]keyCount     // keys with a slot held or an execution waiting
	ready  *btree.BTreeG[keyEntry] // waiting, in their lanes' due indexes
	parked *btree.BTreeG[keyEntry] // waiting, in no claimable index
	hint   [2]btree.PathHint       // ready, parked
}

func newKeyBook(st QueueSettings) *keyBook {
	return &keyBook{limit: st.KeyLimit, live: st.KeyLive, counts: map[string]keyCount{},
		ready: newTree(keyEntryLess), parked: newTree(keyEntryLess)}
}

func (k *keyBook) copy() *keyBook {
	return &keyBook{limit: k.limit, live: k.live, counts: maps.Clone(k.counts), ready: k.ready.Copy(), parked: k.parked.Copy()}
}

// Roles of a keyed execution.
const (
	keyNone    = iota // terminal, or neither holding a slot nor waiting
	keyHolder         // holds one of its key's slots
	keyWaiting        // needs a slot, with a pending wake at its due time
)

// role returns what an execution is to its key under the queue's meaning of
// holding a slot, and, waiting, its due time.
func (k *keyBook) role(terminal, leased, started bool, at int64, claimable bool) int {
	switch {
	case terminal:
		return keyNone
	case leased, k.live && started:
		return keyHolder
	case claimable:
		return keyWaiting
	}
	return keyNone
}

func (k *keyBook) roleOfStored(e *stored) (int, int64) {
	at, ok := e.ClaimableAt()
	return k.role(e.Terminal(), e.Leased(), e.LastToken() != 0, at, ok), at
}

func (k *keyBook) roleOfExec(e *Execution) (int, int64) {
	at, ok := e.ClaimableAt()
	return k.role(e.Terminal(), e.LeaseToken != 0, e.LastToken != 0, at, ok), at
}

// keyedOf returns the queue's key bookkeeping and an execution's key when
// the queue limits keys and the execution has one.
func (s *State) keyedOf(q *queue, id string) (*keyBook, string) {
	if q.keyed == nil {
		return nil, ""
	}
	key := s.ConcurrencyKeyOf(id)
	if key == "" {
		return nil, ""
	}
	return q.keyed, key
}

// putKeyed is put for an execution of a queue that limits keys, with a key:
// it moves the execution between its key's roles and the claimable indexes,
// then gives the key's free slots to its first waiting executions. oldRole
// and oldAt are what the replaced record was (keyNone for a new one), with
// oldIndexed and oldLeased where its claimable entry was.
func (s *State) putKeyed(q *queue, k *keyBook, key string, oldRole int, oldAt int64, oldIndexed, oldLeased bool, st *stored, e *Execution) {
	c := k.counts[key]
	l := q.lane(s.priorityOf(e.ID))
	switch oldRole {
	case keyHolder:
		c.holders--
		if oldIndexed {
			t, h := l.index(oldLeased)
			t.DeleteHint(claimKey{At: oldAt, e: st}, &h.del)
		}
	case keyWaiting:
		x := keyEntry{key: key, at: oldAt, id: e.ID}
		if _, ok := k.ready.DeleteHint(x, &k.hint[0]); ok {
			c.ready--
			l.due.DeleteHint(claimKey{At: oldAt, e: st}, &l.hints[0].del)
		} else if _, ok := k.parked.DeleteHint(x, &k.hint[1]); ok {
			c.parked--
		}
	}
	role, at := k.roleOfExec(e)
	switch role {
	case keyHolder:
		c.holders++
		if at, ok := e.ClaimableAt(); ok {
			t, h := l.index(e.LeaseToken != 0)
			t.SetHint(claimKey{At: at, e: st}, &h.set)
		}
	case keyWaiting:
		k.parked.SetHint(keyEntry{key: key, at: at, id: e.ID}, &k.hint[1])
		c.parked++
	}
	s.balanceKey(q, k, key, c)
}

// balanceKey gives a key's free slots to its first waiting executions: the
// first limit − holders of them, in (due time, ID) order, are ready (in
// their lanes' due indexes), the rest parked. c is the key's counts, which
// it stores (or drops, when the key has nothing left).
func (s *State) balanceKey(q *queue, k *keyBook, key string, c keyCount) {
	room := max(0, k.limit-c.holders)
	if mutant.KeyLimitOneOver {
		room++
	}
	for c.ready > room {
		x, _ := lastOfKey(k.ready, key)
		s.unready(q, k, x)
		c.ready, c.parked = c.ready-1, c.parked+1
	}
	for c.ready < room && c.parked > 0 {
		x, _ := firstOfKey(k.parked, key)
		s.makeReady(q, k, x)
		c.ready, c.parked = c.ready+1, c.parked-1
	}
	// Every ready execution comes before every parked one: a new waiting
	// execution (parked first) may come before the last ready.
	for c.ready > 0 && c.parked > 0 {
		r, _ := lastOfKey(k.ready, key)
		p, _ := firstOfKey(k.parked, key)
		if keyEntryLess(r, p) {
			break
		}
		s.unready(q, k, r)
		s.makeReady(q, k, p)
	}
	if c == (keyCount{}) {
		delete(k.counts, key)
	} else {
		k.counts[key] = c
	}
}

// makeReady moves a parked execution into its lane's due index.
func (s *State) makeReady(q *queue, k *keyBook, x keyEntry) {
	k.parked.DeleteHint(x, &k.hint[1])
	k.ready.SetHint(x, &k.hint[0])
	l := q.lane(s.priorityOf(x.id))
	l.due.SetHint(claimKey{At: x.at, e: s.lookup(x.id)}, &l.hints[0].set)
	s.roomFreed = true // a claim may take it: an idle dispatcher should look
}

// unready parks a ready execution: out of its lane's due index.
func (s *State) unready(q *queue, k *keyBook, x keyEntry) {
	k.ready.DeleteHint(x, &k.hint[0])
	k.parked.SetHint(x, &k.hint[1])
	l := q.lane(s.priorityOf(x.id))
	l.due.DeleteHint(claimKey{At: x.at, e: s.lookup(x.id)}, &l.hints[0].del)
}

func firstOfKey(t *btree.BTreeG[keyEntry], key string) (keyEntry, bool) {
	var x keyEntry
	found := false
	t.Ascend(keyEntry{key: key, at: math.MinInt64}, func(it keyEntry) bool {
		x, found = it, it.key == key
		return false
	})
	return x, found
}

func lastOfKey(t *btree.BTreeG[keyEntry], key string) (keyEntry, bool) {
	var x keyEntry
	found := false
	// After every entry of the key: its time is at most math.MaxInt64, and
	// an ID is never longer than maxStr.
	t.Descend(keyEntry{key: key + "\x00"}, func(it keyEntry) bool {
		if it.key == key+"\x00" {
			return true
		}
		x, found = it, it.key == key
		return false
	})
	return x, found
}

// keyClaimed notes that a claim leased a ready execution: it holds a slot
// now. Its claimable entry was cut from its lane by the claim.
func (k *keyBook) keyClaimed(key string, at int64, id string) {
	k.ready.DeleteHint(keyEntry{key: key, at: at, id: id}, &k.hint[0])
	c := k.counts[key]
	c.ready--
	c.holders++
	k.counts[key] = c
}

// waitedForSlot reports whether a claimed execution was waiting for a slot
// rather than holding one already.
func (k *keyBook) waitedForSlot(p *stored) bool {
	if k.live {
		return p.LastToken() == 0
	}
	return !p.Leased()
}

// rekey rebuilds a queue's key bookkeeping for its settings: every parked
// execution back in its lane, then, when the settings limit keys, each
// keyed execution of the queue counted or waiting again.
func (s *State) rekey(name string, st QueueSettings, limited bool) {
	q, ok := s.queues[name]
	if !ok {
		return
	}
	if k := q.keyed; k != nil {
		k.parked.Scan(func(x keyEntry) bool {
			l := q.lane(s.priorityOf(x.id))
			l.due.Set(claimKey{At: x.at, e: s.lookup(x.id)})
			return true
		})
		q.keyed = nil
		s.roomFreed = true
	}
	if !limited || st.KeyLimit == 0 {
		return
	}
	k := newKeyBook(st)
	q.keyed = k
	s.ckeys.Scan(func(it keyItem) bool {
		e := s.lookup(it.id)
		if e == nil || e.Terminal() || e.QueueName() != name {
			return true
		}
		c := k.counts[it.key]
		switch role, at := k.roleOfStored(e); role {
		case keyHolder:
			c.holders++
		case keyWaiting:
			k.ready.Set(keyEntry{key: it.key, at: at, id: it.id}) // in its lane's due index already
			c.ready++
		}
		k.counts[it.key] = c
		return true
	})
	for key, c := range k.counts {
		s.balanceKey(q, k, key, c)
	}
}

// QueueKeyStats is one concurrency key's counts in a queue that limits keys.
type QueueKeyStats struct {
	Key string
	// Holding counts the key's executions that hold a slot; Ready, those
	// waiting that may be claimed when due; Parked, those waiting for a
	// slot, which no claim looks at.
	Holding, Ready, Parked int
}

// QueueKeys calls fn with the counts of each key of a queue that limits
// keys, most waiting first (then by key), at most limit of them, until fn
// returns false. It may run in several goroutines at once.
func (s *State) QueueKeys(name string, limit int, fn func(QueueKeyStats) bool) {
	q, ok := s.queues[name]
	if !ok || q.keyed == nil || limit <= 0 {
		return
	}
	top := make([]QueueKeyStats, 0, min(limit, len(q.keyed.counts)))
	worse := func(a, b QueueKeyStats) bool { // a after b
		if a.Ready+a.Parked != b.Ready+b.Parked {
			return a.Ready+a.Parked < b.Ready+b.Parked
		}
		return a.Key > b.Key
	}
	for key, c := range q.keyed.counts {
		x := QueueKeyStats{Key: key, Holding: c.holders, Ready: c.ready, Parked: c.parked}
		if len(top) == limit && !worse(top[len(top)-1], x) {
			continue
		}
		i := len(top)
		if i < limit {
			top = append(top, x)
		} else {
			i--
		}
		for ; i > 0 && worse(top[i-1], x); i-- {
			top[i] = top[i-1]
		}
		top[i] = x
	}
	for _, x := range top {
		if !fn(x) {
			return
		}
	}
}

// parkedCount returns how many of a queue's executions are parked waiting
// for a key's slot.
func (q *queue) parkedCount() int {
	if q.keyed == nil {
		return 0
	}
	return q.keyed.parked.Len()
}

// isParked reports whether an execution waits parked for its key's slot.
func (s *State) isParked(q *queue, id string, at int64) bool {
	k, key := s.keyedOf(q, id)
	if k == nil {
		return false
	}
	_, ok := k.parked.Get(keyEntry{key: key, at: at, id: id})
	return ok
}

// checkKeys verifies the keys and each queue's key bookkeeping against the
// records: every key of a record, valid; a queue that limits keys has it,
// and only such a queue; each key's holders counted; its waiting
// executions ready exactly for its free slots, first in (due time, ID)
// order, the ready in their lanes' due indexes.
func (s *State) checkKeys() error {
	var err error
	fail := func(msg string) bool { err = errors.New("fsm: invariant violated: " + msg); return false }
	type want struct {
		c       keyCount
		waiting []keyEntry
	}
	wants := map[*queue]map[string]*want{}
	s.ckeys.Scan(func(it keyItem) bool {
		e := s.lookup(it.id)
		switch {
		case it.key == "" || !validConcurrencyKey(it.key):
			return fail("execution " + quote(it.id) + " keeps an invalid concurrency key")
		case e == nil:
			return fail("a concurrency key kept for " + quote(it.id) + ", which has no record")
		case e.Terminal():
			return true
		}
		q := s.queues[e.QueueName()]
		if q == nil || q.keyed == nil {
			return true
		}
		m := wants[q]
		if m == nil {
			m = map[string]*want{}
			wants[q] = m
		}
		w := m[it.key]
		if w == nil {
			w = &want{}
			m[it.key] = w
		}
		switch role, at := q.keyed.roleOfStored(e); role {
		case keyHolder:
			w.c.holders++
		case keyWaiting:
			w.waiting = append(w.waiting, keyEntry{key: it.key, at: at, id: it.id})
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, q := range s.queueList {
		st, _ := s.QueueSettingsOf(q.name)
		k := q.keyed
		switch {
		case k == nil && st.KeyLimit == 0:
			continue
		case k == nil:
			return errors.New("fsm: invariant violated: queue " + quote(q.name) + " limits keys and keeps no count of them")
		case st.KeyLimit == 0 || k.limit != st.KeyLimit || k.live != st.KeyLive:
			return errors.New("fsm: invariant violated: queue " + quote(q.name) + " counts keys by other settings than its own")
		}
		ready, parked, keys := 0, 0, 0
		for key, w := range wants[q] {
			room := max(0, k.limit-w.c.holders)
			if mutant.KeyLimitOneOver {
				room++
			}
			slices.SortFunc(w.waiting, func(a, b keyEntry) int {
				if keyEntryLess(a, b) {
					return -1
				}
				return 1 // (key, time, ID) is unique
			})
			w.c.ready = min(room, len(w.waiting))
			w.c.parked = len(w.waiting) - w.c.ready
			if w.c != (keyCount{}) {
				keys++
			}
			if got := k.counts[key]; got != w.c {
				return errors.New("fsm: invariant violated: queue " + quote(q.name) + " key " + quote(key) + " counts " +
					got.String() + ", its records " + w.c.String())
			}
			for i, x := range w.waiting {
				t, name := k.parked, "parked"
				if i < w.c.ready {
					t, name = k.ready, "ready"
				}
				if _, ok := t.Get(x); !ok {
					return errors.New("fsm: invariant violated: execution " + quote(x.id) + " waiting for key " + quote(key) + " is not " + name)
				}
				if i < w.c.ready {
					l := q.laneOf(s.priorityOf(x.id))
					if _, ok := l.due.Get(claimKey{At: x.at, e: s.lookup(x.id)}); !ok {
						return errors.New("fsm: invariant violated: ready execution " + quote(x.id) + " is not in its lane's due index")
					}
				}
			}
			ready, parked = ready+w.c.ready, parked+w.c.parked
		}
		if len(k.counts) != keys || k.ready.Len() != ready || k.parked.Len() != parked {
			return errors.New("fsm: invariant violated: queue " + quote(q.name) + " keeps keys or waiting executions its records do not have")
		}
	}
	return nil
}

// limitsKeys reports whether a queue's settings limit concurrency keys,
// which an encoding before state version 13 cannot keep.
func (s *State) limitsKeys() bool {
	limits := false
	s.qsettings.Scan(func(st QueueSettings) bool {
		limits = st.KeyLimit > 0
		return !limits
	})
	return limits
}
