package fsm

import "errors"

// Priorities (codec version 8, state version 11). An admission may give an
// execution a priority, PriorityFirst (claimed first) to PriorityLast; a
// child started by another inherits its parent's. Within the queues a claim
// serves, it takes claimable entries in (priority, time, ID) order: every
// claimable execution of a priority before any of the next, each priority
// in (time, ID) order as before. Priority is strict: an execution waits
// while executions of a higher priority are claimable in the queues its
// claims serve, however long (a queue of its own, with its own workers or
// limits, is what keeps low-priority work moving).
//
// A queue keeps one lane of claimable indexes per priority its executions
// have (queues.go), so a claim reads each lane's prefix as it reads a
// queue's, and a queue whose executions all have the default priority has
// one lane and the claim it always had. The record has no room for the
// priority, so the state keeps the priorities other than the default by
// execution ID, until the record is retired: an execution admitted without
// one costs nothing.

// The priorities. A command's 0 means PriorityDefault.
const (
	PriorityFirst   = 1
	PriorityDefault = 3
	PriorityLast    = 5
)

// prioItem is an execution's priority other than the default. They are
// kept in a copy-on-write tree, so that a Copy of the state costs nothing
// for them.
type prioItem struct {
	id string
	p  uint8
}

func prioLess(a, b prioItem) bool { return a.id < b.id }

// priorityOf returns an execution's priority.
func (s *State) priorityOf(id string) uint8 {
	if s.prio.Len() == 0 {
		return PriorityDefault
	}
	if it, ok := s.prio.Get(prioItem{id: id}); ok {
		return it.p
	}
	return PriorityDefault
}

// PriorityOf returns the priority an execution with a record has other than
// the default; 0 for the default, and for an execution without a record
// (not admitted, retired or forgotten). It may run in several goroutines at
// once.
func (s *State) PriorityOf(id string) int { return int(s.keptPriority(id)) }

// keptPriority is PriorityOf's: 0 for the default.
func (s *State) keptPriority(id string) uint8 {
	if p := s.priorityOf(id); p != PriorityDefault {
		return p
	}
	return 0
}

// setPriority keeps an execution's priority, before its record is stored
// (which indexes it in its priority's lane).
func (s *State) setPriority(id string, p uint8) {
	if p == 0 || p == PriorityDefault {
		return
	}
	s.prio.Set(prioItem{id: id, p: p})
}

// checkPriorities verifies that each kept priority is of a record, within
// range and not the default.
func (s *State) checkPriorities() error {
	var err error
	s.prio.Scan(func(it prioItem) bool {
		switch {
		case it.p < PriorityFirst || it.p > PriorityLast || it.p == PriorityDefault:
			err = errors.New("fsm: invariant violated: execution " + quote(it.id) + " keeps priority " + itoa(uint64(it.p)))
		case s.lookup(it.id) == nil:
			err = errors.New("fsm: invariant violated: a priority kept for " + quote(it.id) + ", which has no record")
		}
		return err == nil
	})
	return err
}

func validPriority(p int) bool { return p == 0 || (p >= PriorityFirst && p <= PriorityLast) }
