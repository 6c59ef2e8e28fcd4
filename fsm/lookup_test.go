package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The applying goroutine's lookup tries the item after its previous one
// before it searches (execCursor). Whatever the order of the lookups, and
// whatever writes the records tree between them (admissions, retirements),
// replaces records in their slots (claims of records a copy shares) or
// copies the state, it must find exactly what a plain search finds.
func TestLookupFindsWhatASearchFinds(t *testing.T) {
	for seed := uint64(1); seed <= seeds(6); seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := New()
		s.meta.Now = 1e9
		var ids []string // every ID ever admitted, and some never
		admit := func() {
			id := fmt.Sprintf("e%05d", rng.IntN(100_000))
			applyAt(s, Command{Kind: KindAdmit, ExecutionID: id, WorkflowID: "w"})
			ids = append(ids, id)
		}
		for range 300 {
			admit()
		}
		for op := range 1_000 {
			switch rng.IntN(12) {
			case 0:
				admit()
			case 1: // claim and finish a few: replaced records, then retired ones
				for _, l := range applyAt(s, Command{Kind: KindClaim, Limit: 1 + rng.IntN(8), Duration: 60e9}).Leases {
					applyAt(s, Command{Kind: KindAcknowledge, ExecutionID: l.ExecutionID, Token: l.Token, Outcome: Outcome{Status: StatusCompleted}})
				}
			case 2:
				applyAt(s, Command{Kind: KindRetire, At: s.meta.Now, Limit: 1 + rng.IntN(4)})
			case 3:
				s.Copy() // every record becomes shared: the next changes replace them
			case 4, 5: // a run of lookups in ID order, as an acknowledge-batch makes
				from := fmt.Sprintf("e%05d", rng.IntN(100_000))
				var run []string
				s.execs.Ascend(execItem{ID: from}, func(it execItem) bool {
					run = append(run, it.ID)
					return len(run) < 40
				})
				for _, id := range run {
					checkLookup(t, s, id, seed, op)
					if rng.IntN(2) == 0 { // admissions between the lookups: nodes split under the cursor
						for range 1 + rng.IntN(40) {
							admit()
						}
					}
				}
			default:
				id := ids[rng.IntN(len(ids))]
				if rng.IntN(4) == 0 {
					id = fmt.Sprintf("e%05d", rng.IntN(100_000))
				}
				checkLookup(t, s, id, seed, op)
			}
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func checkLookup(t *testing.T, s *State, id string, seed uint64, op int) {
	t.Helper()
	got, want := s.lookup(id), s.find(id, nil)
	switch {
	case (got == nil) != (want == nil):
		t.Fatalf("seed %d op %d: lookup(%q) = %v, a search finds %v", seed, op, id, got, want)
	case got == nil:
	case got.Terminal() && s.retired.Len() > 0 && got != want: // a retired record is expanded anew each time
		if got.Value() != want.Value() {
			t.Fatalf("seed %d op %d: lookup(%q) = %+v, a search finds %+v", seed, op, id, got.Value(), want.Value())
		}
	case got != want:
		t.Fatalf("seed %d op %d: lookup(%q) = %p (%+v), a search finds %p (%+v)", seed, op, id, got, got.Value(), want, want.Value())
	}
}
