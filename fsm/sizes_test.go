package fsm

import (
	"bufio"
	"bytes"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A state's sizes change no result and no encoding. The pinned command log
// applied to a state cut into the smallest pieces and to one with the
// default sizes gives every command the same result, reads the same change
// log and encodes to the same bytes, the small one having swept its log in
// chunks of its own size all along; a state decoded from that encoding and
// cut again (SetSizes) still encodes and reads the same, and its copies take
// its sizes.
func TestSizesChangeNoResultAndNoEncoding(t *testing.T) {
	small := Sizes{FeedChunk: 4, FeedSweep: 1}
	def, tiny := New(), New()
	tiny.SetSizes(small)
	for _, s := range []*State{def, tiny} {
		s.TrackRetirement()
	}
	for i, c := range readFixtureCommands(t, "testdata/commands-v2.bin") {
		a, b := c, c
		if ra, rb := def.Apply(&a), tiny.Apply(&b); !reflect.DeepEqual(ra, rb) {
			t.Fatalf("command %d (%v): result %+v with the default sizes, %+v with %+v", i, c.Kind, ra, rb, small)
		}
	}
	read := func(st *State) []Change {
		var out []Change
		st.Changes(0, 1<<30, 1<<30, func(c Change) { out = append(out, c) })
		return out
	}
	want, wantChanges := encodeState(t, def), read(def)
	check := func(what string, st *State, sz Sizes) {
		t.Helper()
		if err := st.CheckInvariants(); err != nil { // every chunk within its size
			t.Fatalf("%s: %v", what, err)
		}
		if got := encodeState(t, st); !bytes.Equal(got, want) {
			t.Fatalf("%s encodes to other bytes than the state with the default sizes", what)
		}
		if diff := cmp.Diff(wantChanges, read(st)); diff != "" {
			t.Fatalf("%s reads another change log (-default +%s):\n%s", what, what, diff)
		}
		if st.Sizes() != sz || st.Copy().Sizes() != sz {
			t.Fatalf("%s: sizes %+v, its copy's %+v, want %+v", what, st.Sizes(), st.Copy().Sizes(), sz)
		}
	}
	check("the small state", tiny, small)
	if tiny.FeedLen() >= def.FeedLen() {
		t.Fatalf("the small state's log holds %d entries, the default one's %d: no sweep reached", tiny.FeedLen(), def.FeedLen())
	}
	decoded, err := DecodeState(bufio.NewReader(bytes.NewReader(want)))
	if err != nil {
		t.Fatal(err)
	}
	decoded.TrackRetirement()
	check("a decoded state", decoded, Sizes{FeedChunk: DefaultFeedChunk, FeedSweep: DefaultFeedSweep})
	decoded.SetSizes(small)
	check("a decoded state cut again", decoded, small)
}
