package fsm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/execstore/execstore/fsm/internal/chunk"

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
		case a.AdmittedAt < b.AdmittedAt, a.AdmittedAt == b.AdmittedAt && a.AdmitNo < b.AdmitNo:
			c = -1
		case a.AdmittedAt > b.AdmittedAt, a.AdmitNo > b.AdmitNo:
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
			s.Changes(0, s.Len()+1, 1<<30, func(c Change) { before[c.ID] = c })
			seqBefore := s.meta.ChangeSeq
			c := g.next()
			g.observe(s.Apply(&c))
			var got []Change
			s.Changes(0, s.Len()+1, 1<<30, func(c Change) { got = append(got, c) })
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
			s.Changes(seqBefore, 3, 1<<30, func(c Change) { page = append(page, c) })
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
	s.Changes(0, 10, 1<<30, func(c Change) { changed = append(changed, c.ID) })
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

// The change log keeps dead entries (changes superseded by a later one, or
// of retired records) only until the writer sweeps them: it never holds
// more than twice as many entries as records, plus two chunks, and a copy
// taken before the sweeps still reads what it read then.
func TestTheChangeLogIsSweptToTwiceTheRecordsAndCopiesKeepTheirView(t *testing.T) {
	s := New()
	s.TrackRetirement()
	const n = 3000
	bound := func(when string) {
		t.Helper()
		if max := 2*s.execs.Len() + 2*s.list.feed.chunkCap(); s.FeedLen() > max {
			t.Fatalf("%s: the log holds %d entries for %d records (bound %d)", when, s.FeedLen(), s.execs.Len(), max)
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	read := func(st *State) []Change {
		var out []Change
		st.Changes(0, 1<<30, 1<<30, func(c Change) { out = append(out, c) })
		return out
	}
	now := int64(10)
	for i := range n {
		s.Apply(&Command{Kind: KindAdmit, Now: now, ExecutionID: fmt.Sprintf("e%05d", i), WorkflowID: "w"})
	}
	var copies []*State
	var views [][]Change
	for round, st := range []Status{StatusSuspended, StatusCompleted} {
		now += 10
		if round == 1 {
			for i := range n {
				s.Apply(&Command{Kind: KindWake, Now: now, ExecutionID: fmt.Sprintf("e%05d", i), At: now})
			}
		}
		for done := 0; done < n; {
			r := s.Apply(&Command{Kind: KindClaim, Now: now, Limit: 500, Duration: 1e9})
			if len(r.Leases) == 0 {
				t.Fatalf("round %d: nothing to claim after %d", round, done)
			}
			for _, l := range r.Leases {
				o := Outcome{Status: st}
				s.Apply(&Command{Kind: KindAcknowledge, Now: now, ExecutionID: l.ExecutionID, Token: l.Token, Outcome: o})
			}
			done += len(r.Leases)
			if done%1000 < 500 {
				copies = append(copies, s.Copy())
				views = append(views, read(copies[len(copies)-1]))
			}
			bound(fmt.Sprintf("round %d, %d acknowledged", round, done))
		}
		now += 10
	}
	if s.FeedLen() >= 3*n {
		t.Fatalf("no sweep ran: %d entries for %d changes", s.FeedLen(), 3*n)
	}
	for s.Apply(&Command{Kind: KindRetire, Now: now + 100, At: now + 100, Limit: 700}).Count > 0 {
		bound("retiring")
	}
	if s.execs.Len() != 0 || s.FeedLen() > 2*s.list.feed.chunkCap() || len(read(s)) != 0 {
		t.Fatalf("after retiring everything: %d records, %d entries, %d changes read", s.execs.Len(), s.FeedLen(), len(read(s)))
	}
	for i, c := range copies {
		if diff := cmp.Diff(views[i], read(c)); diff != "" {
			t.Fatalf("copy %d reads another log after the sweeps (-then +now):\n%s", i, diff)
		}
		if err := c.CheckInvariants(); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
}

// The change log's bound (feed.bound, which CheckInvariants holds it to)
// survives an adversary: each round admits a record, cancels the record
// whose live entry is nearest behind the sweep's position (the entry the
// sweep will reach last) and retires the record it cancelled, so the
// records stay as many and every round leaves two dead entries, one where
// the sweep has just been.
func TestAnAdversaryKeepsTheChangeLogWithinItsBound(t *testing.T) {
	for _, sz := range []Sizes{{FeedChunk: 4, FeedSweep: 1}, {FeedChunk: 4, FeedSweep: 2}, {FeedChunk: 8, FeedSweep: 2}, {FeedChunk: 256, FeedSweep: 2}} {
		for _, records := range []int{10, 100, 1000} {
			s := New()
			s.SetSizes(sz)
			s.TrackRetirement()
			now := int64(10)
			admit := func(i int) {
				if r := s.Apply(&Command{Kind: KindAdmit, Now: now, ExecutionID: fmt.Sprintf("e%07d", i), WorkflowID: "w"}); r.Code != CodeOK {
					t.Fatalf("%+v, %d records: admit: %v", sz, records, r.Code)
				}
			}
			for i := range records {
				admit(i)
			}
			f := &s.list.feed
			behind := func() uint64 {
				var no uint64
				from := chunk.FeedKey(f.sweep)
				if f.sweep == 0 {
					tail, _ := f.chunks.Max()
					from = chunk.FeedKey(tail.Lo()) // the pass starts over: the end of the log is behind it
				}
				f.chunks.Descend(from, func(c *chunk.Feed) bool {
					if c.Lo() >= from.Lo() {
						return true
					}
					for i := c.Len() - 1; i >= 0 && no == 0; i-- {
						if x := c.Entry(i); x.Live(&s.list.adm.t) {
							no = x.No
						}
					}
					return no == 0
				})
				return no
			}
			worst, picked := 0.0, 0
			for round := range 20 * records {
				now++
				admit(records + round)
				no := behind()
				if no != 0 {
					picked++
				} else {
					f.chunks.Scan(func(c *chunk.Feed) bool { // the oldest live entry
						for i := 0; i < c.Len() && no == 0; i++ {
							if x := c.Entry(i); x.Live(&s.list.adm.t) {
								no = x.No
							}
						}
						return no == 0
					})
				}
				id := s.list.adm.get(no).ID()
				if r := s.Apply(&Command{Kind: KindCancel, Now: now, ExecutionID: id}); r.Code != CodeOK {
					t.Fatalf("%+v, %d records: cancel %s: %v", sz, records, id, r.Code)
				}
				if r := s.Apply(&Command{Kind: KindRetire, Now: now, At: now + 1, Limit: 1}); r.Count != 1 {
					t.Fatalf("%+v, %d records: retired %d, want 1", sz, records, r.Count)
				}
				if s.execs.Len() != records {
					t.Fatalf("%+v: %d records, want %d", sz, s.execs.Len(), records)
				}
				if b := f.bound(records); f.n > b {
					t.Fatalf("%+v, %d records, round %d: %d entries, over the bound of %d", sz, records, round, f.n, b)
				}
				worst = max(worst, float64(f.n)/float64(f.bound(records)))
			}
			if err := s.CheckInvariants(); err != nil {
				t.Fatalf("%+v, %d records: %v", sz, records, err)
			}
			// (With a few chunks' worth of records, most live entries are
			// in the last chunk, which the sweep does not visit.)
			if records >= 4*sz.FeedChunk && picked < 10*records {
				t.Fatalf("%+v, %d records: the adversary found an entry behind the sweep in %d rounds of %d", sz, records, picked, 20*records)
			}
			t.Logf("%+v, %d records: at most %.0f%% of the bound (%d rounds of %d ended an entry behind the sweep)", sz, records, 100*worst, picked, 20*records)
		}
	}
}
