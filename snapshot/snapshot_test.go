package snapshot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/vfs"
)

// sampleState builds a small state through the state machine's own commands.
func sampleState(t testing.TB, n int) *fsm.State {
	t.Helper()
	st := fsm.New()
	now := int64(1_000)
	for i := 0; i < n; i++ {
		id := "e-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26))
		st.Apply(&fsm.Command{Kind: fsm.KindAdmit, Now: now, ExecutionID: id, WorkflowID: "w", Params: `{"i":1}`, HasParams: true})
	}
	r := st.Apply(&fsm.Command{Kind: fsm.KindClaim, Now: now, Limit: n / 2, Duration: 1e9})
	for i, l := range r.Leases {
		st.Apply(&fsm.Command{Kind: fsm.KindSaveStep, Now: now, ExecutionID: l.ExecutionID, Token: l.Token, Key: "s", Value: `1`})
		if i%2 == 0 {
			st.Apply(&fsm.Command{Kind: fsm.KindAcknowledge, Now: now, ExecutionID: l.ExecutionID, Token: l.Token,
				Outcome: fsm.Outcome{Status: fsm.StatusCompleted, Result: `"ok"`, HasRes: true}})
		}
	}
	st.Apply(&fsm.Command{Kind: fsm.KindCommit, Now: now, Writes: []fsm.Write{{Key: "k", Value: `1`, HasValue: true}}})
	return st
}

func encoded(t testing.TB, st *fsm.State) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := st.Encode(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestWrittenSnapshotReadsBackEqual(t *testing.T) {
	dir := t.TempDir()
	st := sampleState(t, 300)
	h := Header{Index: 42, Clock: st.Meta().Now, Records: uint64(st.Len())}
	info, err := Write(dir, st, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(info.Path) != "snapshot-00000000000000000042.snap" || info.Index != 42 {
		t.Fatalf("info = %+v", info)
	}
	got, gh, err := Read(vfs.Default, info.Path)
	if err != nil {
		t.Fatal(err)
	}
	if gh != h {
		t.Fatalf("header = %+v, want %+v", gh, h)
	}
	if !bytes.Equal(encoded(t, st), encoded(t, got)) {
		t.Fatal("the state read back differs from the state written")
	}
	if err := got.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestEveryCorruptionIsRefused(t *testing.T) {
	dir := t.TempDir()
	st := sampleState(t, 50)
	info, err := Write(dir, st, Header{Index: 1, Clock: st.Meta().Now, Records: uint64(st.Len())}, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(info.Path)
	bad := filepath.Join(dir, "bad.snap")
	// Flip each byte in turn (the checksum covers all of them) and cut at
	// many lengths: every variant is refused as corrupt.
	for i := 0; i < len(good); i += 1 + i/64 {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		os.WriteFile(bad, b, 0o640)
		if _, _, err := Read(vfs.Default, bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: err = %v, want ErrCorrupt", i, err)
		}
	}
	for n := 0; n < len(good); n += 1 + n/16 {
		os.WriteFile(bad, good[:n], 0o640)
		if _, _, err := Read(vfs.Default, bad); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", n)
		}
	}
}

func TestPruneKeepsTheNewestTwoAndRemovesTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	st := sampleState(t, 5)
	for _, idx := range []uint64{3, 10, 7, 12} {
		if _, err := Write(dir, st, Header{Index: idx, Clock: st.Meta().Now, Records: uint64(st.Len())}, Options{NoSync: true}); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, Name(13)+tmpSuffix), []byte("half a snapshot"), 0o640)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not ours"), 0o640)
	kept, err := Prune(dir, 2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 2 || kept[0].Index != 12 || kept[1].Index != 10 {
		t.Fatalf("kept = %+v", kept)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"notes.txt", Name(10), Name(12)}
	if len(names) != len(want) {
		t.Fatalf("left %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("left %v, want %v", names, want)
		}
	}
}

func TestListIgnoresForeignFilesAndSortsNewestFirst(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{Name(5), Name(50), Name(9), "snapshot-12.snap", "snapshot-00000000000000000007.snap.tmp", "other"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o640)
	}
	infos, err := List(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 3 || infos[0].Index != 50 || infos[1].Index != 9 || infos[2].Index != 5 {
		t.Fatalf("List = %+v", infos)
	}
	if none, err := List(vfs.Default, filepath.Join(dir, "missing")); err != nil || len(none) != 0 {
		t.Fatalf("missing dir: %v %v", none, err)
	}
}

func FuzzRead(f *testing.F) {
	dir := f.TempDir()
	st := sampleState(f, 20)
	info, _ := Write(dir, st, Header{Index: 1, Clock: st.Meta().Now, Records: uint64(st.Len())}, Options{NoSync: true})
	good, _ := os.ReadFile(info.Path)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "f.snap")
		os.WriteFile(path, b, 0o640)
		st, _, err := Read(vfs.Default, path)
		if err == nil && st.CheckInvariants() != nil && bytes.Equal(b, good) {
			t.Fatal("the good snapshot fails its invariants")
		}
	})
}

// failAt is the operating system's filesystem, failing with err every operation of kind on
// a path match accepts.
func failAt(kind vfs.OpKind, match func(path string) bool, err error) vfs.FS {
	return vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		if op.Kind == kind && match(op.Path) {
			return err
		}
		return nil
	})
}

func isTemp(p string) bool { return strings.HasSuffix(p, tmpSuffix) }

// Every injected error in writing or pruning fails the call: no storage error is ever
// ignored, so the crash simulator's faults reach the caller.
func TestEveryInjectedFaultFailsWriteOrPrune(t *testing.T) {
	st := sampleState(t, 20)
	errInjected := errors.New("injected")
	cases := []struct {
		name string
		fs   vfs.FS
	}{
		{"before the temporary file is written", failAt(vfs.OpCreate, isTemp, errInjected)},
		{"while the temporary file is written", failAt(vfs.OpWrite, isTemp, errInjected)},
		{"before the rename", failAt(vfs.OpRename, isTemp, errInjected)},
		{"before the file's fsync", failAt(vfs.OpSync, isTemp, errInjected)},
		{"after the file's fsync", failAt(vfs.OpSynced, isTemp, errInjected)},
		{"before the directory's fsync", failAt(vfs.OpSync, func(p string) bool { return filepath.Base(p) == "snaps" }, errInjected)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "snaps")
			opts := Options{FS: c.fs}
			if _, err := Write(dir, st, Header{Index: 7, Clock: st.Meta().Now, Records: uint64(st.Len())}, opts); !errors.Is(err, errInjected) {
				t.Fatalf("Write returned %v, want the injected error", err)
			}
		})
	}
	t.Run("before a removal in Prune", func(t *testing.T) {
		dir := t.TempDir()
		for _, i := range []uint64{1, 2, 3} {
			if _, err := Write(dir, st, Header{Index: i, Clock: st.Meta().Now, Records: uint64(st.Len())}, Options{}); err != nil {
				t.Fatal(err)
			}
		}
		opts := Options{FS: failAt(vfs.OpRemove, func(string) bool { return true }, errInjected)}
		if _, err := Prune(dir, 2, opts); !errors.Is(err, errInjected) {
			t.Fatalf("Prune returned %v, want the injected error", err)
		}
	})
}

// A snapshot whose directory fsync failed is not left under its name: List
// would count it as one of the snapshots kept, and the store would truncate
// its log behind a file whose name a crash may lose.
func TestAWriteWhoseDirectoryFsyncFailsLeavesNoSnapshot(t *testing.T) {
	st := sampleState(t, 20)
	dir := filepath.Join(t.TempDir(), "snaps")
	errInjected := errors.New("injected")
	opts := Options{FS: failAt(vfs.OpSync, func(p string) bool { return p == dir }, errInjected)}
	if _, err := Write(dir, st, Header{Index: 7, Clock: st.Meta().Now, Records: uint64(st.Len())}, opts); !errors.Is(err, errInjected) {
		t.Fatalf("Write returned %v, want the injected error", err)
	}
	infos, err := List(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 0 {
		t.Fatalf("a failed Write left %v", infos)
	}
}

// Writing the same index again replaces the file with the same state; if
// that directory fsync fails, the earlier file (whose name was durable) stays.
func TestAFailedRewriteOfTheSameIndexKeepsTheEarlierSnapshot(t *testing.T) {
	st := sampleState(t, 20)
	dir := filepath.Join(t.TempDir(), "snaps")
	h := Header{Index: 7, Clock: st.Meta().Now, Records: uint64(st.Len())}
	if _, err := Write(dir, st, h, Options{}); err != nil {
		t.Fatal(err)
	}
	errInjected := errors.New("injected")
	opts := Options{FS: failAt(vfs.OpSync, func(p string) bool { return p == dir }, errInjected)}
	if _, err := Write(dir, st, h, opts); !errors.Is(err, errInjected) {
		t.Fatalf("Write returned %v, want the injected error", err)
	}
	infos, err := List(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Index != 7 {
		t.Fatalf("after a failed rewrite: %v", infos)
	}
	if _, err := Verify(vfs.Default, infos[0].Path); err != nil {
		t.Fatal(err)
	}
}
