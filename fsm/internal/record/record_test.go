package record

import "testing"

// Put changes a stored record in place only for the state that stored it
// (or one that says no copy exists); any other state gets a new record and
// the old one is left as every copy sees it.
func TestPutWritesInPlaceOnlyWhatTheStateOwns(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gen       uint32
		exclusive bool
		inPlace   bool
	}{
		{"its own generation", 3, false, true},
		{"another generation", 5, false, false},
		{"another generation, no copy outstanding", 5, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(&Execution{ID: "e", Status: StatusAdmitted}, 3)
			next := s.Value()
			next.Status = StatusCompleted
			got := Put(s, &next, tc.gen, tc.exclusive)
			if (got == s) != tc.inPlace {
				t.Fatalf("stored in place: %v, want %v", got == s, tc.inPlace)
			}
			if got.Status() != StatusCompleted {
				t.Fatalf("Put stored status %v", got.Status())
			}
			if want := map[bool]Status{true: StatusCompleted, false: StatusAdmitted}[tc.inPlace]; s.Status() != want {
				t.Fatalf("the old record has status %v, want %v", s.Status(), want)
			}
			if v := got.Value(); v != next {
				t.Fatalf("Value() = %+v, want %+v (without the generation)", v, next)
			}
			// A record written in place keeps its generation; a new one
			// belongs to the state that stored it.
			owner := tc.gen
			if tc.inPlace {
				owner = 3
			}
			got.SetPositions(7, 0, owner)
		})
	}
}

// SetPositions refuses a record another state's generation stored.
func TestSetPositionsRefusesARecordOfAnotherGeneration(t *testing.T) {
	s := New(&Execution{ID: "e"}, 3)
	s.SetPositions(4, 9, 3)
	if s.AdmitNo() != 4 || s.ChangeSeq() != 9 {
		t.Fatalf("positions %d/%d, want 4/9", s.AdmitNo(), s.ChangeSeq())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("SetPositions on a record of another generation did not panic")
		}
	}()
	s.SetPositions(5, 10, 4)
}
