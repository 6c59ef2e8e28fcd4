package fsm

import (
	"errors"

	"github.com/tidwall/btree"
)

// Listing and the change log.
//
// Every record that is not retired is in three secondary indexes, one tree
// per status each, ordered by admission time then ID:
//
//	byStatus[s]    (AdmittedAt, ID)              every record with status s
//	byWorkflow[s]  (WorkflowID, AdmittedAt, ID)  the same records, by workflow
//	byParent[s]    (Parent, AdmittedAt, ID)      the children among them, by parent
//
// so a listing by status, workflow or parent, within an admission-time range,
// in either order, reads one contiguous range of one tree per status it asks
// for: O(log n + page) for a status, O(S log n + S page) for any status (S
// statuses, a constant). Only parent and workflow together are not indexed:
// they read the parent's children and skip the other workflows, at most
// ListQuery.ScanMax entries per page (the page then ends early, with a
// position to go on from).
//
// Entries carry the stored record, as the claimable indexes do, so a page
// reaches its records without searching for them: putRecord moves an entry
// when the record's status changes and repoints it when the record is
// replaced.
//
// The change log numbers every change of a record's status (admission
// included) with a sequence, Meta.ChangeSeq, that only grows: it is part of
// the snapshot, and replay assigns the same numbers. It keeps the latest
// change of each record that is not retired: a new change of a record
// removes its previous one, so the log holds exactly one entry per such
// record. Retirement removes a record from the indexes and from the change
// log; it is not a change itself.
//
// All of it is copy-on-write like the rest of the state: Copy captures it in
// O(1).

// statusCap bounds the numeric value of a status: arrays indexed by status
// have this length. A new status needs only its constant in AllStatuses.
const statusCap = 8

// AllStatuses lists every status in numeric order. Every index and count by
// status iterates it.
var AllStatuses = []Status{StatusAdmitted, StatusSuspended, StatusCompleted, StatusFailed}

// listEntry is an entry of a status's admission index. Seq is the position of
// the record's latest status change (the key of its change-log entry).
type listEntry struct {
	At  int64
	e   *Execution
	Seq uint64
}

func listLess(a, b listEntry) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	return a.e.ID < b.e.ID
}

// groupEntry is an entry of a workflow's or a parent's admission index.
type groupEntry struct {
	Group string
	At    int64
	e     *Execution
}

func groupLess(a, b groupEntry) bool {
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	if a.At != b.At {
		return a.At < b.At
	}
	return a.e.ID < b.e.ID
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
	byWorkflow [statusCap]*btree.BTreeG[groupEntry]
	byParent   [statusCap]*btree.BTreeG[groupEntry]
	changes    *btree.BTreeG[change]
	workflows  *btree.BTreeG[workflowCount]
	counts     [statusCap]int // records by status, retired ones included

	// Search hints of the applying goroutine: scratch, not state.
	hints [3][statusCap]indexHints
	chint indexHints
}

func newListIndexes() listIndexes {
	var l listIndexes
	for i := range statusCap {
		l.byStatus[i] = newTree(listLess)
		l.byWorkflow[i] = newTree(groupLess)
		l.byParent[i] = newTree(groupLess)
	}
	l.changes = newTree(changeLess)
	l.workflows = newTree(workflowCountLess)
	return l
}

func (l *listIndexes) copy() listIndexes {
	var c listIndexes
	for i := range statusCap {
		c.byStatus[i] = l.byStatus[i].Copy()
		c.byWorkflow[i] = l.byWorkflow[i].Copy()
		c.byParent[i] = l.byParent[i].Copy()
	}
	c.changes = l.changes.Copy()
	c.workflows = l.workflows.Copy()
	c.counts = l.counts
	return c
}

// indexNew indexes a record just created (admitted or started as a child)
// and logs its first change.
func (s *State) indexNew(e *Execution) {
	l := &s.list
	seq := s.nextChangeSeq()
	l.insert(e, seq)
	l.changes.Load(change{Key: changeKey(seq, e.Status), At: e.UpdatedAt, ID: e.ID}) // sequences only grow: an append
	l.counts[e.Status]++
	wc, _ := l.workflows.Get(workflowCount{Name: e.WorkflowID})
	wc.Name = e.WorkflowID
	wc.N++
	l.workflows.Set(wc)
}

// reindex moves a record whose status changed from old to its new status and
// logs the change, replacing the record's previous change. e is the stored
// record (possibly the same pointer the entries hold, changed in place).
func (s *State) reindex(e *Execution, old Status) {
	l := &s.list
	prev := l.remove(e, old)
	l.changes.DeleteHint(change{Key: changeKey(prev, old)}, &l.chint.del)
	seq := s.nextChangeSeq()
	l.insert(e, seq)
	l.changes.Load(change{Key: changeKey(seq, e.Status), At: e.UpdatedAt, ID: e.ID})
	l.counts[old]--
	l.counts[e.Status]++
}

// repoint makes the index entries of a record that was replaced (not changed
// in place) point to its new stored version. Its status is unchanged.
func (s *State) repoint(e *Execution) {
	l := &s.list
	h := &l.hints[0][e.Status]
	t := l.byStatus[e.Status]
	k := listEntry{At: e.AdmittedAt, e: e}
	prev, _ := t.GetHint(k, &h.set)
	k.Seq = prev.Seq
	t.SetHint(k, &h.set)
	l.byWorkflow[e.Status].SetHint(groupEntry{Group: e.WorkflowID, At: e.AdmittedAt, e: e}, &l.hints[1][e.Status].set)
	if e.Parent != nil {
		l.byParent[e.Status].SetHint(groupEntry{Group: e.Parent.ExecutionID, At: e.AdmittedAt, e: e}, &l.hints[2][e.Status].set)
	}
}

// unindex removes a record being retired from the indexes and its change
// from the log. Its counts stay: a retired record is still a record.
func (s *State) unindex(e *Execution) {
	l := &s.list
	seq := l.remove(e, e.Status)
	l.changes.Delete(change{Key: changeKey(seq, e.Status)})
}

// insert adds a record's entries under its status.
func (l *listIndexes) insert(e *Execution, seq uint64) {
	st := e.Status
	l.byStatus[st].SetHint(listEntry{At: e.AdmittedAt, e: e, Seq: seq}, &l.hints[0][st].set)
	l.byWorkflow[st].SetHint(groupEntry{Group: e.WorkflowID, At: e.AdmittedAt, e: e}, &l.hints[1][st].set)
	if e.Parent != nil {
		l.byParent[st].SetHint(groupEntry{Group: e.Parent.ExecutionID, At: e.AdmittedAt, e: e}, &l.hints[2][st].set)
	}
}

// remove deletes a record's entries under status st and returns the
// sequence number of its latest change.
func (l *listIndexes) remove(e *Execution, st Status) uint64 {
	prev, _ := l.byStatus[st].DeleteHint(listEntry{At: e.AdmittedAt, e: e}, &l.hints[0][st].del)
	l.byWorkflow[st].DeleteHint(groupEntry{Group: e.WorkflowID, At: e.AdmittedAt, e: e}, &l.hints[1][st].del)
	if e.Parent != nil {
		l.byParent[st].DeleteHint(groupEntry{Group: e.Parent.ExecutionID, At: e.AdmittedAt, e: e}, &l.hints[2][st].del)
	}
	return prev.Seq
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
	// After resumes a listing after the position (AfterAt, AfterID), which
	// the listing itself excludes; AfterID "" starts from the beginning.
	AfterAt int64
	AfterID string
	Limit   int // the most records to return; at least 1
	// ScanMax bounds the entries one page examines when the query filters
	// by parent and workflow together (the only filter the indexes do not
	// serve directly); at least Limit.
	ScanMax int
}

// ListPos is a position in a listing: the last entry a page examined.
type ListPos struct {
	At int64
	ID string
}

// List calls fn with each record the query selects, in order, at most
// q.Limit of them. It returns the position to resume from and whether the
// listing may go on after it. fn must not change or keep the record. Like
// Get, List may run in several goroutines at once: it uses no search hint.
func (s *State) List(q *ListQuery, fn func(e *Execution)) (next ListPos, more bool) {
	statuses := AllStatuses
	if q.Status != 0 {
		statuses = []Status{q.Status}
	}
	n := q.Limit + 1
	scanning := q.Parent != "" && q.Workflow != ""
	if scanning {
		n = max(q.ScanMax, q.Limit) + 1
	}
	var hits []hit
	var tmp []hit
	for _, st := range statuses {
		if int(st) >= statusCap {
			continue
		}
		tmp = s.list.collect(st, q, n, tmp[:0])
		hits = mergeHits(hits, tmp, q.Newest)
		if len(hits) > n {
			hits = hits[:n]
		}
	}
	examined, returned := 0, 0
	for _, h := range hits {
		if examined == n-1 {
			return next, true
		}
		examined++
		next = ListPos{At: h.At, ID: h.e.ID}
		if scanning && h.e.WorkflowID != q.Workflow {
			continue
		}
		fn(h.e)
		returned++
		if returned == q.Limit {
			return next, examined < len(hits)
		}
	}
	return next, false
}

// hit is an index entry a listing found.
type hit struct {
	At int64
	e  *Execution
}

func hitBefore(a, b hit, newest bool) bool {
	if a.At != b.At {
		return (a.At < b.At) != newest
	}
	return (a.e.ID < b.e.ID) != newest
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

// collect appends to out, in the query's order, at most n entries of
// status st that the query selects, after its position. It picks the index:
// the parent's, the workflow's, or the status's own.
func (l *listIndexes) collect(st Status, q *ListQuery, n int, out []hit) []hit {
	ok := func(at int64, e *Execution) bool {
		switch {
		case q.To != 0 && at >= q.To, at < q.From:
			return false
		case q.AfterID == "":
			return true
		case at != q.AfterAt:
			return (at > q.AfterAt) != q.Newest
		}
		return e.ID != q.AfterID && (e.ID > q.AfterID) != q.Newest
	}
	// past reports whether an entry lies beyond the range, in the query's
	// order: the walk stops there.
	past := func(at int64) bool {
		if q.Newest {
			return at < q.From
		}
		return q.To != 0 && at >= q.To
	}
	lo, hi := q.From, q.To // the pivot's time: where the walk starts
	loID, hiID := "", ""
	if q.AfterID != "" {
		if !q.Newest && q.AfterAt >= lo {
			lo, loID = q.AfterAt, q.AfterID
		}
		if q.Newest && (hi == 0 || q.AfterAt < hi) {
			hi, hiID = q.AfterAt, q.AfterID
		}
	}
	group, tr := "", (*btree.BTreeG[groupEntry])(nil)
	switch {
	case q.Parent != "":
		group, tr = q.Parent, l.byParent[st]
	case q.Workflow != "":
		group, tr = q.Workflow, l.byWorkflow[st]
	}
	if tr == nil {
		t := l.byStatus[st]
		visit := func(k listEntry) bool {
			if past(k.At) || len(out) == n {
				return false
			}
			if ok(k.At, k.e) {
				out = append(out, hit{At: k.At, e: k.e})
			}
			return true
		}
		switch {
		case !q.Newest:
			t.Ascend(listEntry{At: lo, e: &Execution{ID: loID}}, visit)
		case hi == 0:
			t.Reverse(visit)
		default:
			t.Descend(listEntry{At: hi, e: &Execution{ID: hiID}}, visit)
		}
		return out
	}
	visit := func(k groupEntry) bool {
		if k.Group != group || past(k.At) || len(out) == n {
			return false
		}
		if ok(k.At, k.e) {
			out = append(out, hit{At: k.At, e: k.e})
		}
		return true
	}
	switch {
	case !q.Newest:
		tr.Ascend(groupEntry{Group: group, At: lo, e: &Execution{ID: loID}}, visit)
	case hi == 0:
		// The group's last entry: just before the next group name.
		tr.Descend(groupEntry{Group: group, At: maxTime, e: &Execution{ID: maxIDKey}}, visit)
	default:
		tr.Descend(groupEntry{Group: group, At: hi, e: &Execution{ID: hiID}}, visit)
	}
	return out
}

// maxIDKey sorts after every execution ID (IDs are at most 200 bytes of
// UTF-8, whose bytes are never 0xff).
var maxIDKey = string([]byte{0xff})

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
// to the stored record, and exactly one change, the latest, with its status;
// no entry of anything else; changes are numbered at most Meta.ChangeSeq;
// the counts agree with the records, retired ones included.
func (s *State) checkList() error {
	l := &s.list
	var err error
	fail := func(id, msg string) bool {
		err = invariantErr("execution " + quote(id) + ": " + msg)
		return false
	}
	var counts [statusCap]int
	workflows := map[string]int{} // only looked up and compared, never iterated for a result
	seqs := map[uint64]bool{}
	entries, children := 0, 0
	s.execs.Scan(func(it execItem) bool {
		e := it.e
		st := e.Status
		counts[st]++
		workflows[e.WorkflowID]++
		k, ok := l.byStatus[st].Get(listEntry{At: e.AdmittedAt, e: e})
		switch {
		case !ok:
			return fail(e.ID, "missing from the "+statusName(st)+" listing index")
		case k.e != e:
			return fail(e.ID, "listing entry points to another record than the stored one")
		case seqs[k.Seq]:
			return fail(e.ID, "shares its change with another record")
		}
		seqs[k.Seq] = true
		if g, ok := l.byWorkflow[st].Get(groupEntry{Group: e.WorkflowID, At: e.AdmittedAt, e: e}); !ok || g.e != e {
			return fail(e.ID, "missing from its workflow's listing index, or its entry points elsewhere")
		}
		if e.Parent != nil {
			children++
			if g, ok := l.byParent[st].Get(groupEntry{Group: e.Parent.ExecutionID, At: e.AdmittedAt, e: e}); !ok || g.e != e {
				return fail(e.ID, "missing from its parent's listing index, or its entry points elsewhere")
			}
		}
		c, ok := l.changes.Get(change{Key: changeKey(k.Seq, st)})
		switch {
		case !ok || c.ID != e.ID:
			return fail(e.ID, "its latest change "+itoa(k.Seq)+" ("+statusName(st)+") is not in the change log")
		case k.Seq == 0 || k.Seq > s.meta.ChangeSeq:
			return fail(e.ID, "change "+itoa(k.Seq)+" numbered beyond the sequence "+itoa(s.meta.ChangeSeq))
		case c.At < e.AdmittedAt || c.At > e.UpdatedAt:
			return fail(e.ID, "latest change at a time outside its record's admission and update")
		}
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
	sizes := [3]int{}
	for _, st := range AllStatuses {
		sizes[0] += l.byStatus[st].Len()
		sizes[1] += l.byWorkflow[st].Len()
		sizes[2] += l.byParent[st].Len()
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
