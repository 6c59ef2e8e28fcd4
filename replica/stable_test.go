package replica

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/execstore/execstore/vfs"
)

func openStable(t testing.TB, dir string, opts StableOptions) *StableStore {
	t.Helper()
	s, err := OpenStableStore(dir, opts)
	if err != nil {
		t.Fatalf("OpenStableStore: %v", err)
	}
	return s
}

func TestStableStoreKeepsEveryKeyAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStable(t, dir, StableOptions{})
	steps := []struct {
		name string
		do   func(s *StableStore) error
	}{
		{"set the term", func(s *StableStore) error { return s.SetUint64([]byte("CurrentTerm"), 3) }},
		{"set the vote's term", func(s *StableStore) error { return s.SetUint64([]byte("LastVoteTerm"), 3) }},
		{"set the candidate", func(s *StableStore) error { return s.Set([]byte("LastVoteCand"), []byte("node-2")) }},
		{"raise the term", func(s *StableStore) error { return s.SetUint64([]byte("CurrentTerm"), 1<<63+5) }},
		{"set an empty value", func(s *StableStore) error { return s.Set([]byte("empty"), nil) }},
	}
	for _, st := range steps {
		if err := st.do(s); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openStable(t, dir, StableOptions{})
	}
	defer s.Close()
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 1<<63+5 {
		t.Fatalf("CurrentTerm = %d, %v; want %d", v, err, uint64(1<<63+5))
	}
	if v, err := s.GetUint64([]byte("LastVoteTerm")); err != nil || v != 3 {
		t.Fatalf("LastVoteTerm = %d, %v; want 3", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-2" {
		t.Fatalf("LastVoteCand = %q, %v; want node-2", v, err)
	}
	if v, err := s.Get([]byte("empty")); err != nil || len(v) != 0 {
		t.Fatalf("empty = %q, %v", v, err)
	}
}

func TestStableStoreAnswersAKeyNeverSetWithNothing(t *testing.T) {
	s := openStable(t, t.TempDir(), StableOptions{})
	defer s.Close()
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || len(v) != 0 {
		t.Fatalf("Get of a key never set = %q, %v; want empty, nil (raft.StableStore)", v, err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 0 {
		t.Fatalf("GetUint64 of a key never set = %d, %v; want 0, nil", v, err)
	}
}

func TestStableStoreReturnsCopies(t *testing.T) {
	s := openStable(t, t.TempDir(), StableOptions{NoSync: true})
	defer s.Close()
	val := []byte("node-1")
	if err := s.Set([]byte("k"), val); err != nil {
		t.Fatal(err)
	}
	val[0] = 'X'
	got, _ := s.Get([]byte("k"))
	got[1] = 'Y'
	if again, _ := s.Get([]byte("k")); string(again) != "node-1" {
		t.Fatalf("the stored value changed through a caller's slice: %q", again)
	}
}

func TestStableStoreRefusesBadInputAndChangesNothing(t *testing.T) {
	dir := t.TempDir()
	s := openStable(t, dir, StableOptions{})
	defer s.Close()
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("word"), []byte("abc")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, stableName))
	tests := []struct {
		name string
		do   func() error
		want error
	}{
		{"an empty key", func() error { return s.Set(nil, []byte("x")) }, ErrStableLimit},
		{"a key too long", func() error { return s.Set(bytes.Repeat([]byte("k"), MaxStableKeyBytes+1), nil) }, ErrStableLimit},
		{"a value too long", func() error { return s.Set([]byte("k"), make([]byte, MaxStableValueBytes+1)) }, ErrStableLimit},
		{"a uint64 read from a value of another size", func() error { _, err := s.GetUint64([]byte("word")); return err }, ErrBadValue},
	}
	for _, tt := range tests {
		if err := tt.do(); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(dir, stableName)); !bytes.Equal(after, before) {
		t.Fatal("a refused call changed the file")
	}
	for i := len(s.kv); i < MaxStableKeys; i++ {
		if err := s.Set([]byte{'n', byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Set([]byte("one too many"), nil); !errors.Is(err, ErrStableLimit) {
		t.Errorf("a key past MaxStableKeys: err = %v, want ErrStableLimit", err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("CurrentTerm = %d, %v after refused calls; want 7", v, err)
	}
}

func TestStableStoreRefusesADamagedFileAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := openStable(t, dir, StableOptions{})
	if err := s.SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-3")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, stableName)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	variants := map[string][]byte{"empty": {}, "a byte added": append(bytes.Clone(good), 0)}
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		variants["byte flipped at "+string(rune('a'+i%26))+strings.Repeat("'", i/26)] = b
	}
	for n := range len(good) {
		variants["cut to "+strings.Repeat("|", n)] = good[:n]
	}
	names := make([]string, 0, len(variants))
	for name := range variants {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := os.WriteFile(path, variants[name], 0o640); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenStableStore(dir, StableOptions{}); !errors.Is(err, ErrCorruptStable) {
			t.Fatalf("%s: OpenStableStore = %v, want ErrCorruptStable", name, err)
		}
	}
}

func TestStableStoreRemovesATemporaryFileLeftByACrash(t *testing.T) {
	dir := t.TempDir()
	s := openStable(t, dir, StableOptions{})
	if err := s.SetUint64([]byte("CurrentTerm"), 4); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A crash before the rename leaves the next contents in the temporary file, perhaps
	// half written; the file it was to replace is whole.
	if err := os.WriteFile(filepath.Join(dir, stableTemp), []byte("EXSTABLE\x01\x00"), 0o640); err != nil {
		t.Fatal(err)
	}
	s = openStable(t, dir, StableOptions{})
	defer s.Close()
	if v, _ := s.GetUint64([]byte("CurrentTerm")); v != 4 {
		t.Fatalf("CurrentTerm = %d, want 4", v)
	}
	if _, err := os.Stat(filepath.Join(dir, stableTemp)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file after open: %v", err)
	}
}

func TestStableStoreReplacesItsFileDurablyInOrder(t *testing.T) {
	dir := t.TempDir()
	var events []string
	recording := false
	fs := vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		if recording {
			name := filepath.Base(op.Path)
			if op.NewPath != "" {
				name += " -> " + filepath.Base(op.NewPath)
			}
			events = append(events, op.Kind.String()+" "+name)
		}
		return nil
	})
	s := openStable(t, dir, StableOptions{FS: fs})
	defer s.Close()
	recording = true
	if err := s.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	want := []string{"create stable.tmp", "write stable.tmp", "sync stable.tmp", "synced stable.tmp",
		"rename stable.tmp -> stable", "sync " + filepath.Base(dir), "synced " + filepath.Base(dir)}
	if !slices.Equal(events, want) {
		t.Fatalf("steps of a Set:\n got %q\nwant %q", events, want)
	}
}

func TestStableStoreFailStopsAfterAStorageError(t *testing.T) {
	for _, failAt := range []string{"create stable.tmp", "write stable.tmp", "sync stable.tmp", "rename stable.tmp", "sync dir"} {
		t.Run(failAt, func(t *testing.T) {
			dir := t.TempDir()
			armed := false
			injected := errors.New("injected")
			fs := vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
				name := filepath.Base(op.Path)
				if op.Path == dir {
					name = "dir"
				}
				if armed && op.Kind.String()+" "+name == failAt {
					return injected
				}
				return nil
			})
			s := openStable(t, dir, StableOptions{FS: fs})
			if err := s.SetUint64([]byte("CurrentTerm"), 1); err != nil {
				t.Fatal(err)
			}
			armed = true
			if err := s.SetUint64([]byte("CurrentTerm"), 2); !errors.Is(err, ErrStableFailed) || !errors.Is(err, injected) {
				t.Fatalf("Set whose %s fails = %v, want ErrStableFailed wrapping the injected error", failAt, err)
			}
			armed = false
			if err := s.SetUint64([]byte("CurrentTerm"), 3); !errors.Is(err, ErrStableFailed) {
				t.Fatalf("Set after a failure = %v, want ErrStableFailed", err)
			}
			if v, _ := s.GetUint64([]byte("CurrentTerm")); v != 1 {
				t.Fatalf("CurrentTerm in memory = %d after a failed Set, want 1", v)
			}
			s.Close()
			// Reopened, the store holds the old value or the new one, whole.
			s = openStable(t, dir, StableOptions{})
			defer s.Close()
			if v, _ := s.GetUint64([]byte("CurrentTerm")); v != 1 && v != 2 {
				t.Fatalf("CurrentTerm after reopen = %d, want 1 or 2", v)
			}
			if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
				t.Fatalf("Set after reopen: %v", err)
			}
		})
	}
}

func TestStableStoreRefusesCallsAfterClose(t *testing.T) {
	s := openStable(t, t.TempDir(), StableOptions{NoSync: true})
	s.Close()
	if err := s.Set([]byte("k"), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Set after Close = %v", err)
	}
	if _, err := s.Get([]byte("k")); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close = %v", err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v", err)
	}
}

func FuzzStableDecode(f *testing.F) {
	f.Add(encodeStable(map[string][]byte{"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 1}, "LastVoteCand": []byte("n1")}))
	f.Add(encodeStable(map[string][]byte{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		kv, err := decodeStable(b)
		if err != nil {
			return
		}
		if again := encodeStable(kv); !bytes.Equal(again, b) {
			t.Fatalf("decoded %x, re-encoded %x", b, again)
		}
	})
}
