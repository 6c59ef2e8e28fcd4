package fsm

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/execstore/execstore/internal/mutant"
)

// Deadlines (codec version 9, state version 12). An admission may give an
// execution a deadline (Command.Deadline): if it is not terminal by then, it
// fails with a DEADLINE_EXCEEDED error, exactly as a cancel would end it in
// every other respect: its lease ends, its watches go, its parent is woken,
// and every execution it started that has not ended is cancelled (their
// reason says an ancestor's deadline passed). The writer fires them with
// expire-deadlines commands of its own, stamped with the store's time once
// the earliest deadline has come; each ends at most Limit executions, the
// earliest deadlines first.
//
// The record has no room for the deadline, so the state keeps the
// deadlines of the executions that have not ended in two copy-on-write
// trees, by (time, ID) for the writer's next one and by ID for the
// execution's own; an execution's deadline leaves both the moment it ends,
// however it ends, so a deadline fires once at most, and a forgotten ID
// admitted again never meets an old deadline.

// Deadline outcomes.
const (
	CodeDeadlineExceeded = "DEADLINE_EXCEEDED"
	NameDeadlineExceeded = "DeadlineExceededError"
)

// deadlineItem is an execution's deadline, kept by ID.
type deadlineItem struct {
	id string
	at int64
}

func deadlineLess(a, b deadlineItem) bool { return a.id < b.id }

// deadlineOutcome is the failure of an execution whose deadline passed;
// cancelledByDeadline, the end of the executions it started.
var (
	deadlineOutcome = &Outcome{Status: StatusFailed, Error: &ErrorInfo{
		Name: NameDeadlineExceeded, Message: "the execution's deadline passed before it ended", Code: CodeDeadlineExceeded}}
	cancelledByDeadline = &Outcome{Status: StatusCancelled, Error: &ErrorInfo{
		Name: NameCancelled, Message: "an execution that started it passed its deadline", Code: CodeCancelled}}
)

// setDeadline keeps an execution's deadline (0: none).
func (s *State) setDeadline(id string, at int64) {
	if at == 0 {
		return
	}
	s.deadlines.Set(dueKey{At: at, ID: id})
	s.deadlineOf.Set(deadlineItem{id: id, at: at})
}

// dropDeadline forgets the deadline of an execution that ended.
func (s *State) dropDeadline(id string) {
	if s.deadlineOf.Len() == 0 || mutant.DeadlineFiresTwice {
		return
	}
	if it, ok := s.deadlineOf.Delete(deadlineItem{id: id}); ok {
		s.deadlines.Delete(dueKey{At: it.at, ID: id})
	}
}

// DeadlineOf returns the deadline of an execution that has not ended (0 for
// none). It may run in several goroutines at once.
func (s *State) DeadlineOf(id string) int64 {
	if s.deadlineOf.Len() == 0 {
		return 0
	}
	it, _ := s.deadlineOf.Get(deadlineItem{id: id})
	return it.at
}

// NextDeadline returns the earliest deadline of the executions that have
// not ended.
func (s *State) NextDeadline() (int64, bool) {
	k, ok := s.deadlines.Min()
	return k.At, ok
}

// expireDeadlines ends the executions whose deadlines are at or before now,
// at most c.Limit of them, the earliest first.
func (s *State) expireDeadlines(c *Command, now int64, dry bool) Result {
	var due []dueKey
	s.deadlines.Scan(func(k dueKey) bool {
		if k.At > now || len(due) == c.Limit {
			return false
		}
		due = append(due, k)
		return true
	})
	switch {
	case len(due) == 0:
		return Result{}
	case dry:
		return mutates
	}
	var r Result
	for _, k := range due {
		s.deadlines.Delete(k)
		s.deadlineOf.Delete(deadlineItem{id: k.ID})
		p := s.lookup(k.ID)
		switch {
		case p != nil && p.Terminal() && mutant.DeadlineFiresTwice:
			s.end(p, deadlineOutcome, now, &r) // an outcome recorded twice
		case p != nil && !p.Terminal():
			s.endTree(p, deadlineOutcome, cancelledByDeadline, now, &r)
			r.Count++
		}
	}
	return r
}

// endTree ends a non-terminal execution with out and, depth first, every
// non-terminal execution it started, each before its children, with
// descendants (in step key order): a child then never wakes a parent that is
// being ended.
func (s *State) endTree(p *stored, out, descendants *Outcome, now int64, r *Result) {
	stack := []string{p.ID()}
	root := true
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		e := s.lookup(id) // looked up now: ending another may have replaced it
		if e == nil || e.Terminal() {
			continue
		}
		if root {
			s.end(e, out, now, r)
			root = false
		} else {
			s.end(e, descendants, now, r)
		}
		if mutant.CancelSparesChildren {
			break
		}
		n := len(stack)
		s.starts.Ascend(startEntry{Caller: id}, func(st startEntry) bool {
			if st.Caller != id {
				return false
			}
			if c := s.lookup(st.Child); c != nil && s.startedBy(c.Parent(), st.Child) {
				stack = append(stack, st.Child)
			}
			return true
		})
		if !mutant.CancelTakesLastKeyFirst {
			slices.Reverse(stack[n:]) // the first step key is taken first
		}
	}
}

// checkDeadlines verifies the two trees against each other and the records:
// each deadline is of an execution that has not ended.
func (s *State) checkDeadlines() error {
	if s.deadlines.Len() != s.deadlineOf.Len() {
		return errors.New("fsm: invariant violated: " + itoa(uint64(s.deadlines.Len())) + " deadlines by time, " +
			itoa(uint64(s.deadlineOf.Len())) + " by execution")
	}
	var err error
	s.deadlineOf.Scan(func(it deadlineItem) bool {
		p := s.lookup(it.id)
		switch {
		case it.at <= 0:
			err = errors.New("fsm: invariant violated: execution " + quote(it.id) + " has a deadline at " + itoa(uint64(it.at)))
		case p == nil || p.Terminal():
			err = errors.New("fsm: invariant violated: a deadline kept for " + quote(it.id) + ", which has ended or has no record")
		default:
			if _, ok := s.deadlines.Get(dueKey{At: it.at, ID: it.id}); !ok {
				err = errors.New("fsm: invariant violated: execution " + quote(it.id) + "'s deadline is not in the time order")
			}
		}
		return err == nil
	})
	return err
}

// ---- Codec ---------------------------------------------------------------------

//	expire-deadlines  limit:uv   (version 9)

func encodeExpireDeadlines(dst []byte, c *Command, _ byte) []byte {
	return binary.AppendUvarint(dst, uint64(c.Limit))
}

func decodeExpireDeadlines(d *Decoder, c *Command, _ byte) { c.Limit = int(d.Int()) }

func sizeExpireDeadlines(c *Command) int { return uvarintLen(uint64(c.Limit)) }

func boundExpireDeadlines(*Bounds) int { return boundNum }

func checkExpireDeadlines(c *Command) string {
	if c.Limit <= 0 {
		return "non-positive limit"
	}
	return ""
}

// ---- State encoding ------------------------------------------------------------

//	deadlines (version 12) count:uv, then (execution:str at:uv) in ID order

func (s *State) encodeDeadlines(e *encoder) {
	e.uv(uint64(s.deadlineOf.Len()))
	s.deadlineOf.Scan(func(it deadlineItem) bool {
		e.buf = appendStr(e.buf, it.id)
		e.uv(uint64(it.at))
		e.flush(false)
		return e.err == nil
	})
}

func (s *State) decodeDeadlines(d *streamDecoder) error {
	for i, n := 0, d.count(maxCount); i < n && d.err == nil; i++ {
		it := deadlineItem{id: d.Str(), at: d.int()}
		if d.err != nil {
			break
		}
		if last, ok := s.deadlineOf.Max(); ok && last.id >= it.id {
			return decodeErr("state: deadlines out of order at " + quote(it.id))
		}
		if p := s.lookup(it.id); p == nil || p.Terminal() || it.at <= 0 {
			return decodeErr("state: a deadline for " + quote(it.id) + ", which has ended or has no record")
		}
		s.deadlineOf.Load(it)
		s.deadlines.Set(dueKey{At: it.at, ID: it.id})
	}
	return d.err
}

// deadlines checks the deadlines section as decodeDeadlines reads it: in ID
// order, each at a positive time, each of a record that has not ended (by
// the hashes of those records' IDs, which the records' check kept: a
// stray deadline whose ID collides with one of them in 64 bits passes).
func (c *checker) deadlines() error {
	slices.Sort(c.open)
	for i, n := 0, c.count(maxCount); i < n && c.err == nil; i++ {
		id := c.str(&c.key[0])
		at := c.int()
		if c.err != nil {
			break
		}
		if len(id) == 0 || at <= 0 {
			return decodeErr("state: a deadline at " + itoa(uint64(at)) + " of " + quote(string(id)))
		}
		if !c.after(i == 0, id, nil) {
			return decodeErr("state: deadlines out of order at " + quote(string(id)))
		}
		if _, found := slices.BinarySearch(c.open, idHash(id)); !found {
			return decodeErr("state: a deadline for " + quote(string(id)) + ", which has ended or has no record")
		}
	}
	return c.err
}

// idHash is a 64-bit FNV-1a hash of an ID.
func idHash(id []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range id {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return h
}
