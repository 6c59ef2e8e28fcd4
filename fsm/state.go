package fsm

import (
	"strings"

	"github.com/tidwall/btree"
)

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

func execLess(a, b Execution) bool { return a.ID < b.ID }

// Meta holds the state's scalar counters.
type Meta struct {
	// Now is the latest command time applied. Apply never lets time go
	// backwards: a command's effective time is max(Command.Now, Meta.Now).
	Now         int64
	NextWatchID uint64 // the ID the next watch gets; starts at 1
	Terminal    int    // executions with a terminal status
}

// State is the whole state machine: every execution record and the indexes
// over them, the saved steps, the child-start requests, the key-value store
// and its watches. Only Apply changes it.
//
// A State is not safe for concurrent use; Copy gives an independent
// point-in-time state in O(1) that another goroutine may read while this one
// keeps applying (the btrees are copy-on-write).
type State struct {
	execs   *btree.BTreeG[Execution]
	due     *btree.BTreeG[dueKey]
	steps   *btree.BTreeG[stepEntry]
	starts  *btree.BTreeG[startEntry]
	kv      *btree.BTreeG[kvEntry]
	watches *btree.BTreeG[watch]
	wkeys   *btree.BTreeG[watchKey]
	wexecs  *btree.BTreeG[execWatch]
	meta    Meta

	// scratch buffers reused by Apply; never part of the state's value.
	claimBuf []dueKey
}

func newTree[T any](less func(a, b T) bool) *btree.BTreeG[T] {
	// The state has one writer, so the btree's own locks are not needed.
	return btree.NewBTreeGOptions(less, btree.Options{NoLocks: true})
}

// New returns an empty state.
func New() *State {
	return &State{
		execs:   newTree(execLess),
		due:     newTree(dueLess),
		steps:   newTree(stepLess),
		starts:  newTree(startLess),
		kv:      newTree(kvLess),
		watches: newTree(watchLess),
		wkeys:   newTree(watchKeyLess),
		wexecs:  newTree(execWatchLess),
		meta:    Meta{NextWatchID: 1},
	}
}

// Copy returns a point-in-time copy of the state in O(1). The copy and the
// original share nodes until either changes them.
func (s *State) Copy() *State {
	return &State{
		execs:   s.execs.Copy(),
		due:     s.due.Copy(),
		steps:   s.steps.Copy(),
		starts:  s.starts.Copy(),
		kv:      s.kv.Copy(),
		watches: s.watches.Copy(),
		wkeys:   s.wkeys.Copy(),
		wexecs:  s.wexecs.Copy(),
		meta:    s.meta,
	}
}

// Meta returns the state's counters.
func (s *State) Meta() Meta { return s.meta }

// Len returns the number of execution records.
func (s *State) Len() int { return s.execs.Len() }

// Get returns an execution's record.
func (s *State) Get(id string) (Execution, bool) {
	return s.execs.Get(Execution{ID: id})
}

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
	k, ok := s.due.Min()
	return k.At, ok
}

// DueLen returns the number of executions in the due index (pending wakes or
// current leases).
func (s *State) DueLen() int { return s.due.Len() }

// Ascend calls fn for each execution in ID order, starting at from, until fn
// returns false.
func (s *State) Ascend(from string, fn func(e *Execution) bool) {
	s.execs.Ascend(Execution{ID: from}, func(e Execution) bool { return fn(&e) })
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

// putExec stores e and moves its due-index entry from where old had it to
// where e needs it. old is the previous value (zero value if e is new).
func (s *State) putExec(old, e *Execution) {
	s.execs.Set(*e)
	oldAt, oldOK := old.claimableAt()
	newAt, newOK := e.claimableAt()
	if oldOK && newOK && oldAt == newAt {
		return
	}
	if oldOK {
		s.due.Delete(dueKey{At: oldAt, ID: old.ID})
	}
	if newOK {
		s.due.Set(dueKey{At: newAt, ID: e.ID})
	}
}
