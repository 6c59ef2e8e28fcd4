package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"flag"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The fixtures in testdata pin what earlier versions of the code wrote, so that a change of
// the command codec or of the state encoding cannot stop old data from opening. Each pair is
// a command log and the state those commands produce (retention tracked), as a snapshot held
// it:
//
//   - commands-v1.bin, state-v2.bin: 2,000 commands of every kind of codec version 1, each
//     preceded by its length as a uvarint, as the write-ahead log held them, and their state
//     in state version 2;
//   - commands-v2.bin, state-v3.bin: the same for codec version 2 (cancellation, attempt
//     bounds, schedules) and state version 3.
//
// Each pair is written once, by the code of its version (go test -run Fixture
// -write-fixtures writes the current version's pair, and refuses to overwrite one), and
// never rewritten after that version is superseded.
var writeFixtures = flag.Bool("write-fixtures", false, "write the fixture pair of the current codec and state versions")

const fixtureCommands = 2000

// fixturePair names one pinned pair.
type fixturePair struct {
	commands, state string
	codec, version  int
}

var fixturePairs = []fixturePair{
	{"testdata/commands-v1.bin", "testdata/state-v2.bin", 1, 2},
	{"testdata/commands-v2.bin", "testdata/state-v3.bin", 2, 3},
}

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

func readFixtureCommands(t *testing.T, name string) []Command {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []Command
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			t.Fatalf("%s: bad length prefix after %d commands", name, len(cmds))
		}
		var c Command
		if err := DecodeInto(&c, b[k:k+int(n)]); err != nil {
			t.Fatalf("%s: command %d: %v", name, len(cmds), err)
		}
		cmds = append(cmds, c)
		b = b[k+int(n):]
	}
	return cmds
}

func TestWriteFixtures(t *testing.T) {
	if !*writeFixtures {
		t.Skip("run with -write-fixtures to write the fixtures of the current version")
	}
	p := fixturePairs[len(fixturePairs)-1]
	if CodecVersion != p.codec || StateVersion != p.version {
		t.Fatalf("the newest fixture pair pins codec version %d and state version %d; add a pair for codec %d, state %d",
			p.codec, p.version, CodecVersion, StateVersion)
	}
	for _, name := range []string{p.commands, p.state} {
		if _, err := os.Stat(name); err == nil {
			t.Fatalf("%s exists: a fixture is written once, by the code of its version", name)
		}
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
	if err := os.WriteFile(p.commands, cmds, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.state, encodeState(t, s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every command of each pinned log still decodes, and applying them gives the state the
// snapshot of the same history holds: old logs replay and old snapshots open, and the two
// agree. Each pair holds every kind of command its codec version knew.
func TestOldCommandLogsAndStatesStillOpen(t *testing.T) {
	for _, p := range fixturePairs {
		t.Run(p.state, func(t *testing.T) { checkFixturePair(t, p) })
	}
}

func checkFixturePair(t *testing.T, p fixturePair) {
	cmds := readFixtureCommands(t, p.commands)
	if len(cmds) != fixtureCommands {
		t.Fatalf("%s holds %d commands, want %d", p.commands, len(cmds), fixtureCommands)
	}
	kinds := map[Kind]bool{}
	replayed := New()
	replayed.TrackRetirement()
	for i := range cmds {
		kinds[cmds[i].Kind] = true
		replayed.Apply(&cmds[i])
	}
	want := []Kind{}
	for k := KindAdmit; k <= KindAcknowledgeBatch; k++ {
		want = append(want, k)
	}
	if p.codec >= 2 {
		want = append(want, KindCancel, KindPutSchedule, KindDeleteSchedule, KindFireSchedules)
	}
	for _, k := range want {
		if !kinds[k] {
			t.Errorf("%s holds no %v command", p.commands, k)
		}
	}
	if err := replayed.CheckInvariants(); err != nil {
		t.Fatalf("replayed %s: %v", p.commands, err)
	}

	b, err := os.ReadFile(p.state)
	if err != nil {
		t.Fatal(err)
	}
	if v := b[0]; int(v) != p.version {
		t.Fatalf("%s starts with version byte %d, want %d", p.state, v, p.version)
	}
	if _, err := CheckState(bufio.NewReader(bytes.NewReader(b))); err != nil {
		t.Fatalf("CheckState(%s): %v", p.state, err)
	}
	decoded, err := DecodeState(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		t.Fatal(err)
	}
	decoded.TrackRetirement()
	if err := decoded.CheckInvariants(); err != nil {
		t.Fatalf("decoded %s: %v", p.state, err)
	}
	if decoded.Len() == 0 || decoded.meta.Retired == 0 || decoded.meta.Terminal == 0 {
		t.Fatalf("%s holds %d records, %d retired, %d terminal: a fixture that tests little",
			p.state, decoded.Len(), decoded.meta.Retired, decoded.meta.Terminal)
	}
	if diff := cmp.Diff(dumpOf(replayed), dumpOf(decoded), cmpOpts); diff != "" {
		t.Fatalf("%s differs from its replayed commands (-replayed +decoded):\n%s", p.state, diff)
	}
}
