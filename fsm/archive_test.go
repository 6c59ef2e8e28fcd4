package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// memArchive is an Archive in a map, filled as the store fills its archive:
// each retire command's records before the next command is applied.
type memArchive struct {
	recs map[string]Retired
	err  error
}

func (m *memArchive) Retired(id string) (*Retired, bool) {
	if m.err != nil {
		return nil, true
	}
	r, ok := m.recs[id]
	if !ok {
		return nil, false
	}
	return &r, true
}

func (m *memArchive) put(res Result) {
	for _, r := range res.Retired {
		if _, dup := m.recs[r.ID]; dup {
			panic("archived twice: " + r.ID)
		}
		m.recs[r.ID] = r.Retired
	}
}

// A state that retires into an archive decides every command exactly as a
// state that keeps its retired records: the same results, for admissions of
// retired IDs, generated IDs, child starts, schedules' occurrences, wakes,
// fenced writes and cancels of retired executions alike; and the same
// counts. Only where the retired records are differs.
func TestAnArchivingStateDecidesAsOneThatKeepsItsRetiredRecords(t *testing.T) {
	ignore := cmpopts.IgnoreFields(Result{}, "Retired")
	archivedAny := 0
	onArchived := map[Kind]int{} // commands naming an archived execution, by kind
	for seed := uint64(1); seed <= seeds(40); seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 9)), now: 1000}
		kept, archiving := New(), New()
		kept.TrackRetirement()
		archiving.TrackRetirement()
		arch := &memArchive{recs: map[string]Retired{}}
		archiving.SetArchive(arch)
		for i := 0; i < 500; i++ {
			c := g.next()
			if c.Kind == KindForget {
				continue // forgetting is what the two do differently (forget_test.go)
			}
			pr, pm := kept.Precheck(&c)
			ar, am := archiving.Precheck(&c)
			if pm != am || (!pm && !cmp.Equal(pr, ar, cmpOpts, ignore)) {
				t.Fatalf("seed %d op %d (%v): prechecks differ: %v %+v, %v %+v", seed, i, c.Kind, pm, pr, am, ar)
			}
			if _, ok := arch.recs[c.ExecutionID]; ok {
				onArchived[c.Kind]++
			}
			r1, r2 := kept.Apply(&c), archiving.Apply(&c)
			arch.put(r2)
			g.observe(r1)
			if diff := cmp.Diff(r1, r2, cmpOpts, ignore); diff != "" {
				t.Fatalf("seed %d op %d (%v): results differ (-kept +archiving):\n%s", seed, i, c.Kind, diff)
			}
			if c.Kind == KindRetire && len(r2.Retired) != r2.Count {
				t.Fatalf("seed %d op %d: retired %d but handed out %d records", seed, i, r2.Count, len(r2.Retired))
			}
			if err := archiving.CheckInvariants(); err != nil {
				t.Fatalf("seed %d op %d: %v", seed, i, err)
			}
		}
		km, am := kept.Meta(), archiving.Meta()
		if am.Retired != 0 || km.Retired != am.Archived || km.Terminal != am.Terminal || kept.Len() != archiving.Len() {
			t.Fatalf("seed %d: counts differ: kept %+v (len %d), archiving %+v (len %d)", seed, km, kept.Len(), am, archiving.Len())
		}
		if archiving.retired.Len() != 0 || len(arch.recs) != am.Archived {
			t.Fatalf("seed %d: the archiving state keeps %d retired records, the archive holds %d of %d",
				seed, archiving.retired.Len(), len(arch.recs), am.Archived)
		}
		for id, r := range arch.recs {
			want, _ := kept.Get(id)
			if diff := cmp.Diff(want, r.Execution(id), cmpOpts); diff != "" {
				t.Fatalf("seed %d: archived %q (-kept +archived):\n%s", seed, id, diff)
			}
		}
		archivedAny += am.Archived

		// The archived executions' counts survive an encoding: the
		// decoded state counts as the one that keeps them in memory.
		b := encodeState(t, archiving)
		sum, err := CheckState(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			t.Fatalf("seed %d: CheckState: %v", seed, err)
		}
		decoded, err := DecodeState(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			t.Fatalf("seed %d: DecodeState: %v", seed, err)
		}
		decoded.SetArchive(arch)
		if diff := cmp.Diff(decoded.Summary(), sum); diff != "" {
			t.Fatalf("seed %d: CheckState's summary (-decoded +checked):\n%s", seed, diff)
		}
		for _, st := range AllStatuses {
			if kept.CountByStatus(st) != decoded.CountByStatus(st) {
				t.Fatalf("seed %d: decoded, %v counts %d, kept %d", seed, st, decoded.CountByStatus(st), kept.CountByStatus(st))
			}
		}
		byWorkflow := func(s *State) map[string]int {
			m := map[string]int{}
			s.Workflows(func(w string, n int) bool { m[w] = n; return true })
			return m
		}
		if diff := cmp.Diff(byWorkflow(kept), byWorkflow(decoded)); diff != "" {
			t.Fatalf("seed %d: decoded counts by workflow (-kept +decoded):\n%s", seed, diff)
		}
		if err := decoded.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: decoded: %v", seed, err)
		}
	}
	if archivedAny == 0 {
		t.Fatal("no seed archived anything: the test checks nothing")
	}
	for _, k := range []Kind{KindAdmit, KindWake, KindAcknowledge, KindCancel} {
		if onArchived[k] == 0 {
			t.Errorf("no %v command named an archived execution: %v", k, onArchived)
		}
	}
}

// An archive that cannot be read makes the ID count as taken: nothing is
// admitted under it (the store stops before it answers).
func TestAnArchiveThatFailsToReadLetsNothingBeAdmittedUnderTheID(t *testing.T) {
	s := New()
	arch := &memArchive{recs: map[string]Retired{}, err: errors.New("disk on fire")}
	s.SetArchive(arch)
	c := Command{Kind: KindAdmit, ExecutionID: "x", WorkflowID: "w", Now: 1e9}
	if r, mutates := s.Precheck(&c); mutates || r.Code != CodeConflict {
		t.Fatalf("precheck of an admission with a failing archive = %+v, mutates %v", r, mutates)
	}
	if r := s.Apply(&c); r.Code != CodeConflict {
		t.Fatalf("admission with a failing archive = %+v", r)
	}
	if s.Len() != 0 {
		t.Fatal("an execution was admitted")
	}
}

// Records an older state kept in memory move out whole, and count as
// archived.
func TestMoveRetiredHandsOutEveryRetiredRecordOnce(t *testing.T) {
	kept := New()
	kept.TrackRetirement()
	g := &gen{rng: rand.New(rand.NewPCG(3, 9)), now: 1000}
	for range 800 {
		c := g.next()
		g.observe(kept.Apply(&c))
	}
	before := kept.Meta()
	if before.Retired == 0 {
		t.Fatal("the workload retired nothing")
	}
	want := map[string]Execution{}
	kept.retired.Scan(func(it retiredItem) bool { want[it.ID], _ = kept.Get(it.ID); return true })
	moved := kept.MoveRetired()
	arch := &memArchive{recs: map[string]Retired{}}
	for _, r := range moved {
		arch.recs[r.ID] = r.Retired
	}
	kept.SetArchive(arch)
	after := kept.Meta()
	if len(moved) != before.Retired || after.Retired != 0 || after.Archived != before.Retired || after.Terminal != before.Terminal {
		t.Fatalf("moved %d of %d; meta before %+v, after %+v", len(moved), before.Retired, before, after)
	}
	for id, w := range want {
		r := arch.recs[id]
		if diff := cmp.Diff(w, r.Execution(id), cmpOpts); diff != "" {
			t.Fatalf("moved %q (-was +moved):\n%s", id, diff)
		}
	}
	if err := kept.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if kept.MoveRetired() != nil {
		t.Fatal("a second move handed out records again")
	}
}
