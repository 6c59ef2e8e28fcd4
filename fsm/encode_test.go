package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// randomState applies n random commands with the given seed.
func randomState(seed uint64, n int) *State {
	g := &gen{rng: rand.New(rand.NewPCG(seed, 3)), now: 1000}
	s := New()
	for i := 0; i < n; i++ {
		c := g.next()
		g.observe(s.Apply(&c))
	}
	return s
}

func encodeState(t testing.TB, s *State) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// throughSnapshot returns s encoded and decoded again, as a snapshot would
// give it back.
func throughSnapshot(t testing.TB, s *State) *State {
	t.Helper()
	d, err := DecodeState(bufio.NewReader(bytes.NewReader(encodeState(t, s))))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// checkedApply returns a function that applies a command to s at *now and
// checks the invariants after it.
func checkedApply(t *testing.T, s *State, now *int64) func(Command) Result {
	return func(c Command) Result {
		t.Helper()
		c.Now = *now
		r := s.Apply(&c)
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		return r
	}
}

func TestEncodedStateDecodesToAnEqualState(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		s := randomState(seed, 500)
		got, err := DecodeState(bufio.NewReader(bytes.NewReader(encodeState(t, s))))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := got.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if s.trackEnded {
			got.TrackRetirement() // as a store with retention on does
		}
		if want, have := dumpOf(s), dumpOf(got); !reflect.DeepEqual(want, have) {
			t.Fatalf("seed %d: decoded state differs:\n%s", seed, cmp.Diff(want, have, cmpOpts))
		}
		if err := got.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		// And it behaves the same from here on.
		g := &gen{rng: rand.New(rand.NewPCG(seed, 4)), now: s.meta.Now}
		for i := 0; i < 200; i++ {
			c := g.next()
			r1, r2 := s.Apply(&c), got.Apply(&c)
			g.observe(r1)
			if !reflect.DeepEqual(r1, r2) {
				t.Fatalf("seed %d op %d: results differ after decoding:\n%s", seed, i, cmp.Diff(r1, r2, cmpOpts))
			}
		}
	}
}

func TestDecodeStateRefusesEveryTruncation(t *testing.T) {
	b := encodeState(t, randomState(7, 200))
	for n := 0; n < len(b); n += 1 + n/50 {
		if _, err := DecodeState(bufio.NewReader(bytes.NewReader(b[:n]))); !errors.Is(err, ErrDecode) {
			t.Fatalf("prefix %d/%d: err = %v, want ErrDecode", n, len(b), err)
		}
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add(encodeState(f, New()))
	f.Add(encodeState(f, randomState(1, 50)))
	f.Add(encodeState(f, randomState(2, 150)))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeState(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error does not wrap ErrDecode: %v", err)
			}
			return
		}
		// A state that decodes is usable: applying commands never panics.
		g := &gen{rng: rand.New(rand.NewPCG(1, 1)), now: s.meta.Now + 1}
		for i := 0; i < 20; i++ {
			c := g.next()
			g.observe(s.Apply(&c))
		}
	})
}

// The change log is encoded without sorting when the admission numbers are
// dense enough, and the lists are exactly those sorting gives.
func TestChangeListsByNumberAreTheSortedLists(t *testing.T) {
	for seed := uint64(1); seed <= seeds(40); seed++ {
		for _, s := range []*State{randomState(seed, 600), listState(seed, 600), manyRecords(seed, 3000)} {
			wantAdms, wantChanges := s.changeRefsSorted()
			adms, changes, ok := s.changeRefsByNumber()
			if !ok {
				// Only retirement makes the numbers too sparse.
				if lo := s.list.adm.t.Base() << admShift; s.meta.Retired == 0 && s.execs.Len() > 0 {
					t.Fatalf("seed %d: not encoded by number with nothing retired (numbers %d to %d, %d records)", seed, lo, s.meta.Admitted, s.execs.Len())
				}
				continue
			}
			if diff := cmp.Diff(wantAdms, adms, cmp.AllowUnexported(changeRef{})); diff != "" {
				t.Fatalf("seed %d: admissions differ:\n%s", seed, diff)
			}
			if diff := cmp.Diff(wantChanges, changes, cmp.AllowUnexported(changeRef{})); diff != "" {
				t.Fatalf("seed %d: changes differ:\n%s", seed, diff)
			}
		}
	}
}

// manyRecords admits n executions with IDs whose order is not their
// admission order, and claims, acknowledges (some suspended, then woken) and
// retires some of them, so that both lists need reordering.
func manyRecords(seed uint64, n int) *State {
	rng := rand.New(rand.NewPCG(seed, 5))
	s := New()
	s.TrackRetirement()
	now := int64(1000)
	for i := range n {
		s.Apply(&Command{Kind: KindAdmit, Now: now, ExecutionID: fmt.Sprintf("e-%d-%d", rng.IntN(10), i), WorkflowID: "w"})
		now++
	}
	for range n / 64 {
		r := s.Apply(&Command{Kind: KindClaim, Now: now, Limit: 64, Duration: 1000})
		acks := make([]Ack, len(r.Leases))
		for i, l := range r.Leases {
			o := Outcome{Status: StatusCompleted}
			if rng.IntN(3) == 0 {
				o.Status = StatusSuspended
			}
			acks[i] = Ack{ExecutionID: l.ExecutionID, Token: l.Token, Outcome: o}
		}
		if len(acks) > 0 {
			s.Apply(&Command{Kind: KindAcknowledgeBatch, Now: now, Acks: acks})
		}
		now += int64(rng.IntN(5))
		if rng.IntN(8) == 0 {
			s.Apply(&Command{Kind: KindRetire, Now: now, At: now - int64(rng.IntN(200)), Limit: 1 + rng.IntN(50)})
		}
	}
	return s
}

// Retirement can leave the admission numbers too sparse for a table: then
// the change log is encoded by sorting, and still decodes to an equal state.
func TestSparseAdmissionNumbersAreEncodedBySorting(t *testing.T) {
	s := New()
	s.TrackRetirement()
	for i := range 3000 {
		s.Apply(&Command{Kind: KindAdmit, Now: 1000, ExecutionID: fmt.Sprintf("e-%04d", 2999-i), WorkflowID: "w"})
	}
	r := s.Apply(&Command{Kind: KindClaim, Now: 1000, Limit: 3000, Duration: 1000})
	acks := make([]Ack, 0, len(r.Leases))
	for _, l := range r.Leases {
		if l.ExecutionID != "e-2999" { // the first admitted stays, holding number 1
			acks = append(acks, Ack{ExecutionID: l.ExecutionID, Token: l.Token, Outcome: Outcome{Status: StatusCompleted}})
		}
	}
	s.Apply(&Command{Kind: KindAcknowledgeBatch, Now: 1001, Acks: acks})
	if r := s.Apply(&Command{Kind: KindRetire, Now: 1002, At: 1002, Limit: 3000}); r.Count != 2999 {
		t.Fatalf("retired %d, want 2999", r.Count)
	}
	for i := range 10 {
		s.Apply(&Command{Kind: KindAdmit, Now: 1003, ExecutionID: fmt.Sprintf("late-%d", i), WorkflowID: "w"})
	}
	if _, _, ok := s.changeRefsByNumber(); ok {
		t.Fatalf("%d records numbered up to %d were encoded by number", s.execs.Len(), s.meta.Admitted)
	}
	got, err := DecodeState(bufio.NewReader(bytes.NewReader(encodeState(t, s))))
	if err != nil {
		t.Fatal(err)
	}
	got.TrackRetirement()
	if diff := cmp.Diff(dumpOf(s), dumpOf(got), cmpOpts); diff != "" {
		t.Fatalf("decoded state differs:\n%s", diff)
	}
}

// A record of a state before version 5 without an attempt bound counted no
// tries, so whether its last delivery ended suspended is unknown: it decodes
// with one try once claimed, and no repeated suspension of it is taken for a
// replay. Version 5 keeps the count, and the replay.
func TestAStateBeforeVersion5TakesNoRepeatedSuspensionForAReplay(t *testing.T) {
	s := New()
	s.meta.Now = 1e9
	applyAt(s, Command{Kind: KindAdmit, ExecutionID: "e", WorkflowID: "w"})
	l := applyAt(s, Command{Kind: KindClaim, Limit: 1, Duration: 60e9}).Leases[0]
	applyAt(s, Command{Kind: KindAcknowledge, ExecutionID: "e", Token: l.Token, Outcome: Outcome{Status: StatusSuspended}})
	repeat := Command{Kind: KindAcknowledge, Now: s.meta.Now + 1, ExecutionID: "e", Token: l.Token, Outcome: Outcome{Status: StatusSuspended}}
	var buf bytes.Buffer
	if err := s.encodeAs(&buf, 5); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	for _, version := range []byte{4, 5} {
		b[0] = version // versions 4 and 5 share the layout
		if _, err := CheckState(bufio.NewReader(bytes.NewReader(b))); err != nil {
			t.Fatalf("CheckState of version %d: %v", version, err)
		}
		decoded, err := DecodeState(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			t.Fatal(err)
		}
		r, _ := decoded.Precheck(&repeat)
		if replay := r.Code == CodeOK && r.Unchanged; replay != (version >= 5) {
			t.Errorf("version %d: the repeated suspension answers %+v, a replay: %v", version, r, replay)
		}
		if err := decoded.CheckInvariants(); err != nil {
			t.Fatalf("version %d: %v", version, err)
		}
	}
}
