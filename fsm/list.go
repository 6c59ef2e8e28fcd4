package fsm

import (
	"errors"
	"math/bits"

	"github.com/execstore/execstore/fsm/internal/chunk"
	"github.com/execstore/execstore/internal/mutant"
	"github.com/tidwall/btree"
)

// Listing and the change log.
//
// Every admission (a child start included) takes the next admission number,
// Meta.Admitted, kept in the record as AdmitNo. Time never goes backwards,
// so admission numbers are in admission-time order: the number alone orders
// a listing, and a time range is a range of numbers.
//
// The admission table maps admission numbers to records: chunks of 256
// slots, each slot the stored record (nil once retired) and its status, and
// each chunk a count of its slots by status and the admission time of its
// first slot. A record is put in its slot once, when admitted; a change of
// status rewrites one byte and two counts, a record replaced rewrites one
// pointer: no search. For each status, a tree of chunk numbers holds the
// chunks with a record of that status (and one those with any record); it
// changes only when a chunk's count of a status leaves or reaches 0, about
// once per 256 changes. A listing by status walks that tree from its
// position, O(log n) to the next chunk whatever it skips, and reads the
// status bytes of each chunk it visits. A chunk whose slots are all retired
// is dropped.
//
// Each workflow, and each parent of children, has a postings list of the
// admission numbers of its records (chunk.Postings), found through a tree by
// name: admissions append to it, retirement marks numbers dead, and no other
// change of a record touches it. A listing by workflow or parent reads its
// range of the list and finds each record in the admission table; if it
// also filters by status (or by parent and workflow) it skips what does not
// match, examining at most ListQuery.ScanMax entries per page; the page then
// ends early, with a position to go on from.
//
// The change log numbers every change of a record's status (admission
// included) with a sequence, Meta.ChangeSeq, that only grows: it is part of
// the snapshot, and replay assigns the same numbers. The record keeps the
// position of its latest change (ChangeSeq). The log is append-only: each
// change appends (position, admission number, time) and leaves the entry of
// the record's previous change in place; an entry is live while its record
// exists and still has its position. Readers skip the others, and the
// writer sweeps them away a chunk at a time (see feed.sweep) so that the log
// holds at most about twice as many entries as there are records. Entries
// hold no pointer, so the collector does not look into them.
//
// Everything is copy-on-write like the rest of the state: a chunk or a
// chunk list is written in place only if it is of the state's generation
// (created since the latest Copy), and copied first otherwise, so Copy
// captures it all in O(1). The chunks are package chunk's types, which
// alone can write them and check the generation when they do.

// statusCap bounds the numeric value of a status: arrays indexed by status
// have this length. A new status needs only its constant in AllStatuses.
const statusCap = chunk.StatusCap

// AllStatuses lists every status in numeric order. Every index and count by
// status iterates it.
var AllStatuses = []Status{StatusAdmitted, StatusSuspended, StatusCompleted, StatusFailed, StatusCancelled}

// admShift sizes the admission table's chunks: 1<<admShift slots.
const (
	admShift = chunk.SlotsShift
	admSize  = chunk.SlotsSize
)

// admissions is the admission table: t.Chunk(i) holds admission numbers
// (t.Base()+i)<<admShift to (t.Base()+i+1)<<admShift - 1 (number 0 is never
// used).
type admissions struct {
	t chunk.Table
	// with[st] holds the numbers (base+i) of the chunks with a record of
	// status st; with[0], those with any record. A listing by status visits
	// only those: O(log n) to find the next, whatever it skips. They change
	// only when a chunk's count of a status goes from 0 or to 0.
	with [statusCap]*btree.BTreeG[uint64]
}

func uint64Less(a, b uint64) bool { return a < b }

// copy returns the table for a Copy of the state.
func (a *admissions) copy() admissions {
	c := *a
	for st := range a.with {
		if a.with[st] != nil {
			c.with[st] = a.with[st].Copy()
		}
	}
	return c
}

// put sets slot j of chunk c (chunk number k) to e, of status st, keeping
// with[st] (and with[0]) in step with the chunk's counts. c must be
// writable (admissions.t.Writable).
func (a *admissions) put(c *chunk.Slots, k, j uint64, e *stored, st Status, gen uint32) {
	if a.with[0] == nil {
		for i := range a.with {
			a.with[i] = newTree(uint64Less)
		}
	}
	in, out := c.Put(j, e, st, gen)
	for ; out != 0; out &= out - 1 {
		a.with[bits.TrailingZeros8(out)].Delete(k)
	}
	for ; in != 0; in &= in - 1 {
		a.with[bits.TrailingZeros8(in)].Set(k)
	}
}

// workflowCount counts the records of one workflow, retired ones included,
// and lists the admission numbers of those that are not.
type workflowCount struct {
	Name string
	p    *chunk.Postings // its records' numbers, and p.Total(), the count
}

func workflowCountLess(a, b workflowCount) bool { return a.Name < b.Name }

// parentGroup lists the admission numbers of a parent's children that are
// not retired.
type parentGroup struct {
	Parent string
	p      *chunk.Postings
}

func parentGroupLess(a, b parentGroup) bool { return a.Parent < b.Parent }

// maxChangeSeq is the largest sequence number a change can have: 2^56-1
// (one change a nanosecond for two years).
const maxChangeSeq = 1<<56 - 1

// listIndexes are the state's secondary indexes and change log.
type listIndexes struct {
	adm       admissions
	workflows *btree.BTreeG[workflowCount]
	parents   *btree.BTreeG[parentGroup]
	feed      feed
	counts    [statusCap]int // records by status, retired ones included

	// Search hints of the applying goroutine: scratch, not state.
	whint, phint btree.PathHint
}

func newListIndexes() listIndexes {
	return listIndexes{
		workflows: newTree(workflowCountLess),
		parents:   newTree(parentGroupLess),
	}
}

// copy returns the indexes for a Copy of the state. The chunk lists and
// chunks are shared: the generation bump in Copy makes either side copy
// one before writing it.
func (l *listIndexes) copy() listIndexes {
	return listIndexes{
		adm:       l.adm.copy(),
		workflows: l.workflows.Copy(),
		parents:   l.parents.Copy(),
		feed:      l.feed.copy(),
		counts:    l.counts,
	}
}

// ---- The admission table ---------------------------------------------------

// get returns the record with admission number no, or nil.
func (a *admissions) get(no uint64) *stored { return a.t.Get(no) }

// statusOf returns the status in the slot of admission number no (0: none).
func (a *admissions) statusOf(no uint64) Status { return a.t.StatusOf(no) }

// add puts a record just admitted in its slot.
func (a *admissions) add(e *stored, gen uint32) {
	no := e.AdmitNo()
	a.put(a.t.Writable(no, e.AdmittedAt(), gen), no>>admShift, no, e, e.Status(), gen)
}

// set points a record's slot to its stored version, of status e.Status().
func (a *admissions) set(e *stored, gen uint32) {
	no := e.AdmitNo()
	a.put(a.t.Writable(no, 0, gen), no>>admShift, no, e, e.Status(), gen)
}

// remove empties a retired record's slot, and drops its chunk if that was
// the last.
func (a *admissions) remove(e *stored, gen uint32) {
	no := e.AdmitNo()
	c := a.t.Writable(no, 0, gen)
	a.put(c, no>>admShift, no, nil, 0, gen)
	if c.Live() == 0 {
		a.t.Drop(no, gen)
	}
}

// firstAt returns the first admission number admitted at or after at, among
// those from 1 to last+1 (last+1: none).
func (a *admissions) firstAt(at int64, last uint64) uint64 {
	// The last chunk whose first number was admitted before at holds the
	// boundary, or it is the next chunk's first number.
	k := a.t.SearchAt(at)
	if k == 0 {
		return 1
	}
	i := k - 1
	lo := max((a.t.Base()+uint64(i))<<admShift, 1)
	hi := min((a.t.Base()+uint64(i)+1)<<admShift, last+1)
	if c := a.t.Chunk(i); c != nil {
		for no := lo; no < hi; no++ {
			if e := c.Rec(no); e != nil && e.AdmittedAt() >= at {
				return no
			}
		}
	}
	return hi
}

// ---- Maintenance -----------------------------------------------------------

// indexNew indexes a record just created (admitted or started as a child):
// putRecord gave it its admission number and its change's position.
func (s *State) indexNew(e *stored) {
	l := &s.list
	l.adm.add(e, s.gen)
	// The tree is written only for a new workflow, or when its list is
	// copied after a snapshot: the count lives in the list.
	wc, ok := l.workflows.GetHint(workflowCount{Name: e.WorkflowID()}, &l.whint)
	if !ok {
		wc = workflowCount{Name: e.WorkflowID(), p: chunk.NewPostings(0, s.gen)}
	}
	if p := wc.p.Own(s.gen); p != wc.p || !ok {
		wc.p = p
		l.workflows.SetHint(wc, &l.whint)
	}
	wc.p.CountRecord(s.gen)
	wc.p.Add(e.AdmitNo(), s.gen)
	if e.Parent() != nil {
		pg, ok := l.parents.GetHint(parentGroup{Parent: e.Parent().ExecutionID}, &l.phint)
		if !ok {
			pg = parentGroup{Parent: e.Parent().ExecutionID, p: chunk.NewPostings(0, s.gen)}
		}
		if p := pg.p.Own(s.gen); p != pg.p || !ok {
			pg.p = p
			l.parents.SetHint(pg, &l.phint)
		}
		pg.p.Add(e.AdmitNo(), s.gen)
	}
	l.counts[e.Status()]++
	s.logChange(e)
}

// reindex records a change of a stored record's status from old.
func (s *State) reindex(e *stored, old Status) {
	l := &s.list
	l.adm.set(e, s.gen)
	l.counts[old]--
	l.counts[e.Status()]++
	s.logChange(e)
}

// repoint points a record's slot to its replaced version (status unchanged).
func (s *State) repoint(e *stored) {
	if !mutant.ListKeepsReplacedRecords {
		s.list.adm.set(e, s.gen)
	}
}

// logChange appends e's latest change to the log.
func (s *State) logChange(e *stored) {
	f := &s.list.feed
	f.append(feedEntry{Seq: e.ChangeSeq(), No: e.AdmitNo(), At: e.UpdatedAt()}, s.gen)
	f.sweepIfOver(s.execs.Len(), &s.list.adm, s.gen)
}

// unindex removes a record being retired from the indexes; its entry in
// the change log is dead from now on. Its counts stay: a retired record is
// still a record.
func (s *State) unindex(e *stored) {
	l := &s.list
	l.adm.remove(e, s.gen)
	if wc, ok := l.workflows.Get(workflowCount{Name: e.WorkflowID()}); ok {
		p := wc.p.Own(s.gen)
		p.Remove(e.AdmitNo(), &l.adm.t, s.gen)
		if p != wc.p {
			wc.p = p
			l.workflows.Set(wc)
		}
	}
	if e.Parent() != nil {
		if pg, ok := l.parents.Get(parentGroup{Parent: e.Parent().ExecutionID}); ok {
			p := pg.p.Own(s.gen)
			p.Remove(e.AdmitNo(), &l.adm.t, s.gen)
			switch {
			case p.Runs() == 0:
				l.parents.Delete(pg)
			case p != pg.p:
				pg.p = p
				l.parents.Set(pg)
			}
		}
	}
	l.feed.sweepIfOver(s.execs.Len()-1, &l.adm, s.gen)
}

func (s *State) nextChangeSeq() uint64 {
	if s.meta.ChangeSeq >= maxChangeSeq {
		// 2^56 changes: not reachable in practice, and a wrapped sequence
		// would break every consumer's position.
		panic("fsm: change sequence exhausted")
	}
	s.meta.ChangeSeq++
	return s.meta.ChangeSeq
}

// ---- Reading -------------------------------------------------------------

// ListQuery selects records for State.List.
type ListQuery struct {
	Status   Status // 0: any status
	Workflow string // "": any workflow
	Parent   string // "": any parent, or none
	From     int64  // admitted at or after From; 0: no bound
	To       int64  // admitted before To; 0: no bound
	Newest   bool   // newest first; otherwise oldest first
	// After resumes a listing after a position (ListPos), which the listing
	// itself excludes; the zero position means from the beginning.
	After ListPos
	Limit int // the most records to return; at least 1
	// ScanMax bounds the entries one page examines when the query filters
	// by status and a workflow or parent, or by a workflow and a parent
	// (an index serves one of them; the page skips what fails the other);
	// at least Limit.
	ScanMax int
}

// ListPos is a position in a listing: the admission number of the last
// record a page examined.
type ListPos struct {
	No uint64
}

// List calls fn with each record the query selects, in order, at most
// q.Limit of them. It returns the position to resume from and whether the
// listing may go on after it. fn gets a copy of each record. Like
// Get, List may run in several goroutines at once: it uses no search hint.
func (s *State) List(q *ListQuery, fn func(e *Execution)) (next ListPos, more bool) {
	l := &s.list
	last := s.meta.Admitted
	// The range of admission numbers [lo, hi) the time bounds select, then
	// narrowed by the position.
	lo, hi := uint64(1), last+1
	if q.From != 0 {
		lo = l.adm.firstAt(q.From, last)
	}
	if q.To != 0 {
		hi = l.adm.firstAt(q.To, last)
	}
	if a := q.After.No; a != 0 {
		if q.Newest {
			hi = min(hi, a)
		} else {
			lo = max(lo, a+1)
		}
	}
	if lo >= hi {
		return ListPos{}, false
	}
	w := walk{q: q, fn: fn, scanMax: -1}
	var p *chunk.Postings
	switch {
	case q.Parent == "" && q.Workflow == "":
		l.walkTable(&w, lo, hi)
		return ListPos{No: w.last}, w.more
	case q.Parent == "":
		wc, _ := l.workflows.Get(workflowCount{Name: q.Workflow})
		p = wc.p
		if q.Status != 0 {
			w.scanMax = max(q.ScanMax, q.Limit)
		}
	default:
		pg, _ := l.parents.Get(parentGroup{Parent: q.Parent})
		p = pg.p
		if q.Status != 0 || q.Workflow != "" {
			w.scanMax = max(q.ScanMax, q.Limit)
		}
	}
	p.Walk(lo, hi, q.Newest, &l.adm.t, w.take)
	return ListPos{No: w.last}, w.more
}

// walk is one page of a listing.
type walk struct {
	q       *ListQuery
	fn      func(*Execution)
	n       int    // records given to fn
	scanMax int    // the most entries to examine; -1: no bound
	seen    int    // entries examined
	last    uint64 // the admission number of the last entry given or examined
	more    bool   // the listing goes on after last
}

// take offers the next record of the walk (one the admission table already
// selected by its status, if the walk is by status) and reports whether to
// go on.
func (w *walk) take(no uint64, e *stored) bool {
	q := w.q
	match := w.scanMax < 0 ||
		((q.Status == 0 || e.Status() == q.Status) && (q.Workflow == "" || e.WorkflowID() == q.Workflow))
	if match && w.n == q.Limit {
		w.more = true // there is at least one more
		return false
	}
	if w.scanMax >= 0 {
		if w.seen == w.scanMax {
			w.more = true
			return false
		}
		w.seen++
	}
	w.last = no
	if match {
		v := e.Value()
		w.fn(&v)
		w.n++
	}
	return true
}

// walkTable walks the admission table from lo to hi (exclusive), in the
// query's order, taking the records of the query's status (any, if 0): it
// visits only the chunks with such a record.
func (l *listIndexes) walkTable(w *walk, lo, hi uint64) {
	a := &l.adm
	st := w.q.Status
	if lo >= hi || a.with[0] == nil {
		return
	}
	visit := func(k uint64) bool {
		if k < lo>>admShift || k > (hi-1)>>admShift {
			return false
		}
		c := a.t.Chunk(int(k - a.t.Base()))
		cLo, cHi := max(k<<admShift, lo), min((k+1)<<admShift, hi)
		for m := range cHi - cLo {
			no := cLo + m
			if w.q.Newest {
				no = cHi - 1 - m
			}
			if cst := c.Status(no); cst == 0 || (st != 0 && cst != st) {
				continue
			}
			if !w.take(no, c.Rec(no)) {
				return false
			}
		}
		return true
	}
	if w.q.Newest {
		a.with[st].Descend((hi-1)>>admShift, visit)
	} else {
		a.with[st].Ascend(lo>>admShift, visit)
	}
}

// Change is one entry of the change log: the record ID changed to Status at
// time At, and Seq is the change's position.
type Change struct {
	Seq    uint64
	ID     string
	Status Status
	At     int64
}

// Changes calls fn for each change after position after, in order, at most
// limit of them, examining at most scanMax entries of the log (live or not;
// at least limit). It returns the position to read on from: the last change
// given, or the last entry examined when the bound stopped it, or after
// when there is nothing after it. It may run in several goroutines at once.
func (s *State) Changes(after uint64, limit, scanMax int, fn func(Change)) (next uint64) {
	next = after
	if after >= maxChangeSeq || limit <= 0 {
		return next
	}
	scanMax = max(scanMax, limit)
	n, seen := 0, 0
	s.list.feed.ascend(after+1, func(c *chunk.Feed) bool {
		j, _ := c.Search(after + 1)
		for ; j < c.Len(); j++ {
			if n == limit || seen == scanMax {
				return false
			}
			x := c.Entry(j)
			seen++
			next = x.Seq
			if e := s.list.adm.get(x.No); e != nil && e.ChangeSeq() == x.Seq {
				fn(Change{Seq: x.Seq, ID: e.ID(), Status: e.Status(), At: x.At})
				n++
			}
		}
		return true
	})
	return next
}

// CountByStatus returns the number of records with status st, retired ones
// included.
func (s *State) CountByStatus(st Status) int {
	if int(st) >= statusCap {
		return 0
	}
	return s.list.counts[st]
}

// Workflows calls fn with each workflow ID and its number of records
// (retired ones included), in ID order, until fn returns false.
func (s *State) Workflows(fn func(workflow string, n int) bool) {
	s.list.workflows.Scan(func(w workflowCount) bool { return fn(w.Name, w.p.Total()) })
}

// WorkflowCount returns the number of distinct workflow IDs.
func (s *State) WorkflowCount() int { return s.list.workflows.Len() }

// FeedLen returns the number of entries in the change log, live or not.
func (s *State) FeedLen() int { return s.list.feed.n }

// ---- Invariants ------------------------------------------------------------

// checkList verifies the listing indexes and the change log against the
// records: each record that is not retired is in the slot of its admission
// number with its status, in its workflow's and (a child) its parent's
// index, and has exactly one live change in the log, its latest
// (ChangeSeq), at a time within its admission and its latest update;
// admission numbers are at most Meta.Admitted and in admission-time order,
// positions at most Meta.ChangeSeq and the log in position order; no slot
// or entry of anything else; the counts agree with the records, retired
// ones included.
func (s *State) checkList() error {
	l := &s.list
	var err error
	fail := func(id, msg string) bool {
		err = invariantErr("execution " + quote(id) + ": " + msg)
		return false
	}
	var counts [statusCap]int
	workflows := map[string]int{} // only looked up and compared, never iterated for a result
	entries, children := 0, 0
	s.execs.Scan(func(it execItem) bool {
		e := s.rec(it) // CheckInvariants checked each item against its slot first
		st := e.Status()
		counts[st]++
		workflows[e.WorkflowID()]++
		wc, _ := l.workflows.Get(workflowCount{Name: e.WorkflowID()})
		switch {
		case wc.p == nil || wc.p.RunOf(e.AdmitNo()) < 0:
			return fail(e.ID(), "missing from its workflow's listing index")
		case e.AdmitNo() == 0 || e.AdmitNo() > s.meta.Admitted:
			return fail(e.ID(), "admission number "+itoa(e.AdmitNo())+" outside 1 to "+itoa(s.meta.Admitted))
		case l.adm.get(e.AdmitNo()) != e:
			return fail(e.ID(), "its admission number's slot holds another record")
		case l.adm.statusOf(e.AdmitNo()) != st:
			return fail(e.ID(), "its slot says "+statusName(l.adm.statusOf(e.AdmitNo()))+", the record "+statusName(st))
		case e.ChangeSeq() == 0 || e.ChangeSeq() > s.meta.ChangeSeq:
			return fail(e.ID(), "changed at position "+itoa(e.ChangeSeq())+", the sequence is at "+itoa(s.meta.ChangeSeq))
		}
		if e.Parent() != nil {
			children++
			if pg, _ := l.parents.Get(parentGroup{Parent: e.Parent().ExecutionID}); pg.p == nil || pg.p.RunOf(e.AdmitNo()) < 0 {
				return fail(e.ID(), "missing from its parent's listing index")
			}
		}
		x, ok := l.feed.lookup(e.ChangeSeq())
		switch {
		case !ok || x.No != e.AdmitNo():
			return fail(e.ID(), "its latest change "+itoa(e.ChangeSeq())+" is not in the change log")
		case x.At < e.AdmittedAt() || x.At > e.UpdatedAt():
			return fail(e.ID(), "latest change at a time outside its record's admission and update")
		}
		entries++
		return true
	})
	if err != nil {
		return err
	}
	if err := l.adm.check(s.meta.Admitted, entries); err != nil {
		return err
	}
	if err := l.feed.check(s.meta.ChangeSeq, &l.adm, entries); err != nil {
		return err
	}
	s.retired.Scan(func(it retiredItem) bool {
		counts[it.r.Outcome.Status]++
		workflows[it.r.WorkflowID]++
		return true
	})
	// The counts include the archived executions, which are not in memory to
	// count: each count exceeds what the records say by its share of them,
	// and the shares add up to the archived count.
	archived := 0
	for st := range statusCap {
		extra := l.counts[st] - counts[st]
		if extra < 0 || (extra > 0 && !Status(st).Terminal()) || (extra > 0 && s.meta.Archived == 0) {
			return invariantErr("status " + statusName(Status(st)) + " counts " + itoa(uint64(l.counts[st])) + " records, the records say " + itoa(uint64(counts[st])))
		}
		archived += extra
	}
	if archived != s.meta.Archived {
		return invariantErr("status counts hold " + itoa(uint64(archived)) + " archived executions, the state counts " + itoa(uint64(s.meta.Archived)))
	}
	if l.workflows.Len() < len(workflows) || (s.meta.Archived == 0 && l.workflows.Len() != len(workflows)) {
		return invariantErr("workflow counts name workflows no record has")
	}
	listed, archivedByWorkflow := 0, 0
	l.workflows.Scan(func(w workflowCount) bool {
		if s.meta.Archived > 0 && workflows[w.Name] <= w.p.Total() {
			archivedByWorkflow += w.p.Total() - workflows[w.Name]
			if msg := w.p.Check(&l.adm.t, func(e *stored) bool { return e.WorkflowID() == w.Name }); msg != "" {
				err = invariantErr("workflow " + quote(w.Name) + "'s listing index: " + msg)
			}
			listed += w.p.Live()
			return err == nil
		}
		if workflows[w.Name] != w.p.Total() {
			err = invariantErr("workflow " + quote(w.Name) + " counts " + itoa(uint64(w.p.Total())) + " records, the records say " + itoa(uint64(workflows[w.Name])))
		} else if msg := w.p.Check(&l.adm.t, func(e *stored) bool { return e.WorkflowID() == w.Name }); msg != "" {
			err = invariantErr("workflow " + quote(w.Name) + "'s listing index: " + msg)
		}
		listed += w.p.Live()
		return err == nil
	})
	if err != nil {
		return err
	}
	if s.meta.Archived > 0 && archivedByWorkflow != s.meta.Archived {
		return invariantErr("workflow counts hold " + itoa(uint64(archivedByWorkflow)) + " archived executions, the state counts " + itoa(uint64(s.meta.Archived)))
	}
	l.parents.Scan(func(g parentGroup) bool {
		if msg := g.p.Check(&l.adm.t, func(e *stored) bool { return e.Parent() != nil && e.Parent().ExecutionID == g.Parent }); msg != "" {
			err = invariantErr("parent " + quote(g.Parent) + "'s listing index: " + msg)
		} else if g.p.Runs() == 0 {
			err = invariantErr("parent " + quote(g.Parent) + " has an empty listing index")
		}
		children -= g.p.Live()
		return err == nil
	})
	if err == nil && (listed != entries || children != 0) {
		err = invariantErr("listing indexes hold entries of no record, or miss some")
	}
	return err
}

// check verifies the admission table's own bookkeeping: each chunk's counts
// agree with its slots, slots hold records of their own number, admission
// times only grow along the numbers and each chunk's first time is at most
// its records'; records slots in all, no empty chunk kept but the newest.
func (a *admissions) check(last uint64, records int) error {
	n := 0
	var listed [statusCap]int
	prevAt := int64(-1 << 63)
	base := a.t.Base()
	for i := range a.t.Len() {
		c := a.t.Chunk(i)
		if i > 0 && a.t.At0(i) < a.t.At0(i-1) {
			return invariantErr("admission table: chunk times go backwards")
		}
		if c == nil {
			if i == 0 && a.t.Len() > 1 {
				return invariantErr("admission table: an empty first chunk is kept")
			}
			continue
		}
		var byStatus [statusCap]uint16
		live := uint16(0)
		for j := range uint64(admSize) {
			no := (base+uint64(i))<<admShift + j
			e := c.Rec(j)
			if (e == nil) != (c.Status(j) == 0) {
				return invariantErr("admission table: slot " + itoa(no) + " has a status without a record, or the reverse")
			}
			if e == nil {
				continue
			}
			switch {
			case e.AdmitNo() != no || no > last:
				return invariantErr("admission table: slot " + itoa(no) + " holds " + quote(e.ID()) + " of number " + itoa(e.AdmitNo()))
			case e.AdmittedAt() < prevAt || e.AdmittedAt() < a.t.At0(i):
				return invariantErr("admission table: " + quote(e.ID()) + " admitted before an earlier number or its chunk")
			}
			prevAt = e.AdmittedAt()
			byStatus[c.Status(j)]++
			live++
		}
		counts := c.Counts()
		if byStatus != counts || live != c.Live() || live == 0 {
			return invariantErr("admission table: chunk " + itoa(base+uint64(i)) + " counts its slots wrongly, or is empty")
		}
		for st := range statusCap {
			want := st == 0 || counts[st] > 0
			if _, in := a.with[st].Get(base + uint64(i)); in != want {
				return invariantErr("admission table: chunk " + itoa(base+uint64(i)) + " is listed wrongly under " + statusName(Status(st)))
			}
			if want {
				listed[st]++
			}
		}
		n += int(live)
	}
	if n != records {
		return invariantErr("admission table: " + itoa(uint64(n)) + " slots for " + itoa(uint64(records)) + " records")
	}
	for st := range statusCap {
		if a.with[st] != nil && a.with[st].Len() != listed[st] {
			return invariantErr("admission table: lists chunks it does not have under " + statusName(Status(st)))
		}
	}
	return nil
}

func invariantErr(msg string) error { return errors.New("fsm: invariant violated: " + msg) }

// statusName names a status in messages.
func statusName(s Status) string {
	switch s {
	case StatusAdmitted:
		return "admitted"
	case StatusSuspended:
		return "suspended"
	case StatusCompleted:
		return "completed"
	case StatusFailed:
		return "failed"
	case StatusCancelled:
		return "cancelled"
	}
	return "status(" + itoa(uint64(s)) + ")"
}
