package fsm

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// forgettingArchive is a memArchive that takes a record again under an ID
// whose earlier record the state forgot (the ID was admitted again).
type forgettingArchive struct {
	memArchive
	s *State
}

func (m *forgettingArchive) put(t *testing.T, res Result) {
	t.Helper()
	for _, r := range res.Retired {
		if old, dup := m.recs[r.ID]; dup && !m.s.forgotten(&old) {
			t.Fatalf("archived %q twice, and the first is not forgotten", r.ID)
		}
		m.recs[r.ID] = r.Retired
	}
}

// forgetAt is the forget command the store makes at cutoff: the archive's
// records updated from the state's cutoff to the new one, counted by
// workflow and status.
func (m *forgettingArchive) forgetAt(cutoff int64) Command {
	counts := map[ForgetCount]int{}
	for _, r := range m.recs {
		if r.UpdatedAt >= m.s.meta.ForgotBefore && r.UpdatedAt < cutoff {
			counts[ForgetCount{WorkflowID: r.WorkflowID, Status: r.Outcome.Status}]++
		}
	}
	c := Command{Kind: KindForget, At: cutoff}
	for k, n := range counts {
		k.N = n
		c.Forgotten = append(c.Forgotten, k)
	}
	slices.SortFunc(c.Forgotten, func(a, b ForgetCount) int {
		if forgetCountLess(a, b) {
			return -1
		}
		return 1
	})
	return c
}

// countsOf is what a state's counts must be: its records' and the archived
// records' it has not forgotten, by status and by workflow.
func countsOf(s *State, arch *forgettingArchive) (byStatus map[Status]int, byWorkflow map[string]int, archived int) {
	byStatus, byWorkflow = map[Status]int{}, map[string]int{}
	s.execs.Scan(func(it execItem) bool {
		e := s.rec(it)
		byStatus[e.Status()]++
		byWorkflow[e.WorkflowID()]++
		return true
	})
	for _, r := range arch.recs {
		if !s.forgotten(&r) {
			byStatus[r.Outcome.Status]++
			byWorkflow[r.WorkflowID]++
			archived++
		}
	}
	return byStatus, byWorkflow, archived
}

// Forget commands made as the store makes them, between random commands:
// each forgets exactly the archived executions updated before its cutoff;
// the counts then hold the records and the archived executions not
// forgotten, and nothing else; a forgotten ID is admitted again as a new
// execution; the cutoff survives an encoding.
func TestForgetCommandsForgetExactlyTheArchivedExecutionsBeforeTheirCutoff(t *testing.T) {
	forgot, readmitted := 0, 0
	for seed := uint64(1); seed <= 30; seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 14)), now: 1000}
		s := New()
		s.TrackRetirement()
		arch := &forgettingArchive{memArchive: memArchive{recs: map[string]Retired{}}, s: s}
		s.SetArchive(arch)
		for i := range 600 {
			c := g.next()
			if c.Kind == KindForget {
				continue
			}
			if c.Kind == KindAdmit && !c.Generated {
				if r, ok := arch.recs[c.ExecutionID]; ok && s.forgotten(&r) && s.lookup(c.ExecutionID) == nil {
					if res := s.Apply(&c); res.Code != CodeOK {
						t.Fatalf("seed %d op %d: admission of forgotten %q = %+v", seed, i, c.ExecutionID, res)
					}
					readmitted++
					continue
				}
			}
			res := s.Apply(&c)
			arch.put(t, res)
			g.observe(res)
			if i%25 != 24 {
				continue
			}
			cutoff := s.meta.Now - 3000
			if k, ok := s.ended.Min(); ok {
				cutoff = min(cutoff, k.At)
			}
			if cutoff <= s.meta.ForgotBefore {
				continue
			}
			f := arch.forgetAt(cutoff)
			f.Now = s.meta.Now
			want := 0
			for _, n := range f.Forgotten {
				want += n.N
			}
			if r, mutates := s.Precheck(&f); !mutates {
				t.Fatalf("seed %d op %d: precheck of %+v = %+v, changes nothing", seed, i, f, r)
			}
			if r := s.Apply(&f); r.Code != CodeOK || r.Count != want {
				t.Fatalf("seed %d op %d: forget = %+v, want %d forgotten", seed, i, r, want)
			}
			forgot += want
			byStatus, byWorkflow, archived := countsOf(s, arch)
			if s.meta.Archived != archived {
				t.Fatalf("seed %d op %d: %d archived, the archive holds %d not forgotten", seed, i, s.meta.Archived, archived)
			}
			for _, st := range AllStatuses {
				if s.CountByStatus(st) != byStatus[st] {
					t.Fatalf("seed %d op %d: %v counts %d, want %d", seed, i, st, s.CountByStatus(st), byStatus[st])
				}
			}
			got := map[string]int{}
			s.Workflows(func(w string, n int) bool { got[w] = n; return true })
			if diff := cmp.Diff(byWorkflow, got); diff != "" {
				t.Fatalf("seed %d op %d: counts by workflow (-want +got):\n%s", seed, i, diff)
			}
			if err := s.CheckInvariants(); err != nil {
				t.Fatalf("seed %d op %d: %v", seed, i, err)
			}
		}
		b := encodeState(t, s)
		decoded, err := DecodeState(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		decoded.SetArchive(arch)
		if decoded.Meta() != s.Meta() {
			t.Fatalf("seed %d: decoded meta %+v, want %+v", seed, decoded.Meta(), s.Meta())
		}
		if sum, err := CheckState(bufio.NewReader(bytes.NewReader(b))); err != nil || sum.Meta.ForgotBefore != s.meta.ForgotBefore {
			t.Fatalf("seed %d: CheckState = %+v, %v", seed, sum.Meta, err)
		}
		if err := decoded.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: decoded: %v", seed, err)
		}
	}
	if forgot == 0 || readmitted == 0 {
		t.Fatalf("forgot %d executions, admitted %d forgotten IDs again: the test checks nothing", forgot, readmitted)
	}
}

// A forget command that disagrees with the state changes nothing: a cutoff
// not after the state's, a terminal execution before the cutoff still in
// the state (it would be forgotten without being counted), counts the
// archive's share cannot hold.
func TestForgetCommandsThatDisagreeWithTheStateChangeNothing(t *testing.T) {
	build := func() (*State, *forgettingArchive) {
		s := New()
		s.meta.Now = 1e9
		s.TrackRetirement()
		arch := &forgettingArchive{memArchive: memArchive{recs: map[string]Retired{}}, s: s}
		s.SetArchive(arch)
		for _, id := range []string{"a", "b", "c"} {
			applyAt(s, Command{Kind: KindAdmit, ExecutionID: id, WorkflowID: "w"})
			l := applyAt(s, Command{Kind: KindClaim, Limit: 1, Duration: 60e9}).Leases[0]
			applyAt(s, Command{Kind: KindAcknowledge, ExecutionID: id, Token: l.Token, Outcome: Outcome{Status: StatusCompleted}})
		}
		arch.put(t, applyAt(s, Command{Kind: KindRetire, At: s.meta.Now - 1, Limit: 2})) // a and b
		return s, arch
	}
	s, _ := build()
	cStatus, _ := s.Get("c")
	for name, c := range map[string]Command{
		"c still in the state": {Kind: KindForget, At: cStatus.UpdatedAt + 1, Forgotten: []ForgetCount{{WorkflowID: "w", Status: StatusCompleted, N: 2}}},
		"more than archived":   {Kind: KindForget, At: cStatus.UpdatedAt, Forgotten: []ForgetCount{{WorkflowID: "w", Status: StatusCompleted, N: 3}}},
		"another status":       {Kind: KindForget, At: cStatus.UpdatedAt, Forgotten: []ForgetCount{{WorkflowID: "w", Status: StatusFailed, N: 2}}},
		"another workflow":     {Kind: KindForget, At: cStatus.UpdatedAt, Forgotten: []ForgetCount{{WorkflowID: "v", Status: StatusCompleted, N: 2}}},
	} {
		s, _ := build()
		before := encodeState(t, s)
		if r, mutates := s.Precheck(&c); mutates || r.Code != CodeMismatch {
			t.Errorf("%s: precheck = %+v, mutates %v", name, r, mutates)
		}
		if r := applyAt(s, c); r.Code != CodeMismatch {
			t.Errorf("%s: apply = %+v, want CodeMismatch", name, r)
		}
		s.meta.Now -= 1e9 // applyAt's time, which a refused command keeps
		if !bytes.Equal(before, encodeState(t, s)) {
			t.Errorf("%s: a refused forget changed the state", name)
		}
	}

	s, arch := build()
	ok := Command{Kind: KindForget, At: cStatus.UpdatedAt, Forgotten: []ForgetCount{{WorkflowID: "w", Status: StatusCompleted, N: 2}}}
	if r := applyAt(s, ok); r.Code != CodeOK || r.Count != 2 {
		t.Fatalf("forget = %+v", r)
	}
	if r := applyAt(s, ok); r.Code != CodeMismatch {
		t.Fatalf("the same forget again = %+v, want CodeMismatch (its cutoff is not later)", r)
	}
	if m := s.Meta(); m.Archived != 0 || m.Terminal != 1 || m.ForgotBefore != cStatus.UpdatedAt || s.CountByStatus(StatusCompleted) != 1 {
		t.Fatalf("after forgetting a and b: %+v, %d completed", m, s.CountByStatus(StatusCompleted))
	}
	if r := applyAt(s, Command{Kind: KindAdmit, ExecutionID: "a", WorkflowID: "w2"}); r.Code != CodeOK {
		t.Fatalf("admission of forgotten a = %+v", r)
	}
	if r := applyAt(s, Command{Kind: KindAdmit, ExecutionID: "c", WorkflowID: "w"}); r.Code != CodeConflict {
		t.Fatalf("admission of c, not forgotten = %+v", r)
	}
	if len(arch.recs) != 2 {
		t.Fatal("the archive lost records: forgetting deletes nothing from it")
	}
}
