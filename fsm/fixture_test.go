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
// the command codec or of the state encoding cannot stop old data from opening. Each pair is
// a command log and the state those commands produce (retention tracked), as a snapshot held
// it:
//
//   - commands-v1.bin, state-v2.bin: 2,000 commands of every kind of codec version 1, each
//     preceded by its length as a uvarint, as the write-ahead log held them, and their state
//     in state version 2;
//   - commands-v2.bin, state-v3.bin: the same for codec version 2 (cancellation, attempt
//     bounds, schedules) and state version 3;
//   - commands-v2.bin, state-v4.bin: the same log's state in version 4 (the change log);
//   - commands-v3.bin, state-v5.bin: codec version 3 (claims' request keys) and state version
//     5 (the request keys' grants; tries counted without an attempt bound);
//   - commands-v3.bin, state-v6.bin: the same log's state in version 6 (the count of
//     executions retired to the archive);
//   - commands-v4.bin, state-v7.bin: codec version 4 (the forget command) and state version
//     7 (the forget cutoff).
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
	{"testdata/commands-v2.bin", "testdata/state-v4.bin", 2, 4},
	{"testdata/commands-v3.bin", "testdata/state-v5.bin", 3, 5},
	{"testdata/commands-v3.bin", "testdata/state-v6.bin", 3, 6},
	{"testdata/commands-v4.bin", "testdata/state-v7.bin", 4, 7},
	{"testdata/commands-v5.bin", "testdata/state-v8.bin", 5, 8},
	{"testdata/commands-v6.bin", "testdata/state-v9.bin", 6, 9},
	{"testdata/commands-v7.bin", "testdata/state-v10.bin", 7, 10},
	{"testdata/commands-v8.bin", "testdata/state-v11.bin", 8, 11},
	{"testdata/commands-v9.bin", "testdata/state-v12.bin", 9, 12},
	{"testdata/commands-v10.bin", "testdata/state-v13.bin", 10, 13},
}

func fixtureCommandList() []Command {
	g := &gen{rng: rand.New(rand.NewPCG(11, 7)), now: 1000}
	s := New()
	s.TrackRetirement()
	cmds := make([]Command, 0, fixtureCommands)
	for range fixtureCommands - 7 {
		c := g.next()
		g.observe(s.Apply(&c))
		cmds = append(cmds, c)
	}
	// The state ends with a rate limit's log of grants (state version 10)
	// and an execution of the first priority with a deadline (versions 11
	// and 12), and a queue whose key limit parks an execution (version 13),
	// whatever the generated commands left.
	now := g.now + 1000
	for _, c := range []Command{
		{Kind: KindPutQueue, Now: now, QueueSettings: &QueueSettings{Name: "rated", Rate: 2, Period: MinRatePeriod}, Limit: MaxQueueSettings},
		{Kind: KindAdmit, Now: now, ExecutionID: "rated-1", WorkflowID: "w", Queue: "rated", Priority: PriorityFirst, Deadline: now + 1e9},
		{Kind: KindClaim, Now: now, Limit: 4, Duration: 1e9, Queues: []string{"rated"}},
		{Kind: KindPutQueue, Now: now, QueueSettings: &QueueSettings{Name: "keyed", KeyLimit: 1, KeyLive: true}, Limit: MaxQueueSettings},
		{Kind: KindAdmit, Now: now, ExecutionID: "keyed-1", WorkflowID: "w", Queue: "keyed", ConcurrencyKey: "customer-1"},
		{Kind: KindAdmit, Now: now, ExecutionID: "keyed-2", WorkflowID: "w", Queue: "keyed", ConcurrencyKey: "customer-1"},
		{Kind: KindClaim, Now: now, Limit: 4, Duration: 1e9, Queues: []string{"keyed"}},
	} {
		s.Apply(&c)
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
	if _, err := os.Stat(p.state); err == nil {
		t.Fatalf("%s exists: a fixture is written once, by the code of its version", p.state)
	}
	// A state version newer than the codec's pins its state from the
	// codec's existing command log, which it must not rewrite.
	s := New()
	s.TrackRetirement()
	if _, err := os.Stat(p.commands); err == nil {
		for _, c := range readFixtureCommands(t, p.commands) {
			s.Apply(&c)
		}
	} else {
		var cmds []byte
		for _, c := range fixtureCommandList() {
			e := AppendEncode(nil, &c)
			cmds = binary.AppendUvarint(cmds, uint64(len(e)))
			cmds = append(cmds, e...)
			s.Apply(&c)
		}
		if err := os.WriteFile(p.commands, cmds, 0o644); err != nil {
			t.Fatal(err)
		}
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
	if p.version >= 5 && decoded.grants.Len() == 0 {
		t.Fatalf("%s holds no claim request key: a fixture that tests little", p.state)
	}
	if p.version < 5 {
		// Before version 5 a record without an attempt bound counted no
		// tries: it decodes with upgradeTries' count, where replay under
		// today's code counts them.
		replayed.execs.Scan(func(it execItem) bool {
			rewrite(replayed.rec(it), func(e *Execution) { upgradeTries(e, uint64(p.version)) })
			return true
		})
	}
	var wantDump, got dump
	if p.version < 4 {
		// Before version 4 there is no change log: DecodeState derives one
		// (list_codec.go), numbering admissions in admission-time order and
		// latest changes in time order after them, where replaying the
		// commands numbered every change as it happened. So the comparison
		// leaves out exactly the numbering: Meta.ChangeSeq and
		// Meta.Admitted, each record's AdmitNo and ChangeSeq, the change
		// log's positions and times, and the admission number each listing
		// entry is ordered by (entries of equal admission time may
		// therefore come in another order: they are compared sorted by ID). What is compared of the
		// change log is which record each change is of and its status;
		// every record, every other index and every count must be equal.
		checkDerivedChanges(t, decoded)
		for _, s := range []*State{replayed, decoded} { // the states are not used after this
			s.execs.Scan(func(it execItem) bool {
				rewrite(s.rec(it), func(e *Execution) { e.AdmitNo, e.ChangeSeq = 0, 0 })
				return true
			})
		}
		wantDump, got = dumpOf(replayed), dumpOf(decoded)
		for _, d := range []*dump{&wantDump, &got} {
			forgetChangeNumbering(d)
		}
	} else {
		wantDump, got = dumpOf(replayed), dumpOf(decoded)
	}
	if diff := cmp.Diff(wantDump, got, cmpOpts); diff != "" {
		t.Fatalf("%s differs from its replayed commands (-replayed +decoded):\n%s", p.state, diff)
	}
}

// forgetChangeNumbering clears what a derived change log numbers otherwise
// than replay does, and sorts what that numbering ordered.
func forgetChangeNumbering(d *dump) {
	d.Meta.ChangeSeq, d.Meta.Admitted = 0, 0
	for _, entries := range [][]listedAs{d.List.Admitted, d.List.ByWorkflow, d.List.ByParent} {
		for i := range entries {
			entries[i].No = 0
		}
		slices.SortStableFunc(entries, func(a, b listedAs) int {
			return strings.Compare(fmt.Sprint(a.Status, " ", a.Group, " ", a.ID), fmt.Sprint(b.Status, " ", b.Group, " ", b.ID))
		})
	}
	for i := range d.List.Changes {
		d.List.Changes[i].Seq, d.List.Changes[i].At = 0, 0
	}
	slices.SortFunc(d.List.Changes, func(a, b Change) int { return strings.Compare(a.ID, b.ID) })
}

// checkDerivedChanges checks the change log DecodeState derives for a state
// of version 1 or 2 of n records: one change per record, to its status,
// numbered from n+1 in (time, ID) order, the time being the admission of a
// record still admitted and the latest update of any other.
func checkDerivedChanges(t *testing.T, s *State) {
	t.Helper()
	var got []Change
	s.Changes(0, s.Len()+1, s.Len()+1, func(c Change) { got = append(got, c) })
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
