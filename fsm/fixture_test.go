package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The fixtures in testdata pin what earlier versions of the code wrote, so that a change of
// the command codec or of the state encoding cannot stop old data from opening:
//
//   - commands-v1.bin: 2,000 commands of every kind in codec version 1, each preceded by its
//     length as a uvarint, as the write-ahead log held them;
//   - state-v2.bin: the state those commands produce (retention tracked), encoded in state
//     version 2, as a snapshot held it.
//
// They are written once, by the code of their version (go test -run Fixture -write-fixtures),
// and never rewritten after that version is superseded.
var writeFixtures = flag.Bool("write-fixtures", false, "rewrite testdata/commands-v1.bin and testdata/state-v2.bin")

const fixtureCommands = 2000

func fixtureCommandList() []Command {
	g := &gen{rng: rand.New(rand.NewPCG(11, 7)), now: 1000}
	s := New()
	s.TrackRetirement()
	cmds := make([]Command, 0, fixtureCommands)
	for range fixtureCommands {
		c := g.next()
		g.observe(s.Apply(&c))
		cmds = append(cmds, c)
	}
	return cmds
}

func readFixtureCommands(t *testing.T) []Command {
	t.Helper()
	b, err := os.ReadFile("testdata/commands-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []Command
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			t.Fatalf("commands-v1.bin: bad length prefix after %d commands", len(cmds))
		}
		var c Command
		if err := DecodeInto(&c, b[k:k+int(n)]); err != nil {
			t.Fatalf("commands-v1.bin: command %d: %v", len(cmds), err)
		}
		cmds = append(cmds, c)
		b = b[k+int(n):]
	}
	return cmds
}

func TestWriteFixtures(t *testing.T) {
	if !*writeFixtures {
		t.Skip("run with -write-fixtures to rewrite the fixtures of the current version")
	}
	if CodecVersion != 1 || StateVersion != 2 {
		t.Fatal("the fixtures pin codec version 1 and state version 2; add new ones for a new version")
	}
	var cmds []byte
	s := New()
	s.TrackRetirement()
	for _, c := range fixtureCommandList() {
		e := AppendEncode(nil, &c)
		cmds = binary.AppendUvarint(cmds, uint64(len(e)))
		cmds = append(cmds, e...)
		s.Apply(&c)
	}
	if err := os.WriteFile("testdata/commands-v1.bin", cmds, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("testdata/state-v2.bin", encodeState(t, s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every command a version-1 log holds still decodes, and applying them gives the state a
// version-2 snapshot of the same history holds: old logs replay and old snapshots open, and
// the two agree.
func TestVersion1CommandsAndAVersion2StateStillOpen(t *testing.T) {
	cmds := readFixtureCommands(t)
	if len(cmds) != fixtureCommands {
		t.Fatalf("commands-v1.bin holds %d commands, want %d", len(cmds), fixtureCommands)
	}
	kinds := map[Kind]bool{}
	replayed := New()
	replayed.TrackRetirement()
	for i := range cmds {
		kinds[cmds[i].Kind] = true
		replayed.Apply(&cmds[i])
	}
	for k := KindAdmit; k <= KindAcknowledgeBatch; k++ {
		if !kinds[k] {
			t.Errorf("commands-v1.bin holds no %v command", k)
		}
	}
	if err := replayed.CheckInvariants(); err != nil {
		t.Fatalf("replayed version-1 commands: %v", err)
	}

	b, err := os.ReadFile("testdata/state-v2.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckState(bufio.NewReader(bytes.NewReader(b))); err != nil {
		t.Fatalf("CheckState(state-v2.bin): %v", err)
	}
	decoded, err := DecodeState(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	decoded.TrackRetirement()
	if err := decoded.CheckInvariants(); err != nil {
		t.Fatalf("decoded state-v2.bin: %v", err)
	}
	if decoded.Len() == 0 || decoded.meta.Retired == 0 || decoded.meta.Terminal == 0 {
		t.Fatalf("state-v2.bin holds %d records, %d retired, %d terminal: a fixture that tests little",
			decoded.Len(), decoded.meta.Retired, decoded.meta.Terminal)
	}
	// Version 2 has no change log: DecodeState derives one (list_codec.go),
	// numbering admissions in admission-time order and latest changes in
	// time order after them, where replaying the commands numbered every
	// change as it happened. So the comparison leaves out exactly the change
	// numbering: Meta.ChangeSeq, each record's AdmitSeq and ChangeSeq, the
	// change log's positions and times, and the admission position each
	// listing entry is ordered by (entries of equal admission time may
	// therefore come in another order: they are compared sorted by ID).
	// What is compared of the change log is which record each change is of
	// and its status; every record, every other index and every count must
	// be equal.
	checkDerivedChanges(t, decoded)
	for _, s := range []*State{replayed, decoded} { // the states are not used after this
		s.execs.Scan(func(it execItem) bool { it.e.AdmitSeq, it.e.ChangeSeq = 0, 0; return true })
	}
	want, got := dumpOf(replayed), dumpOf(decoded)
	for _, d := range []*dump{&want, &got} {
		d.Meta.ChangeSeq = 0
		for _, entries := range [][]listedAs{d.List.ByStatus, d.List.ByWorkflow, d.List.ByParent} {
			for i := range entries {
				entries[i].Adm = 0
			}
			slices.SortStableFunc(entries, func(a, b listedAs) int {
				return strings.Compare(fmt.Sprint(a.Status, " ", a.Group, " ", a.At, " ", a.ID), fmt.Sprint(b.Status, " ", b.Group, " ", b.At, " ", b.ID))
			})
		}
		for i := range d.List.Changes {
			d.List.Changes[i].Seq, d.List.Changes[i].At = 0, 0
		}
		slices.SortFunc(d.List.Changes, func(a, b Change) int { return strings.Compare(a.ID, b.ID) })
	}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Fatalf("state-v2.bin differs from its replayed commands (-replayed +decoded):\n%s", diff)
	}
}

// checkDerivedChanges checks the change log DecodeState derives for a state
// of version 1 or 2 of n records: one change per record, to its status,
// numbered from n+1 in (time, ID) order, the time being the admission of a
// record still admitted and the latest update of any other.
func checkDerivedChanges(t *testing.T, s *State) {
	t.Helper()
	var got []Change
	s.Changes(0, s.Len()+1, func(c Change) { got = append(got, c) })
	var want []Change
	for _, e := range records(s) {
		at := e.UpdatedAt
		if e.Status == StatusAdmitted {
			at = e.AdmittedAt
		}
		want = append(want, Change{ID: e.ID, Status: e.Status, At: at})
	}
	slices.SortStableFunc(want, func(a, b Change) int { // records(s) is in ID order
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	for i := range want {
		want[i].Seq = uint64(len(want) + i + 1)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("derived change log (-want +got):\n%s", diff)
	}
	if s.meta.ChangeSeq != uint64(2*len(want)) {
		t.Fatalf("derived change sequence %d, want %d", s.meta.ChangeSeq, 2*len(want))
	}
}
