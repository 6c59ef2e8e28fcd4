package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/execstore/execstore"
)

// Listing and the change feed in the reference model, from the contract:
// every admission (a child start included) and every change of an
// execution's status takes the next position of the feed, in the order the
// store applies them; the feed keeps each execution's latest change; a
// listing selects executions by status, workflow, parent and admission time
// and orders them by admission, oldest or newest first. A retired execution
// is not listed, and retirement removes its change from the feed (retire.go).

// changeAt gives e the next position of the feed for a change at now.
func (m *model) changeAt(e *mexec, now int64) {
	m.seq++
	e.changeSeq, e.changeAt = m.seq, now
	if e.admitSeq == 0 {
		e.admitSeq = m.seq
	}
}

// listQuery is a listing the workload asks for, page by page.
type listQuery struct {
	q     execstore.ListQuery
	limit int // the page size
}

// list is what a listing through every page returns: the records in order.
func (m *model) list(lq listQuery) result {
	q := lq.q
	var sel []*mexec
	for _, id := range m.order {
		e := m.execs[id]
		switch {
		case e.retired,
			q.Status != "" && e.status != q.Status,
			q.WorkflowID != "" && e.workflow != q.WorkflowID,
			q.ParentID != "" && (e.parent == nil || e.parent.ExecutionID != q.ParentID),
			!q.AdmittedAfter.IsZero() && e.admittedAt < q.AdmittedAfter.UnixNano(),
			!q.AdmittedBefore.IsZero() && e.admittedAt >= q.AdmittedBefore.UnixNano():
			continue
		}
		sel = append(sel, e)
	}
	slices.SortFunc(sel, func(a, b *mexec) int { return compare(int64(a.admitSeq), int64(b.admitSeq)) })
	if q.Order == execstore.NewestFirst {
		slices.Reverse(sel)
	}
	out := result{Records: []execstore.Record{}}
	for _, e := range sel {
		out.Records = append(out.Records, m.record(e))
	}
	return out
}

// changes is the feed after a position, at most limit changes.
func (m *model) changes(after uint64, limit int) result {
	var sel []*mexec
	for _, id := range m.order {
		if e := m.execs[id]; e.changeSeq > after {
			sel = append(sel, e)
		}
	}
	slices.SortFunc(sel, func(a, b *mexec) int { return compare(int64(a.changeSeq), int64(b.changeSeq)) })
	page := execstore.ChangesPage{Changes: []execstore.Change{}, Next: after, Last: m.seq}
	for _, e := range sel[:min(limit, len(sel))] {
		page.Changes = append(page.Changes, execstore.Change{Position: e.changeSeq, ExecutionID: e.id, Status: e.status, At: timeOf(e.changeAt)})
		page.Next = e.changeSeq
	}
	return result{Feed: &page}
}

// listAll runs a listing through every page, checking that each page
// holds at most the page size.
func listAll(s *execstore.Store, lq listQuery) result {
	q := lq.q
	q.Limit = lq.limit
	out := result{Records: []execstore.Record{}}
	for pages := 0; ; pages++ {
		page, err := s.List(context.Background(), q)
		if err != nil {
			return withCode(result{}, err)
		}
		if len(page.Records) > lq.limit || pages > 10_000 {
			return result{Code: fmt.Sprintf("ERROR: a page of %d records (limit %d), page %d", len(page.Records), lq.limit, pages)}
		}
		for _, r := range page.Records {
			normalize(&r)
			out.Records = append(out.Records, r)
		}
		if page.Cursor == "" {
			return out
		}
		q.Cursor = page.Cursor
	}
}

// changesOf reads the feed without waiting.
func changesOf(s *execstore.Store, after uint64, limit int) result {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // answer at once: never wait
	page, err := s.Changes(ctx, after, limit)
	if err != nil && !(err == context.Canceled && len(page.Changes) == 0) {
		return withCode(result{}, err)
	}
	if page.Changes == nil {
		page.Changes = []execstore.Change{}
	}
	return result{Feed: &page}
}

// readFeed runs, after one operation in six, a listing or a read of the
// feed drawn from feedRng, and compares it with the model. Reads change
// nothing, so the rest of the run is the same with or without them.
func (w *world) readFeed() error {
	if w.feedRng.IntN(6) != 0 {
		return nil
	}
	main := w.rng
	w.rng = w.feedRng // the generators draw from w.rng
	o := w.genChanges()
	if w.chance(50) {
		o = w.genList()
	}
	w.rng = main
	got := o.call(w.store)
	w.tr.line("%d %s -> %s", w.ops, o.describe(w.tr), got.describe(w.tr))
	if exp := o.apply(w.model, 0, ""); !equalResults(exp, got) {
		return violationf("%s: result differs from the model (-model +store):\n%s", o.describe(w.tr), diffResults(exp, got))
	}
	return nil
}

// genList asks for a listing with random filters and page size.
func (w *world) genList() *op {
	lq := listQuery{limit: 1 + w.pick(4)}
	q := &lq.q
	if w.chance(40) {
		q.Status = []execstore.Status{execstore.StatusAdmitted, execstore.StatusSuspended, execstore.StatusCompleted, execstore.StatusFailed, execstore.StatusCancelled}[w.pick(5)]
	}
	if w.chance(40) {
		q.WorkflowID = []string{"wf-a", "wf-b", "wf-child", "wf-other"}[w.pick(4)]
	}
	if w.chance(20) {
		q.ParentID = w.pickExec()
	}
	if w.chance(30) {
		q.AdmittedAfter = timeOf(w.clock.nanos() - int64(w.pick(60))*int64(time.Second))
	}
	if w.chance(20) {
		q.AdmittedBefore = timeOf(w.clock.nanos() - int64(w.pick(60))*int64(time.Second))
	}
	if w.chance(50) {
		q.Order = execstore.NewestFirst
	}
	return &op{kind: opList, list: lq}
}

// genChanges reads the feed from a position at or near its head, or from
// the start.
func (w *world) genChanges() *op {
	o := &op{kind: opChanges, limit: 1 + w.pick(5)}
	if w.model.seq > 0 && w.chance(70) {
		o.after = uint64(max(0, int64(w.model.seq)-int64(w.pick(8))))
	}
	return o
}

// checkFeed compares the whole feed and a few listings with the model.
func (w *world) checkFeed(s *execstore.Store, when string) error {
	var got []execstore.Change
	after := uint64(0)
	for {
		r := changesOf(s, after, 7)
		if r.Feed == nil {
			return violationf("%s: Changes: %s", when, r.Code)
		}
		if r.Feed.Last != w.model.seq {
			return violationf("%s: the feed's head is at %d, the model's at %d", when, r.Feed.Last, w.model.seq)
		}
		got = append(got, r.Feed.Changes...)
		if len(r.Feed.Changes) == 0 {
			break
		}
		after = r.Feed.Next
	}
	exp := w.model.changes(0, len(w.model.order)+1).Feed.Changes
	if !equalResults(result{Feed: &execstore.ChangesPage{Changes: exp}}, result{Feed: &execstore.ChangesPage{Changes: got}}) {
		return violationf("%s: the change feed differs from the model (-model +store):\n%s", when, diffResults(
			result{Feed: &execstore.ChangesPage{Changes: exp}}, result{Feed: &execstore.ChangesPage{Changes: got}}))
	}
	for _, lq := range []listQuery{{limit: 3}, {q: execstore.ListQuery{Order: execstore.NewestFirst, Status: execstore.StatusSuspended}, limit: 2}} {
		if exp, got := w.model.list(lq), listAll(s, lq); !equalResults(exp, got) {
			return violationf("%s: listing %+v differs from the model (-model +store):\n%s", when, lq.q, diffResults(exp, got))
		}
	}
	return nil
}
