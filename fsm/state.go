package fsm

import (
	"slices"
	"sort"
	"strings"

	"github.com/tidwall/btree"

	"github.com/execstore/execstore/fsm/internal/record"
)

// stored is a record as the state keeps it: see record.Stored.
type stored = record.Stored

// dueKey orders executions by when they can next be claimed, ties by ID.
type dueKey struct {
	At int64
	ID string
}

func dueLess(a, b dueKey) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	return a.ID < b.ID
}

// claimKey is an entry of a claimable index: dueKey's order, (time, ID),
// the ID read through the stored record, so that a claim reaches the records
// it takes without searching for them and the entry is two words. e is
// always the record stored for its ID (CheckInvariants verifies it); put
// replaces the entry when it replaces the record. A key to search with may
// point to any record of that ID.
type claimKey struct {
	At int64
	e  *stored
}

func claimLess(a, b claimKey) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	return a.e.ID() < b.e.ID()
}

// stepEntry is one saved step result.
type stepEntry struct {
	ExecutionID string
	Key         string
	Value       string
}

func stepLess(a, b stepEntry) bool {
	if a.ExecutionID != b.ExecutionID {
		return a.ExecutionID < b.ExecutionID
	}
	return a.Key < b.Key
}

// startEntry remembers one child start, keyed by (caller, step key), so a
// repeat returns the same child. ParamsSum is the SHA-256 of the params'
// canonical form.
type startEntry struct {
	Caller     string
	Key        string
	Child      string
	WorkflowID string
	ParamsSum  [32]byte
	HasParams  bool
}

func startLess(a, b startEntry) bool {
	if a.Caller != b.Caller {
		return a.Caller < b.Caller
	}
	return a.Key < b.Key
}

// kvEntry is one key of the key-value store.
type kvEntry struct {
	Key   string
	Value string
}

func kvLess(a, b kvEntry) bool { return a.Key < b.Key }

// watch is one registered watch: the first commit that writes any of Keys
// wakes ExecutionID and removes the whole watch.
type watch struct {
	ID          uint64
	ExecutionID string
	Keys        []string // sorted, unique; never mutated
}

func watchLess(a, b watch) bool { return a.ID < b.ID }

// watchKey indexes watches by key.
type watchKey struct {
	Key string
	ID  uint64
}

func watchKeyLess(a, b watchKey) bool {
	if a.Key != b.Key {
		return a.Key < b.Key
	}
	return a.ID < b.ID
}

// execWatch indexes watches by execution, so a terminal execution's watches
// can be dropped.
type execWatch struct {
	ExecutionID string
	ID          uint64
}

func execWatchLess(a, b execWatch) bool {
	if a.ExecutionID != b.ExecutionID {
		return a.ExecutionID < b.ExecutionID
	}
	return a.ID < b.ID
}

// execItem is the records tree's item: the ID inline (so a search touches
// only the nodes and the ID bytes) and the record's admission number, whose
// slot in the admission table (list.go) holds the record. Replacing a
// shared record therefore rewrites one slot and never writes this tree: it
// changes only when a record is admitted or retired, and a snapshot's copy
// of it is never copied node by node by the claims and acknowledgements
// that follow.
type execItem struct {
	ID string
	no uint64
}

func execLess(a, b execItem) bool { return a.ID < b.ID }

// Meta holds the state's scalar counters.
type Meta struct {
	// Now is the latest command time applied. Apply never lets time go
	// backwards: a command's effective time is max(Command.Now, Meta.Now).
	Now         int64
	NextWatchID uint64 // the ID the next watch gets; starts at 1
	Terminal    int    // executions with a terminal status, retired ones included
	Retired     int    // terminal executions retired to their compact record
	// Archived counts the terminal executions retired to the archive (see
	// Archive): counted in Terminal, kept in neither the records nor the
	// retired records.
	Archived int
	// ForgotBefore is the cutoff of the latest forget command (forget.go):
	// an archived execution last updated before it is forgotten, as if it
	// had never been admitted. 0: nothing is.
	ForgotBefore int64

	// ChangeSeq is the position of the latest change of a record's status
	// (see list.go); it only grows.
	ChangeSeq uint64
	// Admitted is the latest admission number (see list.go): admissions
	// applied, child starts included, retired ones too.
	Admitted uint64
}

// State is the whole state machine: every execution record and the indexes
// over them, the saved steps, the child-start requests, the key-value store
// and its watches. Only Apply changes it.
//
// A State is not safe for concurrent use; Copy gives an independent
// point-in-time state in O(1) that another goroutine may read while this one
// keeps applying (the btrees are copy-on-write).
type State struct {
	execs   *btree.BTreeG[execItem]
	steps   *btree.BTreeG[stepEntry]
	starts  *btree.BTreeG[startEntry]
	kv      *btree.BTreeG[kvEntry]
	watches *btree.BTreeG[watch]
	wkeys   *btree.BTreeG[watchKey]
	wexecs  *btree.BTreeG[execWatch]
	retired *btree.BTreeG[retiredItem]
	ended   *btree.BTreeG[dueKey] // (UpdatedAt, ID) of terminal records not yet retired, while trackEnded
	meta    Meta

	// queues: each queue's claimable indexes, by name and in the order
	// they were made (queues.go).
	queues    map[string]*queue
	queueList []*queue
	qsettings *btree.BTreeG[QueueSettings] // by name (queue_settings.go)
	rates     map[string]*rateLog          // by name, of the settings with a rate (rate.go)
	prio      *btree.BTreeG[prioItem]      // by execution ID, the priorities other than the default (priority.go)
	ckeys     *btree.BTreeG[keyItem]       // by execution ID, the concurrency keys (conckeys.go)
	keyCache  keyItem                      // the latest key the writer looked up (conckeys.go)
	// deadlines (deadline.go): of the executions that have not ended, by
	// (time, ID) and by ID.
	deadlines  *btree.BTreeG[dueKey]
	deadlineOf *btree.BTreeG[deadlineItem]
	// roomFreed: a lease of a queue with a concurrency limit ended during
	// the command being applied (Apply reports Became.Due).
	roomFreed bool

	// list: the secondary indexes for listing and the change log (list.go).
	list      listIndexes
	schedules *btree.BTreeG[Schedule] // by ID
	schedDue  *btree.BTreeG[dueKey]   // (Next, ID) of schedules with a next occurrence

	// Claim request keys (claimkeys.go): what each keyed claim granted, by
	// key; the same by expiry; and the leases they hold together.
	grants      *btree.BTreeG[grantItem]
	grantExp    *btree.BTreeG[grantExpiry]
	grantLeases int

	// trackEnded: ended is kept (see TrackRetirement); otherwise it is empty.
	trackEnded bool

	// archive, when set, holds the executions retired out of the state
	// (archive.go); retired is then empty.
	archive Archive
	// archivedCounts: what a decoded state's encoding held of the archived
	// executions' counts, until the listing indexes take them (archive.go).
	archivedCounts *archivedCounts

	// gen marks records this state may change in place: a record whose gen
	// equals it was created after the state's latest Copy, so no copy can
	// see it. Every other record is shared and is replaced, never changed,
	// until every copy has been released: then every record is the state's
	// alone again (see owns).
	gen uint32
	// copies counts this state's Copies not yet released; origin is, for a
	// copy, the state it was copied from, until it is released.
	copies int
	origin *State

	// Scratch reused by Apply; never part of the state's value.
	execHint      btree.PathHint
	execCursor    execCursor
	lastQueue     *queue        // the latest queue looked up (queueNamed)
	queueScratch  []*queue      // a claim's selected queues
	sourceScratch []claimSource // a claim of several queues' indexes
	boundScratch  []claimBound  // and their queues' bounds
	claimScratch  [3][]claimKey // claim's buffers (due prefix, lease prefix, taken)
	buf           *Buffers      // ApplyWith's buffers, during the call
}

// indexHints are the search hints of one claimable index: deletions and
// insertions each follow their own order.
type indexHints struct{ del, set btree.PathHint }

func newTree[T any](less func(a, b T) bool) *btree.BTreeG[T] {
	// The state has one writer, so the btree's own locks are not needed.
	return btree.NewBTreeGOptions(less, btree.Options{NoLocks: true})
}

// New returns an empty state.
func New() *State {
	return &State{
		execs:     newTree(execLess),
		steps:     newTree(stepLess),
		starts:    newTree(startLess),
		kv:        newTree(kvLess),
		watches:   newTree(watchLess),
		wkeys:     newTree(watchKeyLess),
		wexecs:    newTree(execWatchLess),
		retired:   newTree(retiredLess),
		ended:     newTree(dueLess),
		meta:      Meta{NextWatchID: 1},
		gen:       1,
		queues:    map[string]*queue{},
		qsettings: newTree(settingsLess),
		prio:      newTree(prioLess),
		ckeys:     newTree(keyItemLess),

		deadlines:  newTree(dueLess),
		deadlineOf: newTree(deadlineLess),

		list:      newListIndexes(),
		schedules: newTree(scheduleLess),
		schedDue:  newTree(dueLess),
		grants:    newTree(grantLess),
		grantExp:  newTree(grantExpiryLess),
	}
}

// Copy returns a point-in-time copy of the state in O(queues), plus, for
// each queue that limits concurrency keys, a copy of its map of keys (each
// key's state is shared, and cloned by whichever side changes it first:
// conckeys.go). The copy and the
// original share btree nodes and records until either changes them: the
// trees copy a node on its first change, and a shared record is replaced by
// a new one rather than changed (see gen). The copy may be read by another
// goroutine while this state keeps applying.
func (s *State) Copy() *State {
	// Both generations move past every record's, so neither state changes a
	// shared record in place. (Two per snapshot: a uint32 lasts two billion
	// snapshots of one process.)
	s.gen += 2
	s.copies++
	c := &State{
		gen:     s.gen - 1,
		origin:  s,
		execs:   s.execs.Copy(),
		steps:   s.steps.Copy(),
		starts:  s.starts.Copy(),
		kv:      s.kv.Copy(),
		watches: s.watches.Copy(),
		wkeys:   s.wkeys.Copy(),
		wexecs:  s.wexecs.Copy(),
		retired: s.retired.Copy(),
		ended:   s.ended.Copy(),
		meta:    s.meta,

		list:      s.list.copy(),
		schedules: s.schedules.Copy(),
		schedDue:  s.schedDue.Copy(),

		grants:      s.grants.Copy(),
		grantExp:    s.grantExp.Copy(),
		grantLeases: s.grantLeases,

		trackEnded: s.trackEnded,
		archive:    s.archive,
	}
	c.qsettings = s.qsettings.Copy()
	c.prio = s.prio.Copy()
	c.ckeys = s.ckeys.Copy()
	c.deadlines, c.deadlineOf = s.deadlines.Copy(), s.deadlineOf.Copy()
	if len(s.rates) > 0 {
		c.rates = make(map[string]*rateLog, len(s.rates))
		for name, l := range s.rates {
			c.rates[name] = l.copy()
		}
	}
	c.queues = make(map[string]*queue, len(s.queueList))
	c.queueList = make([]*queue, len(s.queueList))
	for i, q := range s.queueList {
		cq := q.copy()
		c.queues[q.name] = cq
		c.queueList[i] = cq
	}
	c.shared()
	return c
}

// Release tells s that c, a Copy of s, will not be read again (nor its
// records, which it shares with s). Once every Copy of s has been released,
// s changes its records in place again instead of replacing each on its
// first change after the latest Copy. Release must be called by the
// goroutine that applies to s (or under the lock that keeps it from
// applying), after every reader of c is done; a copy of c must be released
// before c is. It panics if c is not an unreleased Copy of s, or if a copy
// of c is still outstanding: either would let s change a record some state
// can still see.
func (s *State) Release(c *State) {
	switch {
	case c == nil || c.origin != s:
		panic("fsm: Release of a state that is not an unreleased copy of this one")
	case c.copies != 0:
		panic("fsm: Release of a copy whose own copies are not all released")
	}
	c.unshared()
	c.origin = nil
	s.copies--
}

// Origin returns the state s is an unreleased Copy of, or nil: the state to
// Release s to.
func (s *State) Origin() *State { return s.origin }

// Copies returns the number of s's Copies not yet released. While it is
// above zero, s replaces the records those copies share rather than change
// them in place.
func (s *State) Copies() int { return s.copies }

// Meta returns the state's counters.
func (s *State) Meta() Meta { return s.meta }

// Len returns the number of execution records, retired ones included
// (archived ones too).
func (s *State) Len() int { return s.execs.Len() + s.retired.Len() + s.meta.Archived }

// Get returns a copy of an execution's record. Unlike Apply and Precheck,
// Get may run in several goroutines at once (readers of a store hold a
// shared lock), so it uses no search hint: hints are the applying
// goroutine's scratch.
func (s *State) Get(id string) (Execution, bool) {
	if e := s.find(id, nil); e != nil {
		v := e.Value()
		return v.WithoutPositions(), true
	}
	return Execution{}, false
}

// lookup returns the stored record, or nil, using the applying goroutine's
// search hint and cursor. Change it only through put.
func (s *State) lookup(id string) *stored {
	c := &s.execCursor
	if c.valid && id > c.last && c.it.Next() {
		if it := c.it.Item(); it.ID == id {
			c.last = it.ID
			return s.rec(it)
		}
	}
	c.valid = false
	if !c.init {
		c.it, c.init = s.execs.Iter(), true
	}
	if c.it.SeekHint(execItem{ID: id}, &s.execHint) {
		if it := c.it.Item(); it.ID == id {
			c.valid, c.last = true, it.ID
			return s.rec(it)
		}
	}
	if e := s.findRetired(id); e != nil {
		return e
	}
	return s.archivedRecord(id)
}

// execCursor is the applying goroutine's position in the records tree after
// its latest lookup that found a live record there. The records an
// acknowledge-batch names were mostly claimed together, so they are mostly
// neighbours in ID order: trying the next item first makes most of its
// lookups O(1). Any write of the records tree (an admission, a retirement)
// invalidates the cursor; replacing a record does not write the tree.
type execCursor struct {
	it    btree.IterG[execItem]
	init  bool // it iterates s.execs
	valid bool // it is at last, and the tree has not been written since
	last  string
}

// execsWritten is called after every write of the records tree.
func (s *State) execsWritten() { s.execCursor.valid = false }

// find returns the stored record, or nil. A retired execution's record is
// expanded from its compact form; it is terminal, so no command changes it.
func (s *State) find(id string, hint *btree.PathHint) *stored {
	it, ok := s.execs.GetHint(execItem{ID: id}, hint)
	if ok {
		return s.rec(it)
	}
	return s.findRetired(id)
}

// findRetired returns a retired execution's record, or nil.
// (It is stored for the call alone: no command changes a terminal record.)
func (s *State) findRetired(id string) *stored {
	if s.retired.Len() > 0 {
		if it, ok := s.retired.Get(retiredItem{ID: id}); ok {
			return record.New(it.r.execution(id), 0)
		}
	}
	return nil
}

// rec returns the record of a records tree item.
func (s *State) rec(it execItem) *stored { return s.list.adm.get(it.no) }

func (s *State) exists(id string) bool { return s.lookup(id) != nil }

// Step returns a saved step value.
func (s *State) Step(executionID, key string) (string, bool) {
	e, ok := s.steps.Get(stepEntry{ExecutionID: executionID, Key: key})
	return e.Value, ok
}

// Read returns a key-value store value.
func (s *State) Read(key string) (string, bool) {
	e, ok := s.kv.Get(kvEntry{Key: key})
	return e.Value, ok
}

// NextDue returns the earliest time at which some execution can be claimed.
func (s *State) NextDue() (int64, bool) {
	k, ok := s.nextClaimable()
	return k.At, ok
}

// nextClaimable returns the first entry of every queue's claimable indexes
// in (time, ID) order.
func (s *State) nextClaimable() (claimKey, bool) { return s.firstIn(s.queueList) }

// DueLen returns the number of executions that are claimable now or later:
// those with a pending wake or a current lease.
func (s *State) DueLen() int {
	n := 0
	for _, q := range s.queueList {
		for _, l := range q.lanes {
			n += l.due.Len() + l.leases.Len()
		}
		n += q.parkedCount() // due, waiting for a slot of their key (conckeys.go)
	}
	return n
}

// Backlog counts, at time now, the executions due (a pending wake at or
// before now, no current lease), the current leases, and those of them
// expired by now, which a claim would supersede. The trees count their
// nodes, so each count is a binary search over positions: O(log² n), not
// a walk. Like Get, Backlog may run in several goroutines at once.
func (s *State) Backlog(now int64) (due, leases, expired int) {
	for _, q := range s.queueList {
		st := q.stats(now)
		due, leases, expired = due+st.Due, leases+st.Leased, expired+st.Expired
	}
	return due, leases, expired
}

// countAtOrBefore returns how many entries of a claimable index are at or
// before now.
func countAtOrBefore(tr *btree.BTreeG[claimKey], now int64) int {
	return sort.Search(tr.Len(), func(i int) bool {
		k, _ := tr.GetAt(i)
		return k.At > now
	})
}

// Upcoming calls fn with the due time and ID of the claimable executions in
// claim order (due wakes and current leases by their expiry, merged), at
// most limit of them, until fn returns false. It may run in several
// goroutines at once.
func (s *State) Upcoming(limit int, fn func(at int64, id string, leased bool) bool) {
	type entry struct {
		k      claimKey
		leased bool
	}
	var all []entry
	for _, q := range s.queueList {
		for _, l := range q.lanes {
			for _, leased := range [2]bool{false, true} {
				t, _ := l.index(leased)
				n := 0
				t.Scan(func(k claimKey) bool { all = append(all, entry{k, leased}); n++; return n < limit })
			}
		}
	}
	slices.SortFunc(all, func(a, b entry) int {
		if claimLess(a.k, b.k) {
			return -1
		}
		return 1 // (time, ID) is unique: no two entries are equal
	})
	for i := 0; i < len(all) && i < limit; i++ {
		if !fn(all[i].k.At, all[i].k.e.ID(), all[i].leased) {
			return
		}
	}
}

// Ascend calls fn for each execution that is not retired, in ID order,
// starting at from, until fn returns false, with a copy of its record.
func (s *State) Ascend(from string, fn func(e *Execution) bool) {
	s.execs.Ascend(execItem{ID: from}, func(it execItem) bool {
		e := s.rec(it).Value()
		return fn(&e)
	})
}

// StepsOf calls fn for each saved step of an execution in key order.
func (s *State) StepsOf(executionID string, fn func(key, value string) bool) {
	s.steps.Ascend(stepEntry{ExecutionID: executionID}, func(e stepEntry) bool {
		if e.ExecutionID != executionID {
			return false
		}
		return fn(e.Key, e.Value)
	})
}

// StepsAfter calls fn for each saved step of an execution whose key sorts
// after after, in key order, until fn returns false.
func (s *State) StepsAfter(executionID, after string, fn func(key, value string) bool) {
	s.steps.Ascend(stepEntry{ExecutionID: executionID, Key: after}, func(e stepEntry) bool {
		if e.ExecutionID != executionID {
			return false
		}
		if e.Key == after {
			return true
		}
		return fn(e.Key, e.Value)
	})
}

// WatchesOf returns the keys of each watch an execution has, in watch order.
func (s *State) WatchesOf(executionID string) [][]string {
	var out [][]string
	s.wexecs.Ascend(execWatch{ExecutionID: executionID}, func(w execWatch) bool {
		if w.ExecutionID != executionID {
			return false
		}
		ww, _ := s.watches.Get(watch{ID: w.ID})
		out = append(out, ww.Keys)
		return true
	})
	return out
}

// KVRange calls fn for each key-value entry with the given prefix in key order.
func (s *State) KVRange(prefix string, fn func(key, value string) bool) {
	s.kv.Ascend(kvEntry{Key: prefix}, func(e kvEntry) bool {
		if !strings.HasPrefix(e.Key, prefix) {
			return false
		}
		return fn(e.Key, e.Value)
	})
}

// put stores e as the record for e.ID and moves its claimable-index entry to
// where e needs it. old is the stored record e replaces, nil when e is new.
func (s *State) put(old *stored, e *Execution) {
	var oldAt int64
	oldOK, oldLeased := false, false
	if old != nil {
		oldAt, oldOK = old.ClaimableAt()
		oldLeased = old.Leased()
	}
	newAt, newOK := e.ClaimableAt()
	ends := old != nil && !old.Terminal() && e.Terminal() // before old may change in place
	oldRole := keyNone
	if old != nil && s.ckeys.Len() > 0 {
		if q := s.queues[old.QueueName()]; q != nil && q.keyed != nil {
			oldRole, _ = q.keyed.roleOfStored(old)
		}
	}
	stored := s.putRecord(old, e)
	if !oldOK && !newOK && !ends && old != nil {
		return // in no index before or after, and not ending
	}
	q := s.queueNamed(e.QueueName())
	if old == nil {
		q.live++
	}
	if k, key := s.keyedOf(q, e.ID); k != nil { // conckeys.go
		s.putKeyed(q, k, key, oldRole, oldAt, oldOK, oldLeased, stored, e)
		if oldLeased && !e.Leased() && s.limited(q.name) {
			s.roomFreed = true
		}
		if ends {
			s.endIn(q, e.ID)
		}
		return
	}
	l := q.lane(s.priorityOf(e.ID))
	if oldOK && newOK && oldAt == newAt && oldLeased == e.Leased() {
		if stored != old { // same place in the index, new record
			t, h := l.index(oldLeased)
			t.SetHint(claimKey{At: newAt, e: stored}, &h.set)
		}
		return
	}
	if oldOK {
		t, h := l.index(oldLeased)
		t.DeleteHint(claimKey{At: oldAt, e: stored}, &h.del)
		if oldLeased && !e.Leased() && s.limited(q.name) {
			s.roomFreed = true
		}
	}
	if newOK {
		t, h := l.index(e.Leased())
		t.SetHint(claimKey{At: newAt, e: stored}, &h.set)
	}
	if ends {
		s.endIn(q, e.ID)
	}
}

// endIn forgets what an execution that just ended kept beside its record:
// its deadline, and its queue when it was the queue's last live execution.
func (s *State) endIn(q *queue, id string) {
	s.dropDeadline(id) // deadline.go
	if q.live--; q.live == 0 {
		s.dropQueue(q)
	}
}

// putRecord stores e as the record for e.ID, leaving the claimable indexes
// to the caller, and returns the stored record. A record no copy can see is
// changed in place (no allocation, no tree search); a shared one is replaced
// in its admission slot (no tree search either).
func (s *State) putRecord(old *stored, e *Execution) *stored {
	// The listing indexes and the change log follow every record (list.go).
	var was Status
	if old != nil {
		was = old.Status()
	}
	changed := old == nil || was != e.Status
	if changed {
		e.ChangeSeq = s.nextChangeSeq()
		if old == nil {
			s.meta.Admitted++
			e.AdmitNo = s.meta.Admitted
		}
	}
	var stored *stored
	if old != nil {
		// In place when no copy can see old: every record of a state that
		// has no unreleased Copy and is not itself one; otherwise only the
		// records stored since its latest Copy, whose gen is the state's.
		stored = record.Put(old, e, s.gen, s.copies == 0 && s.origin == nil)
	} else {
		stored = record.New(e, s.gen)
		s.execs.SetHint(execItem{ID: e.ID, no: e.AdmitNo}, &s.execHint)
		s.execsWritten()
	}
	switch {
	case old == nil:
		s.indexNew(stored)
	case changed:
		s.reindex(stored, was)
	case stored != old:
		s.repoint(stored)
	}
	return stored
}

// ExpiredLeases calls fn for the current leases that have expired by now, in
// (expiry, ID) order, at most limit of them: the leases a claim at now may
// supersede.
func (s *State) ExpiredLeases(now int64, limit int, fn func(id string, token uint64)) {
	s.ExpiredLeasesIn(nil, now, limit, fn)
}

// ExpiredLeasesIn is ExpiredLeases for the leases of the named queues (every
// queue when names is empty): the leases a claim of those queues at now may
// supersede. With several queues it calls fn for each queue's first limit,
// which holds the claim's.
func (s *State) ExpiredLeasesIn(names []string, now int64, limit int, fn func(id string, token uint64)) {
	for _, q := range s.selectQueues(names) {
		for _, l := range q.lanes {
			n := 0
			l.leases.Scan(func(k claimKey) bool {
				if k.At > now || n == limit {
					return false
				}
				fn(k.e.ID(), k.e.LeaseToken())
				n++
				return true
			})
		}
	}
}
