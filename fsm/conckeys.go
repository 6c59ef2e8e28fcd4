package fsm

import (
	"errors"
	"maps"
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

// keyOf is ConcurrencyKeyOf for the writer, which remembers the latest key
// it looked up: an acknowledgement looks its execution's up twice (its
// record, its result), and so does a claim. Readers must not call it.
func (s *State) keyOf(id string) string {
	if s.ckeys.Len() == 0 {
		return ""
	}
	if s.keyCache.id == id && id != "" {
		return s.keyCache.key
	}
	it, _ := s.ckeys.Get(keyItem{id: id})
	s.keyCache = keyItem{id: id, key: it.key}
	return it.key
}

// setConcurrencyKey keeps an execution's key, before its record is stored.
func (s *State) setConcurrencyKey(id, key string) {
	if s.keyCache.id == id {
		s.keyCache = keyItem{}
	}
	if key != "" {
		s.ckeys.Set(keyItem{id: id, key: key})
	}
}

// dropConcurrencyKey forgets a retired execution's key.
func (s *State) dropConcurrencyKey(id string) {
	if s.keyCache.id == id {
		s.keyCache = keyItem{}
	}
	s.ckeys.Delete(keyItem{id: id})
}

// waitEntry is a waiting execution in its key's ready or parked tree, in
// (due time, ID) order: the order in which a key's slots are given. e is
// its record, as the lanes' entries keep it: every change of a waiting
// record goes through put, which puts the entry back with the new one.
type waitEntry struct {
	at int64
	id string
	e  *stored
}

func waitLess(a, b waitEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.id < b.id
}

// keyState is one key's slots held and its waiting executions: ready (in
// their lanes' due indexes) and parked (in no claimable index). Each tree is
// nil while empty. gen is the keyBook generation that may change it in
// place; a keyState of another is shared with a copy, and cloned first.
type keyState struct {
	gen           uint32
	holders       int
	ready, parked *btree.BTreeG[waitEntry]
}

func treeLen(t *btree.BTreeG[waitEntry]) int {
	if t == nil {
		return 0
	}
	return t.Len()
}

// keyBook is a queue's concurrency-key bookkeeping while its settings limit
// keys: a small state per key, so a key's first parked execution and last
// ready one are a tree's ends, found without looking at other keys.
type keyBook struct {
	limit  int
	live   bool
	keys   map[string]*keyState // keys with a slot held or an execution waiting
	parked int                  // the parked executions of every key
	gen    uint32
}

func newKeyBook(st QueueSettings) *keyBook {
	return &keyBook{limit: st.KeyLimit, live: st.KeyLive, keys: map[string]*keyState{}, gen: 1}
}

// copy returns the bookkeeping for a Copy of the state: the map of keys is
// copied and each key's state shared, cloned by whichever side changes it
// first (both move to generations no key's state has).
func (k *keyBook) copy() *keyBook {
	k.gen += 2
	return &keyBook{limit: k.limit, live: k.live, keys: maps.Clone(k.keys), parked: k.parked, gen: k.gen - 1}
}

// mut returns a key's state to change, made or cloned as needed.
func (k *keyBook) mut(key string) *keyState {
	ks := k.keys[key]
	switch {
	case ks == nil:
		ks = &keyState{gen: k.gen}
		k.keys[key] = ks
	case ks.gen != k.gen:
		c := &keyState{gen: k.gen, holders: ks.holders}
		if ks.ready != nil {
			c.ready = ks.ready.Copy()
		}
		if ks.parked != nil {
			c.parked = ks.parked.Copy()
		}
		ks = c
		k.keys[key] = ks
	}
	return ks
}

// Roles of a keyed execution.
const (
	keyNone    = iota // terminal, or neither holding a slot nor waiting
	keyHolder         // holds one of its key's slots
	keyWaiting        // needs a slot, with a pending wake at its due time
)

// role returns what an execution is to its key under the queue's meaning of
// holding a slot.
func (k *keyBook) role(terminal, leased, started, claimable bool) int {
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
	return k.role(e.Terminal(), e.Leased(), e.LastToken() != 0, ok), at
}

func (k *keyBook) roleOfExec(e *Execution) (int, int64) {
	at, ok := e.ClaimableAt()
	return k.role(e.Terminal(), e.LeaseToken != 0, e.LastToken != 0, ok), at
}

// room is a key's free slots.
func (k *keyBook) room(ks *keyState) int {
	room := max(0, k.limit-ks.holders)
	if mutant.KeyLimitOneOver {
		room++
	}
	return room
}

// keyedOf returns the queue's key bookkeeping and an execution's key when
// the queue limits keys and the execution has one.
func (s *State) keyedOf(q *queue, id string) (*keyBook, string) {
	if q.keyed == nil {
		return nil, ""
	}
	key := s.keyOf(id)
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
	ks := k.mut(key)
	l := q.lane(s.priorityOf(e.ID))
	switch oldRole {
	case keyHolder:
		ks.holders--
		if oldIndexed {
			t, h := l.index(oldLeased)
			t.DeleteHint(claimKey{At: oldAt, e: st}, &h.del)
		}
	case keyWaiting:
		x := waitEntry{at: oldAt, id: e.ID}
		if _, ok := deleteWait(ks.ready, x); ok {
			l.due.DeleteHint(claimKey{At: oldAt, e: st}, &l.hints[0].del)
		} else if _, ok := deleteWait(ks.parked, x); ok {
			k.parked--
		}
	}
	inserted := false
	switch role, at := k.roleOfExec(e); role {
	case keyHolder:
		ks.holders++
		if at, ok := e.ClaimableAt(); ok {
			t, h := l.index(e.LeaseToken != 0)
			t.SetHint(claimKey{At: at, e: st}, &h.set)
		}
	case keyWaiting:
		x := waitEntry{at: at, id: e.ID, e: st}
		if treeLen(ks.parked) == 0 && treeLen(ks.ready) < k.room(ks) {
			// A free slot and none waiting before it: ready at once.
			setWait(&ks.ready, x)
			l.due.SetHint(claimKey{At: at, e: st}, &l.hints[0].set)
		} else {
			setWait(&ks.parked, x)
			k.parked++
			inserted = treeLen(ks.ready) > 0 // it may come before the last ready
		}
	}
	s.balanceKey(q, k, key, ks, inserted)
}

func setWait(t **btree.BTreeG[waitEntry], x waitEntry) {
	if *t == nil {
		*t = newTree(waitLess)
	}
	(*t).Set(x)
}

func deleteWait(t *btree.BTreeG[waitEntry], x waitEntry) (waitEntry, bool) {
	if t == nil {
		return waitEntry{}, false
	}
	return t.Delete(x)
}

// balanceKey gives a key's free slots to its first waiting executions: the
// first limit − holders of them, in (due time, ID) order, are ready (in
// their lanes' due indexes), the rest parked. With inserted, a waiting
// execution was just parked, which may come before the last ready. A key
// left with nothing is dropped.
func (s *State) balanceKey(q *queue, k *keyBook, key string, ks *keyState, inserted bool) {
	room := k.room(ks)
	for treeLen(ks.ready) > room {
		x, _ := ks.ready.PopMax()
		s.unready(q, k, ks, x)
	}
	for treeLen(ks.ready) < room && treeLen(ks.parked) > 0 {
		x, _ := ks.parked.PopMin()
		s.makeReady(q, k, ks, x)
	}
	// Every ready execution comes before every parked one.
	for inserted && treeLen(ks.ready) > 0 && treeLen(ks.parked) > 0 {
		r, _ := ks.ready.Max()
		p, _ := ks.parked.Min()
		if waitLess(r, p) {
			break
		}
		ks.ready.PopMax()
		ks.parked.PopMin()
		s.unready(q, k, ks, r)
		s.makeReady(q, k, ks, p)
	}
	if ks.holders == 0 && treeLen(ks.ready) == 0 && treeLen(ks.parked) == 0 {
		delete(k.keys, key)
	}
}

// makeReady moves an execution taken from its key's parked tree into the
// ready one and its lane's due index.
func (s *State) makeReady(q *queue, k *keyBook, ks *keyState, x waitEntry) {
	k.parked--
	setWait(&ks.ready, x)
	l := q.lane(s.priorityOf(x.id))
	l.due.SetHint(claimKey{At: x.at, e: x.e}, &l.hints[0].set)
	s.roomFreed = true // a claim may take it: an idle dispatcher should look
}

// unready parks an execution taken from its key's ready tree: out of its
// lane's due index.
func (s *State) unready(q *queue, k *keyBook, ks *keyState, x waitEntry) {
	setWait(&ks.parked, x)
	k.parked++
	l := q.lane(s.priorityOf(x.id))
	l.due.DeleteHint(claimKey{At: x.at, e: x.e}, &l.hints[0].del)
}

// keyClaimed notes that a claim leased a ready execution: it holds a slot
// now. Its claimable entry was cut from its lane by the claim.
func (k *keyBook) keyClaimed(key string, at int64, id string) {
	ks := k.mut(key)
	deleteWait(ks.ready, waitEntry{at: at, id: id})
	ks.holders++
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
		for _, ks := range k.keys {
			if ks.parked == nil {
				continue
			}
			ks.parked.Scan(func(x waitEntry) bool {
				l := q.lane(s.priorityOf(x.id))
				l.due.Set(claimKey{At: x.at, e: x.e})
				return true
			})
		}
		q.keyed = nil
		s.roomFreed = true
	}
	if !limited || st.KeyLimit == 0 {
		return
	}
	q.keyed = newKeyBook(st)
	s.countKeys(map[string]*queue{name: q})
}

// countKeys counts the keys of the given queues (by name), whose books are
// new and empty, from the records, in one pass over every kept key: a
// change of one queue's limit, or every limited queue when a snapshot is
// decoded. Then it gives each key's free slots to its first waiting
// executions.
func (s *State) countKeys(queues map[string]*queue) {
	s.ckeys.Scan(func(it keyItem) bool {
		e := s.lookup(it.id)
		if e == nil || e.Terminal() {
			return true
		}
		q := queues[e.QueueName()]
		if q == nil {
			return true
		}
		k := q.keyed
		switch role, at := k.roleOfStored(e); role {
		case keyHolder:
			k.mut(it.key).holders++
		case keyWaiting:
			setWait(&k.mut(it.key).ready, waitEntry{at: at, id: it.id, e: e}) // in its lane's due index already
		}
		return true
	})
	for _, q := range queues {
		for key, ks := range q.keyed.keys {
			s.balanceKey(q, q.keyed, key, ks, false)
		}
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
	top := make([]QueueKeyStats, 0, min(limit, len(q.keyed.keys)))
	worse := func(a, b QueueKeyStats) bool { // a after b
		if a.Ready+a.Parked != b.Ready+b.Parked {
			return a.Ready+a.Parked < b.Ready+b.Parked
		}
		return a.Key > b.Key
	}
	for key, ks := range q.keyed.keys {
		x := QueueKeyStats{Key: key, Holding: ks.holders, Ready: treeLen(ks.ready), Parked: treeLen(ks.parked)}
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
	return q.keyed.parked
}

// isParked reports whether an execution waits parked for its key's slot.
func (s *State) isParked(q *queue, id string, at int64) bool {
	if q.keyed == nil {
		return false
	}
	ks := q.keyed.keys[s.ConcurrencyKeyOf(id)]
	if ks == nil || ks.parked == nil {
		return false
	}
	_, ok := ks.parked.Get(waitEntry{at: at, id: id})
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
		holders int
		waiting []waitEntry
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
			w.holders++
		case keyWaiting:
			w.waiting = append(w.waiting, waitEntry{at: at, id: it.id, e: e})
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
		parked, keys := 0, 0
		for key, w := range wants[q] {
			if w.holders == 0 && len(w.waiting) == 0 {
				continue
			}
			keys++
			ks := k.keys[key]
			if ks == nil {
				return errors.New("fsm: invariant violated: queue " + quote(q.name) + " keeps no count of key " + quote(key))
			}
			slices.SortFunc(w.waiting, func(a, b waitEntry) int {
				if waitLess(a, b) {
					return -1
				}
				return 1 // (time, ID) is unique
			})
			ready := min(k.room(&keyState{holders: w.holders}), len(w.waiting))
			if ks.holders != w.holders || treeLen(ks.ready) != ready || treeLen(ks.parked) != len(w.waiting)-ready {
				return errors.New("fsm: invariant violated: queue " + quote(q.name) + " key " + quote(key) + " counts " +
					itoa(uint64(ks.holders)) + " holding, " + itoa(uint64(treeLen(ks.ready))) + " ready, " + itoa(uint64(treeLen(ks.parked))) +
					" parked; its records " + itoa(uint64(w.holders)) + ", " + itoa(uint64(ready)) + " and " + itoa(uint64(len(w.waiting)-ready)))
			}
			for i, x := range w.waiting {
				t, name := ks.parked, "parked"
				if i < ready {
					t, name = ks.ready, "ready"
				}
				if got, ok := t.Get(x); !ok || got.e != x.e {
					return errors.New("fsm: invariant violated: execution " + quote(x.id) + " waiting for key " + quote(key) + " is not " + name + " with its record")
				}
				if i < ready {
					l := q.laneOf(s.priorityOf(x.id))
					if _, ok := l.due.Get(claimKey{At: x.at, e: x.e}); !ok {
						return errors.New("fsm: invariant violated: ready execution " + quote(x.id) + " is not in its lane's due index")
					}
				}
			}
			parked += len(w.waiting) - ready
		}
		if len(k.keys) != keys || k.parked != parked {
			return errors.New("fsm: invariant violated: queue " + quote(q.name) + " keeps keys or parked executions its records do not have")
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
