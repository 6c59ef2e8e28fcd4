package fsm

import (
	"errors"

	"github.com/tidwall/btree"
)

// Listing and the change log.
//
// Every record that is not retired is in these secondary indexes, each
// ordered by admission within its group:
//
//	byStatus[s]  (AdmittedAt, AdmitSeq)              the records with status s, one tree per status
//	byWorkflow   (WorkflowID, AdmittedAt, AdmitSeq)  every record, by workflow
//	byParent     (Parent, AdmittedAt, AdmitSeq)      the children, by parent
//
// AdmitSeq, the position of the record's admission in the change log, breaks
// ties of admission time (every admission of a batch has the batch's time)
// without a look at the record: keys compare as integers. Time never goes
// backwards, so this is admission order.
//
// A listing by status, by workflow or by parent, within an admission-time
// range, in either order, reads one contiguous range: O(log n + page). With
// no filter it merges the status trees: O(S log n + S page), S statuses (a
// constant). The workflow and parent indexes leave the status out, so that a
// change of status moves one entry, not three: a listing by workflow or
// parent that also filters by status (or by parent and workflow) reads the
// group's range and skips what does not match, examining at most
// ListQuery.ScanMax entries per page; the page then ends early, with a
// position to go on from.
//
// Entries carry the stored record, as the claimable indexes do, so a page
// reaches its records without searching for them: putRecord moves an entry
// when the record's status changes and repoints them when the record is
// replaced.
//
// The change log numbers every change of a record's status (admission
// included) with a sequence, Meta.ChangeSeq, that only grows: it is part of
// the snapshot, and replay assigns the same numbers. It keeps the latest
// change of each record that is not retired (the record keeps its position,
// ChangeSeq): a new change of a record removes its previous one, so the log
// holds exactly one entry per such record. Retirement removes a record from the indexes and from the change
// log; it is not a change itself.
//
// All of it is copy-on-write like the rest of the state: Copy captures it in
// O(1).

// statusCap bounds the numeric value of a status: arrays indexed by status
// have this length. A new status needs only its constant in AllStatuses.
const statusCap = 8

// AllStatuses lists every status in numeric order. Every index and count by
// status iterates it.
var AllStatuses = []Status{StatusAdmitted, StatusSuspended, StatusCompleted, StatusFailed, StatusCancelled}

// listEntry is an entry of a status's admission index.
type listEntry struct {
	At  int64
	Adm uint64
	e   *Execution
}

func listLess(a, b listEntry) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	return a.Adm < b.Adm
}

// groupEntry is an entry of a workflow's or a parent's admission index.
type groupEntry struct {
	Group string
	At    int64
	Adm   uint64
	e     *Execution
}

func groupLess(a, b groupEntry) bool {
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	if a.At != b.At {
		return a.At < b.At
	}
	return a.Adm < b.Adm
}

func statusEntry(e *Execution) listEntry { return listEntry{At: e.AdmittedAt, Adm: e.AdmitSeq, e: e} }

func workflowEntry(e *Execution) groupEntry {
	return groupEntry{Group: e.WorkflowID, At: e.AdmittedAt, Adm: e.AdmitSeq, e: e}
}

func parentEntry(e *Execution) groupEntry {
	return groupEntry{Group: e.Parent.ExecutionID, At: e.AdmittedAt, Adm: e.AdmitSeq, e: e}
}

// change is an entry of the change log. Key is the change's sequence number
// shifted left by 8, or'ed with the status it changed to: ordered by
// sequence, and the status costs no padding.
type change struct {
	Key uint64
	At  int64
	ID  string
}

func changeLess(a, b change) bool { return a.Key < b.Key }

func changeKey(seq uint64, st Status) uint64 { return seq<<8 | uint64(st) }

// Seq is the change's position in the log.
func (c change) Seq() uint64 { return c.Key >> 8 }

// Status is the status the record changed to.
func (c change) Status() Status { return Status(c.Key & 0xff) }

// maxChangeSeq is the largest sequence number a change can have: 2^56-1
// (one change a nanosecond for two years).
const maxChangeSeq = 1<<56 - 1

// workflowCount counts the records of one workflow, retired ones included.
type workflowCount struct {
	Name string
	N    int
}

func workflowCountLess(a, b workflowCount) bool { return a.Name < b.Name }

// listIndexes are the state's secondary indexes and change log. Derived
// from the records except the change log's sequence numbers and times.
type listIndexes struct {
	byStatus   [statusCap]*btree.BTreeG[listEntry]
	byWorkflow *btree.BTreeG[groupEntry]
	byParent   *btree.BTreeG[groupEntry]
	changes    *btree.BTreeG[change]
	workflows  *btree.BTreeG[workflowCount]
	counts     [statusCap]int // records by status, retired ones included

	// Search hints of the applying goroutine: scratch, not state.
	hints  [statusCap]indexHints // byStatus
	ghints [2]indexHints         // byWorkflow, byParent
	chint  indexHints
}

func newListIndexes() listIndexes {
	var l listIndexes
	for i := range statusCap {
		l.byStatus[i] = newTree(listLess)
	}
	l.byWorkflow = newTree(groupLess)
	l.byParent = newTree(groupLess)
	l.changes = newTree(changeLess)
	l.workflows = newTree(workflowCountLess)
	return l
}

func (l *listIndexes) copy() listIndexes {
	var c listIndexes
	for i := range statusCap {
		c.byStatus[i] = l.byStatus[i].Copy()
	}
	c.byWorkflow = l.byWorkflow.Copy()
	c.byParent = l.byParent.Copy()
	c.changes = l.changes.Copy()
	c.workflows = l.workflows.Copy()
	c.counts = l.counts
	return c
}

// indexNew indexes a record just created (admitted or started as a child):
// putRecord gave it its admission's position.
func (s *State) indexNew(e *Execution) {
	l := &s.list
	l.byStatus[e.Status].SetHint(statusEntry(e), &l.hints[e.Status].set)
	l.setGroups(e)
	l.changes.Load(change{Key: changeKey(e.ChangeSeq, e.Status), At: e.UpdatedAt, ID: e.ID}) // sequences only grow: an append
	l.counts[e.Status]++
	wc, _ := l.workflows.Get(workflowCount{Name: e.WorkflowID})
	wc.Name = e.WorkflowID
	wc.N++
	l.workflows.Set(wc)
}

// reindex moves a record whose status changed from old to its new status and
// logs the change (putRecord numbered it), replacing the record's previous
// change, oldSeq. e is the stored record: replaced is false when it was
// changed in place, so that the entries already point to it.
func (s *State) reindex(e *Execution, old Status, oldSeq uint64, replaced bool) {
	l := &s.list
	l.byStatus[old].DeleteHint(statusEntry(e), &l.hints[old].del)
	l.changes.DeleteHint(change{Key: changeKey(oldSeq, old)}, &l.chint.del)
	l.byStatus[e.Status].SetHint(statusEntry(e), &l.hints[e.Status].set)
	if replaced {
		l.setGroups(e)
	}
	l.changes.Load(change{Key: changeKey(e.ChangeSeq, e.Status), At: e.UpdatedAt, ID: e.ID})
	l.counts[old]--
	l.counts[e.Status]++
}

// repoint makes the index entries of a record that was replaced (not changed
// in place) point to its new stored version. Its status is unchanged.
func (s *State) repoint(e *Execution) {
	l := &s.list
	l.byStatus[e.Status].SetHint(statusEntry(e), &l.hints[e.Status].set)
	l.setGroups(e)
}

// setGroups sets a record's entries in the workflow and parent indexes,
// pointing to e.
func (l *listIndexes) setGroups(e *Execution) {
	l.byWorkflow.SetHint(workflowEntry(e), &l.ghints[0].set)
	if e.Parent != nil {
		l.byParent.SetHint(parentEntry(e), &l.ghints[1].set)
	}
}

// unindex removes a record being retired from the indexes and its change
// from the log. Its counts stay: a retired record is still a record.
func (s *State) unindex(e *Execution) {
	l := &s.list
	l.byStatus[e.Status].Delete(statusEntry(e))
	l.byWorkflow.Delete(workflowEntry(e))
	if e.Parent != nil {
		l.byParent.Delete(parentEntry(e))
	}
	l.changes.Delete(change{Key: changeKey(e.ChangeSeq, e.Status)})
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
	// (the indexes serve one of them; the page skips what fails the
	// other); at least Limit.
	ScanMax int
}

// ListPos is a position in a listing: the admission time and the admission's
// position in the change log of the last record a page examined.
type ListPos struct {
	At  int64
	Adm uint64
}

// List calls fn with each record the query selects, in order, at most
// q.Limit of them. It returns the position to resume from and whether the
// listing may go on after it. fn must not change or keep the record. Like
// Get, List may run in several goroutines at once: it uses no search hint.
func (s *State) List(q *ListQuery, fn func(e *Execution)) (next ListPos, more bool) {
	l := &s.list
	var hits []hit
	var w *walk
	if q.Parent == "" && q.Workflow == "" {
		statuses := AllStatuses
		if q.Status != 0 {
			statuses = []Status{q.Status}
		}
		var tmp []hit
		for _, st := range statuses {
			if int(st) >= statusCap {
				continue
			}
			tmp = l.collectStatus(st, q, tmp[:0])
			if hits = mergeHits(hits, tmp, q.Newest); len(hits) > q.Limit+1 {
				hits = hits[:q.Limit+1]
			}
		}
	} else {
		tr, group := l.byWorkflow, q.Workflow
		if q.Parent != "" {
			tr, group = l.byParent, q.Parent
		}
		w = newWalk(q, nil)
		if q.Status != 0 || (q.Parent != "" && q.Workflow != "") {
			w.scanMax = max(q.ScanMax, q.Limit)
			w.keep = func(e *Execution) bool {
				return (q.Status == 0 || e.Status == q.Status) && (q.Workflow == "" || e.WorkflowID == q.Workflow)
			}
		}
		collectGroup(tr, group, w)
		hits = w.out
	}
	for i, h := range hits {
		if i == q.Limit {
			return next, true
		}
		fn(h.e)
		next = ListPos{At: h.At, Adm: h.Adm}
	}
	if w != nil && w.bounded {
		return w.last, true
	}
	return next, false
}

// hit is an index entry a listing found.
type hit struct {
	At  int64
	Adm uint64
	e   *Execution
}

func hitBefore(a, b hit, newest bool) bool {
	if a.At != b.At {
		return (a.At < b.At) != newest
	}
	return (a.Adm < b.Adm) != newest
}

// mergeHits merges two listings in the same order.
func mergeHits(a, b []hit, newest bool) []hit {
	if len(a) == 0 {
		return append(a, b...)
	}
	out := make([]hit, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if hitBefore(b[j], a[i], newest) {
			out = append(out, b[j])
			j++
		} else {
			out = append(out, a[i])
			i++
		}
	}
	return append(append(out, a[i:]...), b[j:]...)
}

// walk is a listing's walk of one index range: where it starts, which
// entries it takes, and, for a filter the index does not serve, how many it
// may examine.
type walk struct {
	q     *ListQuery
	pivot ListPos // where the walk starts (its entry included)
	out   []hit   // at most q.Limit+1: one more than a page tells there is more

	keep    func(*Execution) bool // nil: every entry in range
	scanMax int                   // with keep: the most entries to examine
	seen    int                   // entries examined
	last    ListPos               // the last entry examined
	bounded bool                  // the walk stopped at scanMax
}

// newWalk starts a walk at the query's position or its time bound,
// whichever comes later in the query's order. A descending walk with
// neither starts at the end (pivot.At 0).
func newWalk(q *ListQuery, out []hit) *walk {
	w := &walk{q: q, out: out}
	a := q.After
	switch {
	case !q.Newest:
		w.pivot = ListPos{At: q.From}
		if a != (ListPos{}) && a.At >= q.From {
			w.pivot = a
		}
	case a != (ListPos{}) && (q.To == 0 || a.At < q.To):
		w.pivot = a
	case q.To != 0:
		w.pivot = ListPos{At: q.To} // admission numbers start at 1: every entry at To comes after
	}
	return w
}

// take offers the next entry of the walk, and reports whether to go on.
func (w *walk) take(at int64, adm uint64, e *Execution) bool {
	q := w.q
	past := (q.Newest && at < q.From) || (!q.Newest && q.To != 0 && at >= q.To)
	if past || len(w.out) > q.Limit {
		return false
	}
	a := q.After
	switch {
	case q.To != 0 && at >= q.To, at < q.From:
		return true // before the range (the pivot's own time): not part of it
	case a != (ListPos{}) && (at == a.At && adm == a.Adm || (at != a.At && (at > a.At) == q.Newest) ||
		(at == a.At && (adm > a.Adm) == q.Newest)):
		return true // at or before the position
	case w.keep == nil:
		w.out = append(w.out, hit{At: at, Adm: adm, e: e})
		return true
	case w.seen == w.scanMax:
		w.bounded = true
		return false
	}
	w.seen++
	w.last = ListPos{At: at, Adm: adm}
	if w.keep(e) {
		w.out = append(w.out, hit{At: at, Adm: adm, e: e})
	}
	return true
}

// collectStatus appends to out, in the query's order, at most q.Limit+1
// records of status st that the query's time range selects, after its
// position.
func (l *listIndexes) collectStatus(st Status, q *ListQuery, out []hit) []hit {
	w := newWalk(q, out)
	t := l.byStatus[st]
	visit := func(k listEntry) bool { return w.take(k.At, k.Adm, k.e) }
	p := listEntry{At: w.pivot.At, Adm: w.pivot.Adm}
	switch {
	case !q.Newest:
		t.Ascend(p, visit)
	case w.pivot.At == 0:
		t.Reverse(visit)
	default:
		t.Descend(p, visit)
	}
	return w.out
}

// collectGroup walks one group (a workflow or a parent) of a group index.
func collectGroup(tr *btree.BTreeG[groupEntry], group string, w *walk) {
	visit := func(k groupEntry) bool { return k.Group == group && w.take(k.At, k.Adm, k.e) }
	p := groupEntry{Group: group, At: w.pivot.At, Adm: w.pivot.Adm}
	switch {
	case !w.q.Newest:
		tr.Ascend(p, visit)
	case w.pivot.At == 0:
		// The group's last entry: just before the next group name.
		tr.Descend(groupEntry{Group: group, At: maxTime, Adm: ^uint64(0)}, visit)
	default:
		tr.Descend(p, visit)
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
// limit of them. It may run in several goroutines at once.
func (s *State) Changes(after uint64, limit int, fn func(Change)) {
	if after >= maxChangeSeq || limit <= 0 {
		return
	}
	n := 0
	s.list.changes.Ascend(change{Key: changeKey(after+1, 0)}, func(c change) bool {
		fn(Change{Seq: c.Seq(), ID: c.ID, Status: c.Status(), At: c.At})
		n++
		return n < limit
	})
}

// FirstChange returns the position of the oldest change the log keeps.
func (s *State) FirstChange() (uint64, bool) {
	c, ok := s.list.changes.Min()
	return c.Seq(), ok
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
	s.list.workflows.Scan(func(w workflowCount) bool { return fn(w.Name, w.N) })
}

// WorkflowCount returns the number of distinct workflow IDs.
func (s *State) WorkflowCount() int { return s.list.workflows.Len() }

// ---- Invariants ------------------------------------------------------------

// checkList verifies the listing indexes and the change log against the
// records: each record that is not retired has exactly one entry in its
// status's index, its workflow's and (a child) its parent's, each pointing
// to the stored record, and exactly one change, its latest (ChangeSeq), with
// its status, at a time within its admission and its latest update; no entry
// of anything else; positions are at most Meta.ChangeSeq and admissions
// come no later than latest changes; the counts agree with the records,
// retired ones included.
func (s *State) checkList() error {
	l := &s.list
	var err error
	fail := func(id, msg string) bool {
		err = invariantErr("execution " + quote(id) + ": " + msg)
		return false
	}
	var counts [statusCap]int
	workflows := map[string]int{} // only looked up and compared, never iterated for a result
	admissions := map[uint64]bool{}
	entries, children := 0, 0
	s.execs.Scan(func(it execItem) bool {
		e := it.e
		st := e.Status
		counts[st]++
		workflows[e.WorkflowID]++
		if k, ok := l.byStatus[st].Get(statusEntry(e)); !ok || k.e != e {
			return fail(e.ID, "missing from the "+statusName(st)+" listing index, or its entry points elsewhere")
		}
		if g, ok := l.byWorkflow.Get(workflowEntry(e)); !ok || g.e != e {
			return fail(e.ID, "missing from its workflow's listing index, or its entry points elsewhere")
		}
		if e.Parent != nil {
			children++
			if g, ok := l.byParent.Get(parentEntry(e)); !ok || g.e != e {
				return fail(e.ID, "missing from its parent's listing index, or its entry points elsewhere")
			}
		}
		c, ok := l.changes.Get(change{Key: changeKey(e.ChangeSeq, st)})
		switch {
		case !ok || c.ID != e.ID:
			return fail(e.ID, "its latest change "+itoa(e.ChangeSeq)+" ("+statusName(st)+") is not in the change log")
		case e.AdmitSeq == 0 || e.AdmitSeq > e.ChangeSeq || e.ChangeSeq > s.meta.ChangeSeq:
			return fail(e.ID, "admitted at position "+itoa(e.AdmitSeq)+", changed at "+itoa(e.ChangeSeq)+", the sequence is at "+itoa(s.meta.ChangeSeq))
		case admissions[e.AdmitSeq]:
			return fail(e.ID, "shares its admission's position with another record")
		case c.At < e.AdmittedAt || c.At > e.UpdatedAt:
			return fail(e.ID, "latest change at a time outside its record's admission and update")
		}
		admissions[e.AdmitSeq] = true
		entries++
		return true
	})
	if err != nil {
		return err
	}
	s.retired.Scan(func(it retiredItem) bool {
		counts[it.r.Outcome.Status]++
		workflows[it.r.WorkflowID]++
		return true
	})
	sizes := [3]int{0, l.byWorkflow.Len(), l.byParent.Len()}
	for _, st := range AllStatuses {
		sizes[0] += l.byStatus[st].Len()
	}
	for st := range statusCap {
		if counts[st] != l.counts[st] {
			return invariantErr("status " + statusName(Status(st)) + " counts " + itoa(uint64(l.counts[st])) + " records, the records say " + itoa(uint64(counts[st])))
		}
	}
	if sizes != [3]int{entries, entries, children} || l.changes.Len() != entries {
		return invariantErr("listing indexes or change log hold entries of no record")
	}
	if l.workflows.Len() != len(workflows) {
		return invariantErr("workflow counts name workflows no record has")
	}
	l.workflows.Scan(func(w workflowCount) bool {
		if workflows[w.Name] != w.N {
			err = invariantErr("workflow " + quote(w.Name) + " counts " + itoa(uint64(w.N)) + " records, the records say " + itoa(uint64(workflows[w.Name])))
		}
		return err == nil
	})
	return err
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
	}
	return "status(" + itoa(uint64(s)) + ")"
}
