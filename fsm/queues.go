package fsm

import (
	"slices"

	"github.com/execstore/execstore/internal/mutant"

	"github.com/tidwall/btree"
)

// Queues. Every execution is claimed from one queue, named when it is
// admitted (Command.Queue) or, by default, after its workflow ID: a worker
// that claims the queues of the workflows it runs never leases another
// workflow's execution unless someone put it in one of those queues by
// name. A claim names the queues it serves (Command.Queues); none means
// every queue.
//
// Each queue has its own two claimable indexes: due wakes by (time, ID) and
// current leases by (expiry, ID). A claim takes the earliest entries of the
// indexes of the queues it serves, merged in (time, ID) order, so the order
// in which queues are kept never shows: a claim of every queue takes exactly
// what a single index of every execution would give. A queue exists while it
// holds an execution that is not terminal (queue.live); it is made by the
// first admission to it and dropped when its last execution ends, so the
// queues kept are bounded by the live executions.

// MaxClaimQueues bounds the queues one claim names.
const MaxClaimQueues = 64

// ownQueue is what a record keeps of the queue a command names: "" for the
// default queue (none named, or the workflow's own name).
func ownQueue(named, workflowID string) string {
	if named == workflowID {
		return ""
	}
	return named
}

// namesQueues reports whether a record or a schedule names its queue,
// which an encoding before state version 8 cannot keep.
func (s *State) namesQueues() bool {
	named := false
	s.execs.Scan(func(it execItem) bool {
		named = s.rec(it).Value().Queue != ""
		return !named
	})
	s.schedules.Scan(func(sc Schedule) bool {
		named = named || sc.Queue != ""
		return !named
	})
	return named
}

// queue is one queue's claimable indexes: a lane of them for each priority
// its executions have (priority.go).
type queue struct {
	name  string
	lanes []*lane  // by priority, the first claimed first; the default's always
	live  int      // executions of the queue that are not terminal
	keyed *keyBook // while its settings limit concurrency keys (conckeys.go)
}

// lane is the claimable indexes of a queue's executions of one priority.
type lane struct {
	prio   uint8
	due    *btree.BTreeG[claimKey] // (DueAt, ID) of executions without a current lease
	leases *btree.BTreeG[claimKey] // (LeaseExpiresAt, ID) of executions with one
	hints  [2]indexHints           // due, leases
}

func newLane(prio uint8) *lane {
	return &lane{prio: prio, due: newTree(claimLess), leases: newTree(claimLess)}
}

func newQueue(name string) *queue {
	return &queue{name: name, lanes: []*lane{newLane(PriorityDefault)}}
}

// lane returns the queue's lane of a priority, made if it has none.
func (q *queue) lane(prio uint8) *lane {
	if len(q.lanes) == 1 && q.lanes[0].prio == prio {
		return q.lanes[0]
	}
	i, found := slices.BinarySearchFunc(q.lanes, prio, func(l *lane, p uint8) int { return int(l.prio) - int(p) })
	if !found {
		q.lanes = slices.Insert(q.lanes, i, newLane(prio))
	}
	return q.lanes[i]
}

// laneOf returns the queue's lane of a priority, nil if it has none.
func (q *queue) laneOf(prio uint8) *lane {
	for _, l := range q.lanes {
		if l.prio == prio {
			return l
		}
	}
	return nil
}

// index returns the claimable index an execution with or without a current
// lease belongs in, and its search hints.
func (l *lane) index(leased bool) (*btree.BTreeG[claimKey], *indexHints) {
	if leased {
		return l.leases, &l.hints[1]
	}
	return l.due, &l.hints[0]
}

// first returns the lane's first entry in (time, ID) order.
func (l *lane) first() (claimKey, bool) {
	d, dok := l.due.Min()
	ls, lok := l.leases.Min()
	if lok && (!dok || claimLess(ls, d)) {
		return ls, true
	}
	return d, dok
}

// first returns the queue's first entry in (time, ID) order, whatever its
// priority: the time something of it becomes claimable.
func (q *queue) first() (claimKey, bool) {
	if len(q.lanes) == 1 {
		return q.lanes[0].first()
	}
	var best claimKey
	found := false
	for _, l := range q.lanes {
		if k, ok := l.first(); ok && (!found || claimLess(k, best)) {
			best, found = k, true
		}
	}
	return best, found
}

// firstLease returns the queue's first current lease in (expiry, ID) order.
func (q *queue) firstLease() (claimKey, bool) {
	var best claimKey
	found := false
	for _, l := range q.lanes {
		if k, ok := l.leases.Min(); ok && (!found || claimLess(k, best)) {
			best, found = k, true
		}
	}
	return best, found
}

// leased counts the queue's current leases.
func (q *queue) leased() int {
	n := 0
	for _, l := range q.lanes {
		n += l.leases.Len()
	}
	return n
}

// stats counts the queue's executions at now.
func (q *queue) stats(now int64) QueueStats {
	st := QueueStats{Name: q.name, Live: q.live}
	st.Parked = q.parkedCount() // conckeys.go
	for _, l := range q.lanes {
		st.Due += countAtOrBefore(l.due, now)
		st.Leased += l.leases.Len()
		st.Expired += countAtOrBefore(l.leases, now)
	}
	return st
}

func (q *queue) copy() *queue {
	c := &queue{name: q.name, lanes: make([]*lane, len(q.lanes)), live: q.live}
	for i, l := range q.lanes {
		c.lanes[i] = &lane{prio: l.prio, due: l.due.Copy(), leases: l.leases.Copy()}
	}
	if q.keyed != nil {
		c.keyed = q.keyed.copy()
	}
	return c
}

// queueNamed returns the queue of that name, made if it does not exist.
// The latest queue found is remembered: a run of commands on one queue
// looks it up without hashing its name.
func (s *State) queueNamed(name string) *queue {
	if q := s.lastQueue; q != nil && q.name == name {
		return q
	}
	q, ok := s.queues[name]
	if !ok {
		q = newQueue(name)
		if s.qsettings.Len() > 0 {
			if st, ok := s.qsettings.Get(QueueSettings{Name: name}); ok && st.KeyLimit > 0 {
				q.keyed = newKeyBook(st)
			}
		}
		s.queues[name] = q
		s.queueList = append(s.queueList, q)
	}
	s.lastQueue = q
	return q
}

// dropQueue forgets a queue that holds no execution that is not terminal
// (and so no index entry).
func (s *State) dropQueue(q *queue) {
	delete(s.queues, q.name)
	if i := slices.Index(s.queueList, q); i >= 0 {
		last := len(s.queueList) - 1
		s.queueList[i] = s.queueList[last]
		s.queueList[last] = nil
		s.queueList = s.queueList[:last]
	}
	if s.lastQueue == q {
		s.lastQueue = nil
	}
}

// selectQueues returns the queues a claim of names serves that exist (every
// queue when names is empty), in a buffer of the state's that the next call
// reuses. A name no execution is in selects nothing: a worker may start
// before anything is admitted to its queue.
func (s *State) selectQueues(names []string) []*queue {
	if len(names) == 0 {
		return s.queueList
	}
	sel := s.queueScratch[:0]
	for _, n := range names {
		if q, ok := s.queues[n]; ok {
			sel = append(sel, q)
		}
	}
	s.queueScratch = sel
	return sel
}

// firstIn returns the first entry of the selected queues in (time, ID)
// order that a claim could take: none of a paused queue, and no due wake of
// one at its concurrency limit.
func (s *State) firstIn(sel []*queue) (claimKey, bool) {
	var best claimKey
	found := false
	for _, q := range sel {
		if k, ok := s.firstClaimable(q); ok && (!found || claimLess(k, best)) {
			best, found = k, true
		}
	}
	return best, found
}

// NextDueIn is NextDue for the executions of the named queues (every queue
// when names is empty).
func (s *State) NextDueIn(names []string) (int64, bool) {
	if len(names) == 0 {
		return s.NextDue()
	}
	var at int64
	found := false
	for _, n := range names {
		if q, ok := s.queues[n]; ok {
			if k, ok := s.firstClaimable(q); ok && (!found || k.At < at) {
				at, found = k.At, true
			}
		}
	}
	return at, found
}

// QueueStats is one queue's counts at a time.
type QueueStats struct {
	Name string
	// Live counts the queue's executions that are not terminal; Due, those
	// claimable at the time (a pending wake at or before it, no current
	// lease); Leased, the current leases, and Expired, those of them that
	// have expired by the time, which a claim would supersede.
	Live, Due, Leased, Expired int
	// Parked counts the executions waiting for a slot of their concurrency
	// key, which no claim looks at until the key has one (conckeys.go).
	Parked int
}

// Queues calls fn with the counts of each queue at time now, in name order,
// at most limit of them from the first name after `after`, until fn returns
// false. It may run in several goroutines at once.
func (s *State) Queues(now int64, after string, limit int, fn func(QueueStats) bool) {
	names := make([]string, 0, len(s.queueList))
	for _, q := range s.queueList {
		if q.name > after {
			names = append(names, q.name)
		}
	}
	slices.Sort(names)
	for i, n := range names {
		if i == limit {
			return
		}
		if !fn(s.queues[n].stats(now)) {
			return
		}
	}
}

// QueueStatsOf returns a queue's counts at time now (all zero for a queue
// that holds no execution that is not terminal).
func (s *State) QueueStatsOf(name string, now int64) QueueStats {
	q, ok := s.queues[name]
	if !ok {
		return QueueStats{Name: name}
	}
	return q.stats(now)
}

// QueueCount returns the number of queues that hold an execution that is
// not terminal.
func (s *State) QueueCount() int { return len(s.queueList) }

// claimSource is one claimable index of a queue's lane, as a claim of
// several lanes merges them: the prefix it may take, and how much of it it
// took.
type claimSource struct {
	t      *btree.BTreeG[claimKey]
	leased bool
	prio   uint8
	keys   []claimKey
	next   int
	bound  int // its queue's entry in the claim's bounds
}

// before reports whether the source's next entry comes before another's in
// claim order: priority, then (time, ID).
func (src *claimSource) before(o *claimSource) bool {
	if src.prio != o.prio && !mutant.ClaimIgnoresPriority {
		return src.prio < o.prio
	}
	return claimLess(src.keys[src.next], o.keys[o.next])
}

// claimBound is what a claim may still take of one queue: leases in all
// (its rate room), and due wakes (its concurrency room).
type claimBound struct{ most, due int }

// takeClaimableFrom is takeClaimable for a claim that serves several queues
// or lanes: each index's prefix up to the claim's bounds, merged in
// (priority, time, ID) order until the bounds are reached, then each index
// cut by what was taken from it.
func (s *State) takeClaimableFrom(sel []*queue, limit int, now int64) []claimKey {
	failLimit := FailLimit(limit)
	srcs := s.sourceScratch[:0]
	// bounds: each queue's most leases and due wakes left to take, shared
	// by its lanes; once its most reaches 0 the claim takes nothing more of
	// the queue, once its due does, no more due wakes.
	bounds := s.boundScratch[:0]
	for _, q := range sel {
		most, room, skip := s.claimBounds(q, limit, now)
		if skip {
			continue
		}
		bounds = append(bounds, claimBound{most: most, due: room})
		for _, l := range q.lanes {
			for _, leased := range [2]bool{false, true} {
				t, _ := l.index(leased)
				if k, ok := t.Min(); !ok || k.At > now || (!leased && room == 0) {
					continue
				}
				n := most // the most leasable entries this index may give
				if !leased {
					n = room
				}
				var buf []claimKey
				if i := len(srcs); i < cap(srcs) {
					buf = srcs[:i+1][i].keys[:0] // reuse the buffer a former claim left
				}
				buf = claimPrefix(t, buf, leased, n, failLimit, now)
				srcs = append(srcs, claimSource{t: t, leased: leased, prio: l.prio, keys: buf, bound: len(bounds) - 1})
			}
		}
	}
	taken := s.claimScratch[2][:0]
	for leasable, failing := 0, 0; leasable < limit && failing < failLimit; {
		best := -1
		for i := range srcs {
			src := &srcs[i]
			b := &bounds[src.bound]
			if src.next < len(src.keys) && b.most > 0 && (src.leased || b.due > 0) && (best < 0 || src.before(&srcs[best])) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		src := &srcs[best]
		k := src.keys[src.next]
		src.next++
		taken = append(taken, k)
		if src.leased && k.e.Exhausted() {
			failing++
			continue
		}
		leasable++
		bounds[src.bound].most--
		if !src.leased {
			bounds[src.bound].due--
		}
	}
	s.boundScratch = bounds[:0]
	for i := range srcs {
		src := &srcs[i]
		cutPrefix(src.t, src.next)
		clear(src.keys)
		src.keys, src.t = src.keys[:0], nil
	}
	s.sourceScratch = srcs[:0]
	s.claimScratch[2] = taken[:0]
	return taken
}

// claimPrefix appends to buf the entries of a claimable index a claim at
// now may take, in order: at most most leasable ones and failLimit expired
// leases of a last allowed attempt (exhausted), stopping at whichever bound
// it reaches first. Only a current lease can be exhausted: the due index's
// entries are not asked, which would read each record before the claim
// needs it.
func claimPrefix(t *btree.BTreeG[claimKey], buf []claimKey, leased bool, most, failLimit int, now int64) []claimKey {
	leasable, failing := 0, 0
	t.Scan(func(k claimKey) bool {
		if k.At > now || leasable == most || failing == failLimit {
			return false
		}
		if leased && k.e.Exhausted() {
			failing++
		} else {
			leasable++
		}
		buf = append(buf, k)
		return true
	})
	return buf
}

// cutPrefix deletes the first n entries of a claimable index with one bulk
// deletion instead of one search per entry.
func cutPrefix(t *btree.BTreeG[claimKey], n int) {
	if n == 0 {
		return
	}
	t.DeleteAscend(claimKey{}, func(claimKey) btree.Action {
		if n == 0 {
			return btree.Stop
		}
		n--
		return btree.Delete
	})
}
