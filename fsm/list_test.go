package fsm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// listState applies n random commands, with admissions spread over three
// workflows and time moving so that admission times differ and tie.
func listState(seed uint64, n int) *State {
	g := &gen{rng: rand.New(rand.NewPCG(seed, 9)), now: 1000}
	s := New()
	for range n {
		c := g.next()
		if c.Kind == KindAdmit {
			c.WorkflowID = fmt.Sprintf("w%d", g.rng.IntN(3))
		}
		g.observe(s.Apply(&c))
	}
	return s
}

// listWant is List by brute force over every record that is not retired.
func listWant(s *State, q ListQuery) []string {
	var recs []Execution
	for _, e := range records(s) {
		switch {
		case q.Status != 0 && e.Status != q.Status,
			q.Workflow != "" && e.WorkflowID != q.Workflow,
			q.Parent != "" && (e.Parent == nil || e.Parent.ExecutionID != q.Parent),
			e.AdmittedAt < q.From, q.To != 0 && e.AdmittedAt >= q.To:
			continue
		}
		recs = append(recs, e)
	}
	slices.SortFunc(recs, func(a, b Execution) int {
		c := 0
		switch {
		case a.AdmittedAt < b.AdmittedAt, a.AdmittedAt == b.AdmittedAt && a.AdmitSeq < b.AdmitSeq:
			c = -1
		case a.AdmittedAt > b.AdmittedAt, a.AdmitSeq > b.AdmitSeq:
			c = 1
		}
		if q.Newest {
			c = -c
		}
		return c
	})
	var ids []string
	for _, e := range recs {
		ids = append(ids, e.ID)
	}
	return ids
}

// listAll pages through a listing, page by page, as a client with a cursor
// does.
func listAll(t *testing.T, s *State, q ListQuery) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("%+v: the listing does not end", q)
		}
		var got []string
		next, more := s.List(&q, func(e *Execution) { got = append(got, e.ID) })
		if len(got) > q.Limit {
			t.Fatalf("%+v: a page of %d records, over the limit", q, len(got))
		}
		ids = append(ids, got...)
		if !more {
			return ids
		}
		q.After = next
	}
}

// Every filter combination, in both orders, paged with every small limit,
// lists exactly the records a scan of all of them selects, in order: the
// indexes agree with the records, and cursors neither skip nor repeat.
func TestListAnswersEveryFilterAsAScanOfTheRecordsWould(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		s := listState(seed, 500)
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		var parents []string
		for _, e := range records(s) {
			if e.Parent != nil && !slices.Contains(parents, e.Parent.ExecutionID) {
				parents = append(parents, e.Parent.ExecutionID)
			}
		}
		now := s.meta.Now
		times := [][2]int64{{0, 0}, {now / 3, 0}, {0, now / 2}, {now / 4, now * 3 / 4}}
		for _, st := range append([]Status{0}, AllStatuses...) {
			for _, wf := range []string{"", "w1", "child", "none"} {
				for _, parent := range append([]string{"", "nobody"}, parents...) {
					for _, tr := range times {
						for _, newest := range []bool{false, true} {
							q := ListQuery{Status: st, Workflow: wf, Parent: parent, From: tr[0], To: tr[1], Newest: newest}
							want := listWant(s, q)
							for _, limit := range []int{1, 2, 5, 1000} {
								q.Limit, q.ScanMax = limit, limit+1
								if got := listAll(t, s, q); !slices.Equal(got, want) {
									t.Fatalf("seed %d %+v:\n%s", seed, q, cmp.Diff(want, got))
								}
							}
						}
					}
				}
			}
		}
	}
}

// The change log keeps one change per record, the latest, numbered in the
// order the changes happened: a command's changes come after every earlier
// command's, and a record whose status did not change keeps its position.
func TestChangesKeepTheLatestChangeOfEachRecordInOrder(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 4)), now: 1000}
		s := New()
		s.TrackRetirement()
		for i := range 400 {
			before := map[string]Change{}
			s.Changes(0, s.Len()+1, func(c Change) { before[c.ID] = c })
			seqBefore := s.meta.ChangeSeq
			c := g.next()
			g.observe(s.Apply(&c))
			var got []Change
			s.Changes(0, s.Len()+1, func(c Change) { got = append(got, c) })
			if len(got) != s.execs.Len() {
				t.Fatalf("seed %d op %d: %d changes for %d records", seed, i, len(got), s.execs.Len())
			}
			for j, ch := range got {
				e, _ := s.Get(ch.ID)
				prev, had := before[ch.ID]
				switch {
				case j > 0 && ch.Seq <= got[j-1].Seq:
					t.Fatalf("seed %d op %d: changes out of order: %v", seed, i, got)
				case ch.Status != e.Status:
					t.Fatalf("seed %d op %d: change %+v, the record is %v", seed, i, ch, e.Status)
				case had && prev.Status == e.Status && prev != ch:
					t.Fatalf("seed %d op %d (%v): %s did not change status but its change moved: %+v to %+v", seed, i, c.Kind, ch.ID, prev, ch)
				case (!had || prev.Status != e.Status) && (ch.Seq <= seqBefore || ch.At != s.meta.Now):
					t.Fatalf("seed %d op %d (%v): %s changed but its change is %+v (sequence was %d)", seed, i, c.Kind, ch.ID, ch, seqBefore)
				}
			}
			var page []Change
			s.Changes(seqBefore, 3, func(c Change) { page = append(page, c) })
			for _, ch := range page {
				if ch.Seq <= seqBefore {
					t.Fatalf("seed %d op %d: Changes after %d returned %+v", seed, i, seqBefore, ch)
				}
			}
		}
	}
}

// Retirement takes a record out of the listing and the change log; its
// counts stay.
func TestRetirementTakesARecordOutOfTheListingAndTheChangeLog(t *testing.T) {
	s := New()
	s.Apply(&Command{Kind: KindAdmit, Now: 10, ExecutionID: "a", WorkflowID: "w"})
	s.Apply(&Command{Kind: KindAdmit, Now: 10, ExecutionID: "b", WorkflowID: "w"})
	l := s.Apply(&Command{Kind: KindClaim, Now: 20, Limit: 1, Duration: 100}).Leases[0]
	s.Apply(&Command{Kind: KindAcknowledge, Now: 30, ExecutionID: l.ExecutionID, Token: l.Token, Outcome: Outcome{Status: StatusCompleted}})
	if n := s.Apply(&Command{Kind: KindRetire, Now: 40, At: 40, Limit: 10}).Count; n != 1 {
		t.Fatalf("retired %d", n)
	}
	var listed []string
	s.List(&ListQuery{Limit: 10}, func(e *Execution) { listed = append(listed, e.ID) })
	var changed []string
	s.Changes(0, 10, func(c Change) { changed = append(changed, c.ID) })
	if !slices.Equal(listed, []string{"b"}) || !slices.Equal(changed, []string{"b"}) {
		t.Fatalf("listed %v, changes of %v; want only b", listed, changed)
	}
	if s.CountByStatus(StatusCompleted) != 1 || s.CountByStatus(StatusAdmitted) != 1 || s.meta.ChangeSeq != 3 {
		t.Fatalf("counts completed %d admitted %d, sequence %d", s.CountByStatus(StatusCompleted), s.CountByStatus(StatusAdmitted), s.meta.ChangeSeq)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
