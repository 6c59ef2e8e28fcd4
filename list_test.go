package execstore_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/vfs"
	"github.com/google/go-cmp/cmp"
)

// listIDs pages through a listing with the given page size and returns the
// IDs in order.
func (f *fixture) listIDs(q execstore.ListQuery) []string {
	f.t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			f.t.Fatalf("%+v: the listing does not end", q)
		}
		page, err := f.s.List(ctx, q)
		if err != nil {
			f.t.Fatalf("List(%+v): %v", q, err)
		}
		for _, r := range page.Records {
			out = append(out, r.ExecutionID)
		}
		if page.Cursor == "" {
			return out
		}
		q.Cursor = page.Cursor
	}
}

// listStore admits a, b, c (workflow w1, the first two in one batch-time),
// d (w2), completes b, suspends c, and starts two children of d: e1 (w1)
// and e2 (w2).
func listStore(t *testing.T) *fixture {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w1"})
	f.admit(execstore.AdmitRequest{ExecutionID: "b", WorkflowID: "w1"})
	f.clock.Advance(time.Second)
	f.admit(execstore.AdmitRequest{ExecutionID: "c", WorkflowID: "w1"})
	f.clock.Advance(time.Second)
	f.admit(execstore.AdmitRequest{ExecutionID: "d", WorkflowID: "w2"})
	leases := map[string]execstore.Lease{}
	for _, l := range f.claim(10, time.Minute) {
		leases[l.ExecutionID] = l
	}
	f.ack(leases["b"], execstore.Completed(nil))
	f.ack(leases["c"], execstore.Suspended())
	l := leases["d"]
	f.clock.Advance(time.Second)
	for _, kw := range [][2]string{{"k1", "w1"}, {"k2", "w2"}} {
		if _, err := f.s.Start(ctx, l, kw[0], kw[1], nil); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func childrenOf(f *fixture, parent string) map[string]string {
	out := map[string]string{}
	page, _ := f.s.List(ctx, execstore.ListQuery{ParentID: parent})
	for _, r := range page.Records {
		out[r.WorkflowID] = r.ExecutionID
	}
	return out
}

// "List filters by status, workflow ID, parent and admitted-time range,
// newest or oldest first."
func TestListFiltersByStatusWorkflowParentAndAdmittedTime(t *testing.T) {
	f := listStore(t)
	kids := childrenOf(f, "d")
	e1, e2 := kids["w1"], kids["w2"]
	for _, c := range []struct {
		name string
		q    execstore.ListQuery
		want []string
	}{
		{"everything in admission order", execstore.ListQuery{}, []string{"a", "b", "c", "d", e1, e2}},
		{"newest first", execstore.ListQuery{Order: execstore.NewestFirst}, []string{e2, e1, "d", "c", "b", "a"}},
		{"a status", execstore.ListQuery{Status: execstore.StatusAdmitted}, []string{"a", "d", e1, e2}},
		{"another status", execstore.ListQuery{Status: execstore.StatusCompleted}, []string{"b"}},
		{"a workflow", execstore.ListQuery{WorkflowID: "w1"}, []string{"a", "b", "c", e1}},
		{"a workflow and a status", execstore.ListQuery{WorkflowID: "w1", Status: execstore.StatusAdmitted, Order: execstore.NewestFirst}, []string{e1, "a"}},
		{"a parent", execstore.ListQuery{ParentID: "d"}, []string{e1, e2}},
		{"a parent and a workflow", execstore.ListQuery{ParentID: "d", WorkflowID: "w2"}, []string{e2}},
		{"admitted at or after", execstore.ListQuery{AdmittedAfter: t0.Add(time.Second)}, []string{"c", "d", e1, e2}},
		{"admitted before", execstore.ListQuery{AdmittedBefore: t0.Add(time.Second)}, []string{"a", "b"}},
		{"a time range and a workflow", execstore.ListQuery{WorkflowID: "w1", AdmittedAfter: t0.Add(time.Second), AdmittedBefore: t0.Add(3 * time.Second)}, []string{"c"}},
		{"nothing matches", execstore.ListQuery{WorkflowID: "none"}, nil},
	} {
		for _, limit := range []int{0, 1, 2, 4} {
			q := c.q
			q.Limit = limit
			if got := f.listIDs(q); !slices.Equal(got, c.want) {
				t.Errorf("%s, pages of %d: %v, want %v", c.name, limit, got, c.want)
			}
		}
	}
	page, err := f.s.List(ctx, execstore.ListQuery{Status: execstore.StatusCompleted})
	if err != nil || len(page.Records) != 1 || !cmp.Equal(page.Records[0], f.get("b")) {
		t.Fatalf("List returns %+v, %v; want the record Get returns", page.Records, err)
	}
}

// "An opaque cursor continues a listing; a page costs O(page + log n)": a
// cursor resumes exactly after the page it came from, across a reopen too,
// and the last page has none.
func TestListPagesWithACursorInBothOrdersAcrossAReopen(t *testing.T) {
	f := newFixture(t)
	var want []string
	for i := range 25 {
		id := string(rune('a'+i%26)) + "-" + time.Duration(i).String()
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
		want = append(want, id)
		if i%4 == 0 {
			f.clock.Advance(time.Millisecond)
		}
	}
	for _, order := range []execstore.Order{execstore.OldestFirst, execstore.NewestFirst} {
		q := execstore.ListQuery{Order: order, Limit: 10}
		first, err := f.s.List(ctx, q)
		if err != nil || len(first.Records) != 10 || first.Cursor == "" {
			t.Fatalf("%s: first page %d records, cursor %q, %v", order, len(first.Records), first.Cursor, err)
		}
		f.reopen()
		q.Cursor = first.Cursor
		var got []string
		for _, r := range first.Records {
			got = append(got, r.ExecutionID)
		}
		got = append(got, f.listIDs(q)...)
		exp := slices.Clone(want)
		if order == execstore.NewestFirst {
			slices.Reverse(exp)
		}
		if !slices.Equal(got, exp) {
			t.Fatalf("%s: %v, want %v", order, got, exp)
		}
	}
}

// "Bad cursor or limit → ErrInvalidArgument."
func TestListRefusesABadStatusOrderLimitOrCursor(t *testing.T) {
	f := listStore(t)
	page, err := f.s.List(ctx, execstore.ListQuery{Limit: 2})
	if err != nil || page.Cursor == "" {
		t.Fatal(page, err)
	}
	for name, q := range map[string]execstore.ListQuery{
		"unknown status":                    {Status: "running"},
		"unknown order":                     {Order: "random"},
		"negative limit":                    {Limit: -1},
		"limit over the maximum":            {Limit: execstore.DefaultLimits.ListPageMax + 1},
		"cursor that is not one":            {Cursor: "not a cursor"},
		"cursor of another query":           {Cursor: page.Cursor, WorkflowID: "w1"},
		"cursor of another order":           {Cursor: page.Cursor, Order: execstore.NewestFirst},
		"cursor cut short":                  {Cursor: page.Cursor[:len(page.Cursor)-3]},
		"cursor of another version of this": {Cursor: "Ag" + page.Cursor[2:]},
	} {
		_, err := f.s.List(ctx, q)
		if !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
		if over := q.Limit > execstore.DefaultLimits.ListPageMax; errors.Is(err, execstore.ErrLimitExceeded) != over {
			t.Errorf("%s: %v matches ErrLimitExceeded: %v, want %v", name, err, !over, over)
		}
	}
	_, err = f.s.Changes(ctx, 0, execstore.DefaultLimits.ListPageMax+1)
	if !errors.Is(err, execstore.ErrInvalidArgument) || !errors.Is(err, execstore.ErrLimitExceeded) {
		t.Errorf("Changes over the page maximum: %v, want ErrInvalidArgument and ErrLimitExceeded", err)
	}
}

// "Retired records are not listed", and retirement is not a change: it
// removes the execution's change from the feed. Counts keep them.
func TestRetiredExecutionsLeaveTheListingAndTheFeedButNotTheCounts(t *testing.T) {
	f := newFixture(t)
	f.s.Close()
	f.opts.Retention = time.Hour
	f.open()
	f.admit(execstore.AdmitRequest{ExecutionID: "old", WorkflowID: "w"})
	f.admit(execstore.AdmitRequest{ExecutionID: "live", WorkflowID: "w"})
	f.ack(f.claimFor("old"), execstore.Completed(nil))
	f.clock.Advance(2 * time.Hour)
	f.wake("live", f.clock.Now()) // any write lets the writer check retention
	eventually(t, "old retired", func() bool { return f.stats().Retired == 1 })
	if got := f.listIDs(execstore.ListQuery{}); !slices.Equal(got, []string{"live"}) {
		t.Fatalf("listed %v, want only live", got)
	}
	page, err := f.s.Changes(ctx, 0, 10)
	if err != nil || len(page.Changes) != 1 || page.Changes[0].ExecutionID != "live" {
		t.Fatalf("changes %+v, %v; want only live's", page.Changes, err)
	}
	st := f.stats()
	if st.ByStatus[execstore.StatusCompleted] != 1 || st.ByWorkflow["w"] != 2 {
		t.Fatalf("counts %v %v: retired records count", st.ByStatus, st.ByWorkflow)
	}
}

// "Counts by status and by workflow are in Stats", retired included, and
// the by-workflow map is bounded.
func TestStatsCountByStatusAndByWorkflow(t *testing.T) {
	f := listStore(t)
	st := f.stats()
	wantStatus := map[execstore.Status]int{execstore.StatusAdmitted: 4, execstore.StatusSuspended: 1, execstore.StatusCompleted: 1, execstore.StatusFailed: 0, execstore.StatusCancelled: 0}
	if diff := cmp.Diff(wantStatus, st.ByStatus); diff != "" {
		t.Errorf("ByStatus (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"w1": 4, "w2": 2}, st.ByWorkflow); diff != "" || st.WorkflowsOmitted != 0 {
		t.Errorf("ByWorkflow (-want +got):\n%s (omitted %d)", diff, st.WorkflowsOmitted)
	}
	for i := range execstore.StatsWorkflowsMax {
		f.admit(execstore.AdmitRequest{WorkflowID: "many-" + time.Duration(i).String()})
	}
	if st := f.stats(); len(st.ByWorkflow) != execstore.StatsWorkflowsMax || st.WorkflowsOmitted != 2 {
		t.Fatalf("%d workflows in ByWorkflow, %d omitted; want %d and 2", len(st.ByWorkflow), st.WorkflowsOmitted, execstore.StatsWorkflowsMax)
	}
}

func changeList(page execstore.ChangesPage) []string {
	var out []string
	for _, c := range page.Changes {
		out = append(out, c.ExecutionID+":"+string(c.Status))
	}
	return out
}

// "Every change of an execution's status is numbered; a consumer that
// stores its position resumes exactly where it stopped", across a restart
// and a snapshot too, and the feed keeps each execution's latest change.
func TestChangesAreNumberedInOrderAndResumeAcrossRestartsAndSnapshots(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w"}) // 1
	f.admit(execstore.AdmitRequest{ExecutionID: "b", WorkflowID: "w"}) // 2
	page, err := f.s.Changes(ctx, 0, 10)
	if got := changeList(page); err != nil || !slices.Equal(got, []string{"a:admitted", "b:admitted"}) || page.Next != 2 || page.Last != 2 {
		t.Fatalf("changes %v next %d last %d, %v", got, page.Next, page.Last, err)
	}
	if c := page.Changes[0]; c.Position != 1 || !c.At.Equal(t0) {
		t.Fatalf("first change %+v, want position 1 at %v", c, t0)
	}
	pos := page.Next
	leases := f.claim(2, time.Hour)
	f.ack(leases[0], execstore.Suspended()) // 3
	f.reopen()
	if err := f.s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	f.clock.Advance(time.Second)
	f.ack(leases[1], execstore.Failed(errors.New("no"))) // 4
	page, err = f.s.Changes(ctx, pos, 10)
	if got := changeList(page); err != nil || !slices.Equal(got, []string{"a:suspended", "b:failed"}) ||
		page.Changes[0].Position != 3 || page.Changes[1].Position != 4 || !page.Changes[1].At.Equal(t0.Add(time.Second)) {
		t.Fatalf("after %d: %+v, %v", pos, page.Changes, err)
	}
	// Compaction: from the start, each execution once, at its latest change.
	page, _ = f.s.Changes(ctx, 0, 10)
	if got := changeList(page); !slices.Equal(got, []string{"a:suspended", "b:failed"}) {
		t.Fatalf("from the start: %v, want each execution's latest change", got)
	}
	if page, _ := f.s.Changes(ctx, 3, 1); len(page.Changes) != 1 || page.Changes[0].Position != 4 || page.Next != 4 {
		t.Fatalf("a page of one after 3: %+v", page)
	}
}

// "Changes waits for the next change (context-bounded, a notification from
// the writer after apply)", and answers at once when it has changes, even
// with a context that is done.
func TestChangesWaitsForTheNextChangeUntilItsContextEnds(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w"})
	done, cancel := context.WithCancel(ctx)
	cancel()
	if page, err := f.s.Changes(done, 0, 10); err != nil || len(page.Changes) != 1 {
		t.Fatalf("with changes and a done context: %+v, %v", page, err)
	}
	if page, err := f.s.Changes(done, 1, 10); !errors.Is(err, context.Canceled) || len(page.Changes) != 0 || page.Next != 1 {
		t.Fatalf("without changes and a done context: %+v, %v", page, err)
	}
	wctx := &waitingCtx{Context: ctx, waiting: make(chan struct{})}
	got := make(chan execstore.ChangesPage, 1)
	go func() {
		page, err := f.s.Changes(wctx, 1, 10)
		if err != nil {
			t.Error(err)
		}
		got <- page
	}()
	select {
	case <-wctx.waiting:
	case <-time.After(patience):
		t.Fatal("Changes never waited")
	}
	f.admit(execstore.AdmitRequest{ExecutionID: "b", WorkflowID: "w"})
	select {
	case page := <-got:
		if names := changeList(page); !slices.Equal(names, []string{"b:admitted"}) {
			t.Fatalf("woken with %v", names)
		}
	case <-time.After(patience):
		t.Fatal("Changes was not woken by the change")
	}
}

// A cursor is read strictly: whatever the string, List answers a page or
// ErrInvalidArgument, and never a page of another query's position.
func FuzzListCursor(f *testing.F) {
	store, err := execstore.Open(f.TempDir(), execstore.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	defer store.Close()
	for _, wf := range []string{"w1", "w1", "w2", "w1"} {
		if _, err := store.Admit(ctx, execstore.AdmitRequest{WorkflowID: wf}); err != nil {
			f.Fatal(err)
		}
	}
	page, _ := store.List(ctx, execstore.ListQuery{Limit: 1})
	f.Add(page.Cursor, "")
	f.Add(page.Cursor, "w1")
	f.Add("", "")
	f.Add("AQ", "")
	f.Fuzz(func(t *testing.T, cursor, workflow string) {
		q := execstore.ListQuery{Cursor: cursor, WorkflowID: workflow, Limit: 2}
		p, err := store.List(ctx, q)
		if err != nil && !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Fatalf("cursor %q: %v", cursor, err)
		}
		if err == nil && len(p.Records) > 2 {
			t.Fatalf("cursor %q: a page of %d", cursor, len(p.Records))
		}
	})
}

// "A consumer never sees a change that is not durable": while the batch of
// an admission waits for its fsync, neither the feed nor a listing shows
// it; once the fsync returned and the batch is applied, both do.
func TestAChangeIsNotVisibleBeforeItsBatchIsSynced(t *testing.T) {
	f := newFixture(t)
	f.s.Close()
	syncing, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	f.opts.NoSync = false
	f.opts.FS = onLog(vfs.OpSyncData, func() error {
		if armed.CompareAndSwap(true, false) {
			close(syncing)
			<-release
		}
		return nil
	})
	f.open()
	armed.Store(true)
	admitted := make(chan error, 1)
	go func() {
		_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "a", WorkflowID: "w"})
		admitted <- err
	}()
	select {
	case <-syncing:
	case <-time.After(patience):
		t.Fatal("the admission never reached its fsync")
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	page, _ := f.s.Changes(done, 0, 10)
	listed, err := f.s.List(ctx, execstore.ListQuery{})
	if len(page.Changes) != 0 || page.Last != 0 || err != nil || len(listed.Records) != 0 {
		t.Fatalf("before the fsync: changes %+v, listed %d records (%v)", page, len(listed.Records), err)
	}
	close(release)
	if err := <-admitted; err != nil {
		t.Fatal(err)
	}
	page, _ = f.s.Changes(done, 0, 10)
	if got := changeList(page); !slices.Equal(got, []string{"a:admitted"}) {
		t.Fatalf("after the fsync: %v", got)
	}
}
