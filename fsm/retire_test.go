package fsm

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Whether a state keeps the index of terminal records awaiting retirement
// changes no result: a state that does not keep it builds it at the first
// retire command, and from then on the two states are equal.
func TestRetirementIndexChangesNoResult(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		g := &gen{rng: rand.New(rand.NewPCG(seed, 5)), now: 1000}
		tracked, lazy := New(), New()
		tracked.TrackRetirement()
		for i := 0; i < 400; i++ {
			c := g.next()
			r1, r2 := tracked.Apply(&c), lazy.Apply(&c)
			g.observe(r1)
			if diff := cmp.Diff(r1, r2, cmpOpts); diff != "" {
				t.Fatalf("seed %d op %d (%v): results differ (-tracked +lazy):\n%s", seed, i, c.Kind, diff)
			}
			if err := lazy.CheckInvariants(); err != nil {
				t.Fatalf("seed %d op %d: %v", seed, i, err)
			}
		}
		if !lazy.RetirementTracked() {
			if lazy.ended.Len() != 0 {
				t.Fatalf("seed %d: an untracked state holds %d index entries", seed, lazy.ended.Len())
			}
			lazy.TrackRetirement()
		}
		if diff := cmp.Diff(dumpOf(tracked), dumpOf(lazy), cmpOpts); diff != "" {
			t.Fatalf("seed %d: states differ (-tracked +lazy):\n%s", seed, diff)
		}
	}
}

// applyAt applies c at the state's time plus one second.
func applyAt(s *State, c Command) Result {
	c.Now = s.meta.Now + 1e9
	return s.Apply(&c)
}

// A retired record keeps every field but the params, context and steps: its
// parent link included. Retiring a parent drops its child-start requests (it
// can never start a child again), and its live child stays valid.
func TestRetiredRecordsKeepTheirParentAndDropTheirStarts(t *testing.T) {
	s := New()
	s.meta.Now = 1e9
	applyAt(s, Command{Kind: KindAdmit, ExecutionID: "parent", WorkflowID: "p"})
	l := applyAt(s, Command{Kind: KindClaim, Limit: 1, Duration: 60e9}).Leases[0]
	applyAt(s, Command{Kind: KindStart, ExecutionID: "parent", Token: l.Token, Key: "a", WorkflowID: "c", ChildID: "done-child"})
	applyAt(s, Command{Kind: KindStart, ExecutionID: "parent", Token: l.Token, Key: "b", WorkflowID: "c", ChildID: "live-child"})
	applyAt(s, Command{Kind: KindAcknowledge, ExecutionID: "parent", Token: l.Token, Outcome: Outcome{Status: StatusCompleted}})
	var childLease Lease
	for _, cl := range applyAt(s, Command{Kind: KindClaim, Limit: 3, Duration: 60e9}).Leases {
		if cl.ExecutionID == "done-child" {
			childLease = cl
		}
	}
	fail := Outcome{Status: StatusFailed, Error: &ErrorInfo{Name: "E", Message: "no", Code: "NO"}}
	applyAt(s, Command{Kind: KindAcknowledge, ExecutionID: "done-child", Token: childLease.Token, Outcome: fail})
	before, _ := s.Get("done-child")
	if r := applyAt(s, Command{Kind: KindRetire, At: s.meta.Now + 1, Limit: 10}); r.Count != 2 {
		t.Fatalf("retired %d, want the parent and the finished child", r.Count)
	}
	after, ok := s.Get("done-child")
	before.StepCount, before.Tries = 0, 0 // a retired record keeps neither: a terminal one has no use for them
	if !ok || !reflect.DeepEqual(before, after) {
		t.Fatalf("retired child:\n%s", cmp.Diff(before, after, cmpOpts))
	}
	if after.Parent == nil || *after.Parent != (Parent{ExecutionID: "parent", StepKey: "a"}) {
		t.Fatalf("retired child's parent = %+v", after.Parent)
	}
	if s.hasStarts("parent") {
		t.Fatal("the retired parent's child-start requests are kept")
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// And through a snapshot.
	var b bytes.Buffer
	if err := s.Encode(&b); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeState(bufio.NewReader(&b))
	if err != nil {
		t.Fatal(err)
	}
	got.TrackRetirement()
	s.TrackRetirement()
	if diff := cmp.Diff(dumpOf(s), dumpOf(got), cmpOpts); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
}

// A state written in version 1 of the encoding (testdata/state-v1.bin: three
// retired records, a parent, its failed child and a plain one, and a live
// record) still decodes: the retired outcomes are read as they were written,
// and the child-start requests of the retired parent are dropped, as
// retirement now does.
func TestAVersion1StateStillDecodes(t *testing.T) {
	b, err := os.ReadFile("testdata/state-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeState(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 4 || s.meta.Retired != 3 || s.meta.Terminal != 3 {
		t.Fatalf("%d records, %d retired, %d terminal; want 4, 3, 3", s.Len(), s.meta.Retired, s.meta.Terminal)
	}
	want := map[string]Outcome{
		"parent": {Status: StatusCompleted, Result: `"ok"`, HasRes: true},
		"child":  {Status: StatusFailed, Error: &ErrorInfo{Name: "E", Message: "m", Code: "C", Cause: &ErrorInfo{Name: "F", Message: "n"}}},
		"plain":  {Status: StatusCompleted},
	}
	for id, o := range want {
		e, ok := s.Get(id)
		if !ok || e.Status != o.Status || e.LastToken != 1 || !reflect.DeepEqual(*e.Outcome, o) {
			t.Fatalf("%s = %+v (outcome %+v), want %+v", id, e, e.Outcome, o)
		}
	}
	if s.hasStarts("parent") {
		t.Fatal("the retired parent's child-start requests are kept")
	}
}
