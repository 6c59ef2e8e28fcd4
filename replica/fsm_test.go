package replica

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/snapshot"
)

// commandLogs generates n command logs from index 1 on, applying each to ref (a plain state)
// so that the workload sees real results, and returns the logs and ref's results.
func commandLogs(t testing.TB, seed uint64, n int, ref *fsm.State) ([]*raft.Log, []fsm.Result) {
	t.Helper()
	w := newWorkload(seed)
	logs := make([]*raft.Log, n)
	results := make([]fsm.Result, n)
	for i := range logs {
		c := w.next()
		logs[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: encodeCommand(t, &c)}
		results[i] = ref.Apply(&c)
		w.observe(results[i])
	}
	return logs, results
}

func TestApplyAndApplyBatchAnswerAsTheStateMachine(t *testing.T) {
	ref := fsm.New()
	logs, want := commandLogs(t, 1, 400, ref)
	single, batched := NewFSM(fsm.New(), 0, FSMOptions{}), NewFSM(fsm.New(), 0, FSMOptions{})
	for i, l := range logs {
		if got := single.Apply(l); !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("Apply(log %d) = %+v, want %+v", l.Index, got, want[i])
		}
	}
	for from := 0; from < len(logs); from += 64 {
		part := logs[from:min(from+64, len(logs))]
		got := batched.ApplyBatch(part)
		if len(got) != len(part) {
			t.Fatalf("ApplyBatch of %d logs gave %d responses", len(part), len(got))
		}
		for i := range part {
			if !reflect.DeepEqual(got[i], want[from+i]) {
				t.Fatalf("ApplyBatch: log %d = %+v, want %+v", part[i].Index, got[i], want[from+i])
			}
		}
	}
	for name, f := range map[string]*FSM{"Apply": single, "ApplyBatch": batched} {
		f.View(func(st *fsm.State, applied uint64) {
			if !bytes.Equal(stateBytes(t, st), stateBytes(t, ref)) || applied != 400 {
				t.Fatalf("%s: the state differs from the state machine's, or applied = %d (want 400)", name, applied)
			}
		})
	}
}

func TestLogsThatAreNotCommandsChangeNothing(t *testing.T) {
	f := NewFSM(fsm.New(), 0, FSMOptions{})
	admit := fsm.Command{Kind: fsm.KindAdmit, Now: 5, ExecutionID: "a", WorkflowID: "w"}
	good := &raft.Log{Index: 1, Type: raft.LogCommand, Data: fsm.AppendEncode(nil, &admit)}
	f.Apply(good)
	before, _ := f.Copy()
	logs := []*raft.Log{
		{Index: 2, Type: raft.LogConfiguration, Data: []byte("a configuration")},
		{Index: 3, Type: raft.LogCommand, Data: []byte{0xff, 1, 2}},
		{Index: 4, Type: raft.LogCommand},
	}
	got := f.ApplyBatch(logs)
	if got[0] != nil {
		t.Fatalf("a configuration log's response = %v, want nil", got[0])
	}
	for i, r := range got[1:] {
		var ce *CommandError
		if err, ok := r.(error); !ok || !errors.As(err, &ce) || !errors.Is(err, ErrBadCommand) || !errors.Is(err, fsm.ErrDecode) ||
			ce.Index != logs[i+1].Index {
			t.Fatalf("log %d with data that is not a command: response %v, want a *CommandError", logs[i+1].Index, r)
		}
	}
	after, applied := f.Copy()
	if !bytes.Equal(stateBytes(t, before), stateBytes(t, after)) || applied != 4 {
		t.Fatalf("logs that are not commands changed the state (applied %d)", applied)
	}
}

// memorySink is a raft.SnapshotSink in memory.
type memorySink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memorySink) ID() string        { return "memory" }
func (s *memorySink) Close() error      { s.closed = true; return nil }
func (s *memorySink) Cancel() error     { s.cancelled = true; return nil }
func (s *memorySink) Bytes() []byte     { return s.Buffer.Bytes() }
func (s *memorySink) Reader() io.Reader { return bytes.NewReader(s.Buffer.Bytes()) }

func TestSnapshotIsThePointInTimeStateInTheSnapshotFormat(t *testing.T) {
	ref := fsm.New()
	logs, _ := commandLogs(t, 2, 300, ref)
	f := NewFSM(fsm.New(), 0, FSMOptions{})
	f.ApplyBatch(logs[:200])
	at200, _ := f.Copy()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f.ApplyBatch(logs[200:]) // Apply goes on while the snapshot is persisted
	var sink memorySink
	if err := snap.Persist(&sink); err != nil || !sink.closed || sink.cancelled {
		t.Fatalf("Persist = %v (closed %v, cancelled %v)", err, sink.closed, sink.cancelled)
	}
	snap.Release()

	// The bytes are those of a single-node snapshot file of the state at log 200.
	h := snapshot.Header{Index: 200, Clock: at200.Meta().Now, Records: uint64(at200.Len())}
	info, err := snapshot.Write(t.TempDir(), at200, h, snapshot.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(info.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sink.Bytes(), file) {
		t.Fatal("Persist wrote other bytes than a single-node snapshot file of the state at capture")
	}

	var restoredHook *fsm.State
	g := NewFSM(fsm.New(), 0, FSMOptions{Restored: func(st *fsm.State) { restoredHook = st }})
	if err := g.Restore(io.NopCloser(sink.Reader())); err != nil {
		t.Fatal(err)
	}
	g.View(func(st *fsm.State, applied uint64) {
		if !bytes.Equal(stateBytes(t, st), stateBytes(t, at200)) || applied != 200 {
			t.Fatalf("restored state differs from the state at capture, or applied = %d (want 200)", applied)
		}
		if restoredHook != st {
			t.Fatal("Restored was not called with the state adopted")
		}
	})
	// The restored FSM applies the rest as the original did.
	g.ApplyBatch(logs[200:])
	a, _ := f.Copy()
	b, _ := g.Copy()
	if !bytes.Equal(stateBytes(t, a), stateBytes(t, b)) {
		t.Fatal("after the same logs, the restored FSM's state differs")
	}
}

// TestARaftSnapshotHandsItsCopyBack: raft releases every snapshot it took, once persisted;
// the FSM's state then has no copy outstanding, so it changes its records in place again
// (fsm.State.Release) instead of replacing each for as long as the node runs. A snapshot
// taken before a Restore is released without touching the state restored.
func TestARaftSnapshotHandsItsCopyBack(t *testing.T) {
	ref := fsm.New()
	logs, _ := commandLogs(t, 4, 200, ref)
	f := NewFSM(fsm.New(), 0, FSMOptions{})
	copies := func() (n int) {
		f.View(func(st *fsm.State, _ uint64) { n = st.Copies() })
		return n
	}
	f.ApplyBatch(logs[:100])
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if n := copies(); n != 1 {
		t.Fatalf("copies outstanding while the snapshot is persisted = %d, want 1", n)
	}
	f.ApplyBatch(logs[100:150])
	var sink memorySink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if n := copies(); n != 0 {
		t.Fatalf("copies outstanding after raft released the snapshot = %d, want 0", n)
	}
	snap.Release() // a second release changes nothing
	if n := copies(); n != 0 {
		t.Fatalf("copies outstanding after a second release = %d, want 0", n)
	}

	// Taken, then the state is replaced by a Restore, then released.
	old, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(io.NopCloser(sink.Reader())); err != nil {
		t.Fatal(err)
	}
	old.Release()
	if n := copies(); n != 0 {
		t.Fatalf("the restored state has %d copies outstanding, want 0", n)
	}
	f.ApplyBatch(logs[100:])
	a, _ := f.Copy()
	defer f.Release(a)
	if !bytes.Equal(stateBytes(t, a), stateBytes(t, ref)) { // ref: every log applied in order
		t.Fatal("after the restore and the same logs, the FSM's state differs from the logs applied in order")
	}
}

func TestRestoreOfADamagedSnapshotChangesNothing(t *testing.T) {
	ref := fsm.New()
	logs, _ := commandLogs(t, 3, 100, ref)
	f := NewFSM(fsm.New(), 0, FSMOptions{})
	f.ApplyBatch(logs)
	snap, _ := f.Snapshot()
	var sink memorySink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	good := sink.Bytes()
	g := NewFSM(fsm.New(), 0, FSMOptions{})
	g.ApplyBatch(logs[:10])
	before, applied := g.Copy()
	for _, bad := range [][]byte{good[:len(good)-1], append(bytes.Clone(good[:40]), good[41:]...), {}} {
		if err := g.Restore(io.NopCloser(bytes.NewReader(bad))); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Fatalf("Restore of %d damaged bytes = %v, want snapshot.ErrCorrupt", len(bad), err)
		}
	}
	after, appliedAfter := g.Copy()
	if !bytes.Equal(stateBytes(t, before), stateBytes(t, after)) || appliedAfter != applied {
		t.Fatal("a refused Restore changed the state")
	}
}

// TestTheFSMAdapterReadsNoClockAndNoRandomness checks the adapter's source: it may import
// only what cannot read a clock, draw randomness or touch files, and never reads a log's
// AppendedAt (the leader's wall time: not part of the command). context is for WaitApplied's
// caller to give up waiting, which changes nothing.
func TestTheFSMAdapterReadsNoClockAndNoRandomness(t *testing.T) {
	// internal/mutant holds the simulator's deliberate bugs: constants, false, unless built
	// with the mutants tag for the mutation tests.
	allowed := []string{"context", "fmt", "io", "sync", "github.com/hashicorp/raft",
		"github.com/execstore/execstore/fsm", "github.com/execstore/execstore/internal/mutant",
		"github.com/execstore/execstore/snapshot"}
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "fsm.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	if len(file.Imports) == 0 {
		t.Fatal("parsed no imports: the check checks nothing")
	}
	for _, imp := range file.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if !slices.Contains(allowed, path) {
			t.Errorf("fsm.go imports %s; the adapter must stay deterministic (allowed: %v)", path, allowed)
		}
	}
	full, err := parser.ParseFile(fset, "fsm.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(full, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "AppendedAt" {
			t.Errorf("fsm.go reads AppendedAt at %s: the leader's wall time, not part of the command", fset.Position(sel.Pos()))
		}
		return true
	})
}

func TestTheOwnerHooksSeeEveryStateAndEveryAppliedCommand(t *testing.T) {
	ref := fsm.New()
	logs, want := commandLogs(t, 3, 120, ref)
	var (
		mu      sync.RWMutex
		adopted []*fsm.State
		cmds    []fsm.Command
		results []fsm.Result
		locked  []bool
	)
	first := fsm.New()
	f := NewFSM(first, 0, FSMOptions{
		Lock:    &mu,
		Adopted: func(st *fsm.State) { adopted = append(adopted, st); locked = append(locked, !mu.TryRLock()) },
		Applied: func(c []fsm.Command, r []fsm.Result) {
			cmds, results = append(cmds, c...), append(results, r...)
			if !mu.TryLock() {
				t.Error("Applied was called with the lock held")
			} else {
				mu.Unlock()
			}
		},
	})
	if len(adopted) != 1 || adopted[0] != first {
		t.Fatalf("NewFSM adopted %v, want the first state", adopted)
	}
	// Non-command logs are left out of Applied; the commands arrive in order.
	conf := &raft.Log{Index: 1, Type: raft.LogConfiguration}
	for i, l := range logs {
		l.Index = uint64(i + 2)
	}
	f.Apply(conf)
	f.ApplyBatch(logs[:70])
	f.ApplyBatch(logs[70:])
	if len(cmds) != len(logs) || !reflect.DeepEqual(results, want) {
		t.Fatalf("Applied saw %d commands and results %v, want %d and the state machine's", len(cmds), len(results), len(logs))
	}
	for i := range cmds {
		var c fsm.Command
		if err := fsm.DecodeInto(&c, logs[i].Data); err != nil || !reflect.DeepEqual(cmds[i], c) {
			t.Fatalf("Applied's command %d differs from the log's", i)
		}
	}

	// The lock is the owner's: the FSM takes it for writing while it applies.
	mu.RLock()
	applied := make(chan struct{})
	go func() { f.ApplyBatch(logs[:1]); close(applied) }()
	select {
	case <-applied:
		t.Fatal("the FSM applied while the owner held its lock")
	case <-time.After(20 * time.Millisecond):
	}
	mu.RUnlock()
	<-applied

	// Restore adopts the snapshot's state under the lock.
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memorySink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(io.NopCloser(sink.Reader())); err != nil {
		t.Fatal(err)
	}
	if len(adopted) != 2 || !locked[0] || !locked[1] {
		t.Fatalf("adopted %d states (want 2), under the lock %v", len(adopted), locked)
	}
	f.View(func(st *fsm.State, _ uint64) {
		if st != adopted[1] {
			t.Fatal("the owner was not told of the restored state")
		}
	})
}

func TestAnEnvelopeAppliesEachCommandAsItsOwnLog(t *testing.T) {
	ref := fsm.New()
	logs, want := commandLogs(t, 4, 300, ref)
	f := NewFSM(fsm.New(), 0, FSMOptions{})
	var datas [][]byte
	for _, l := range logs {
		datas = append(datas, l.Data)
	}
	// 300 commands in envelopes of 1 (a plain log), 2, 97 and 200.
	var got []Applied
	index := uint64(0)
	for _, part := range [][][]byte{datas[:1], datas[1:3], datas[3:100], datas[100:]} {
		index++
		data := part[0]
		if len(part) > 1 {
			data = appendEnvelope(nil, part)
			if len(data) != envelopeLen(part) {
				t.Fatalf("envelopeLen = %d, the envelope has %d bytes", envelopeLen(part), len(data))
			}
		}
		switch r := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}).(type) {
		case fsm.Result:
			got = append(got, Applied{Result: r})
		case []Applied:
			got = append(got, r...)
		default:
			t.Fatalf("log %d: response %T %v", index, r, r)
		}
	}
	for i := range want {
		if got[i].Err != nil || !reflect.DeepEqual(got[i].Result, want[i]) {
			t.Fatalf("command %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	f.View(func(st *fsm.State, applied uint64) {
		if !bytes.Equal(stateBytes(t, st), stateBytes(t, ref)) || applied != index {
			t.Fatalf("the state differs from the state machine's, or applied = %d (want %d)", applied, index)
		}
	})
}

func TestDecodeCommandsReadsAPlainLogAndAnEnvelope(t *testing.T) {
	admit := func(id string) []byte {
		return encodeCommand(t, &fsm.Command{Kind: fsm.KindAdmit, Now: 5, ExecutionID: id, WorkflowID: "w"})
	}
	for _, tc := range []struct {
		name string
		data []byte
		ids  []string // nil: an error wrapping fsm.ErrDecode
	}{
		{"a plain log", admit("a"), []string{"a"}},
		{"an envelope", appendEnvelope(nil, [][]byte{admit("a"), admit("b"), admit("c")}), []string{"a", "b", "c"}},
		{"bad framing", appendEnvelope(nil, [][]byte{admit("a"), admit("b")})[:5], nil},
		{"a bad command inside", appendEnvelope(nil, [][]byte{admit("a"), {fsm.CodecVersion + 1, 1}}), nil},
		{"a bad plain log", []byte{fsm.CodecVersion + 1, 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmds, err := DecodeCommands(tc.data)
			if tc.ids == nil {
				if !errors.Is(err, fsm.ErrDecode) {
					t.Fatalf("DecodeCommands = %v, %v; want an error wrapping fsm.ErrDecode", cmds, err)
				}
				return
			}
			var ids []string
			for _, c := range cmds {
				ids = append(ids, c.ExecutionID)
			}
			if err != nil || !slices.Equal(ids, tc.ids) {
				t.Fatalf("DecodeCommands = %v, %v; want %v", ids, err, tc.ids)
			}
		})
	}
}

func TestAnEnvelopeWithBadFramingAppliesNothingAndABadCommandOnlyItself(t *testing.T) {
	admit := func(id string) []byte {
		return encodeCommand(t, &fsm.Command{Kind: fsm.KindAdmit, Now: 5, ExecutionID: id, WorkflowID: "w"})
	}
	good := appendEnvelope(nil, [][]byte{admit("a"), admit("b")})
	for name, data := range map[string][]byte{
		"count of one":        append([]byte{envelopeMagic, 1, byte(len(admit("a")))}, admit("a")...),
		"count past the data": append([]byte{envelopeMagic, 9}, good[2:]...),
		"length past the end": good[:len(good)-1],
		"bytes left over":     append(slices.Clone(good), 0),
		"zero length":         append(slices.Clone(good[:2]), 0, 0),
		"varint not minimal":  append([]byte{envelopeMagic, 0x82, 0x00}, good[2:]...),
		"nothing but magic":   {envelopeMagic},
	} {
		f := NewFSM(fsm.New(), 0, FSMOptions{})
		res := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data})
		if err, ok := res.(*CommandError); !ok || !errors.Is(err, ErrBadCommand) || !errors.Is(err, fsm.ErrDecode) {
			t.Errorf("%s: response %T %v, want a *CommandError", name, res, res)
		}
		f.View(func(st *fsm.State, applied uint64) {
			if st.Len() != 0 || applied != 1 {
				t.Errorf("%s: %d records after it (applied %d), want none", name, st.Len(), applied)
			}
		})
	}

	// A command that does not decode is its own outcome; the others apply.
	f := NewFSM(fsm.New(), 0, FSMOptions{})
	res := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: appendEnvelope(nil, [][]byte{admit("a"), {fsm.CodecVersion + 1, 1}, admit("b")})})
	each, ok := res.([]Applied)
	if !ok || len(each) != 3 || each[0].Err != nil || each[2].Err != nil || !errors.Is(each[1].Err, ErrBadCommand) {
		t.Fatalf("response %T %+v, want the middle command's error alone", res, res)
	}
	f.View(func(st *fsm.State, _ uint64) {
		if st.Len() != 2 {
			t.Fatalf("%d records, want the two good admissions", st.Len())
		}
	})
}
