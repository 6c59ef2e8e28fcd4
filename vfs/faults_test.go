package vfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/execstore/execstore/vfs"
)

// recorder records the operations a fault-injecting FS reports, relative to dir, and fails
// the one whose description matches fail.
type recorder struct {
	dir  string
	ops  []string
	fail string
}

var errInjected = errors.New("injected")

func (r *recorder) inject(op vfs.Op) error {
	s := strings.ReplaceAll(op.String(), r.dir+string(filepath.Separator), "")
	s = strings.ReplaceAll(s, r.dir, ".")
	r.ops = append(r.ops, s)
	if s == r.fail {
		return errInjected
	}
	return nil
}

// Every operation that changes the namespace or a file is reported before it happens, and
// every sync before and after, each with the path it acts on; reads are not.
func TestWithFaultsReportsEveryChangeAndEverySync(t *testing.T) {
	dir := t.TempDir()
	r := &recorder{dir: dir}
	fsys := vfs.WithFaults(vfs.Default, r.inject)
	path := func(name string) string { return filepath.Join(dir, name) }

	if err := fsys.MkdirAll(path("sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create(path("a"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("hello"))
	f.WriteAt([]byte("j"), 0)
	f.Truncate(4)
	f.Sync()
	f.SyncData()
	f.Close()
	g, _ := fsys.CreateNew(path("b"))
	g.Close()
	h, _ := fsys.ReuseForWrite(path("b"), path("c"))
	h.Write([]byte("x"))
	h.Close()
	fsys.Rename(path("a"), path("d"))
	vfs.ReadFile(fsys, path("d"))
	fsys.List(dir)
	fsys.Stat(path("d"))
	vfs.SyncDir(fsys, dir)
	fsys.Remove(path("c"))
	fsys.RemoveAll(path("sub"))
	l, _ := fsys.Lock(path("LOCK"))
	l.Close()

	want := []string{
		"mkdir-all sub",
		"create a", "write a", "write a", "truncate a", "sync a", "synced a", "sync-data a", "synced a",
		"create b",
		"reuse-for-write b -> c", "write c",
		"rename a -> d",
		"sync .", "synced .",
		"remove c", "remove-all sub",
		"lock LOCK",
	}
	if !slices.Equal(r.ops, want) {
		t.Fatalf("reported\n%q\nwant\n%q", r.ops, want)
	}
	if data, _ := os.ReadFile(path("d")); string(data) != "jell" {
		t.Fatalf("d holds %q: the wrapper changed what was written", data)
	}
}

// An error returned before an operation fails it with that error, and it does not happen.
func TestAnInjectedErrorFailsTheOperationWithoutDoingIt(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	mustWrite(t, path("f"), []byte("data"))
	cases := []struct {
		fail  string
		do    func(vfs.FS) error
		check func() bool // true if the operation did not happen
	}{
		{"create new", func(fsys vfs.FS) error { _, err := fsys.Create(path("new")); return err },
			func() bool { _, err := os.Stat(path("new")); return errors.Is(err, fs.ErrNotExist) }},
		{"rename f -> g", func(fsys vfs.FS) error { return fsys.Rename(path("f"), path("g")) },
			func() bool { _, err := os.Stat(path("f")); return err == nil }},
		{"remove f", func(fsys vfs.FS) error { return fsys.Remove(path("f")) },
			func() bool { _, err := os.Stat(path("f")); return err == nil }},
		{"write f", func(fsys vfs.FS) error {
			f, err := fsys.OpenReadWrite(path("f"))
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Write([]byte("XXXX"))
			return err
		}, func() bool { return string(mustRead(t, path("f"))) == "data" }},
		{"truncate f", func(fsys vfs.FS) error {
			f, err := fsys.OpenReadWrite(path("f"))
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(0)
		}, func() bool { return string(mustRead(t, path("f"))) == "data" }},
		{"sync f", func(fsys vfs.FS) error {
			f, err := fsys.OpenReadWrite(path("f"))
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Sync()
		}, func() bool { return true }},
	}
	for _, c := range cases {
		t.Run(c.fail, func(t *testing.T) {
			r := &recorder{dir: dir, fail: c.fail}
			if err := c.do(vfs.WithFaults(vfs.Default, r.inject)); !errors.Is(err, errInjected) {
				t.Fatalf("got %v, want the injected error", err)
			}
			if !c.check() {
				t.Fatal("the operation happened")
			}
			if last := r.ops[len(r.ops)-1]; last != c.fail {
				t.Fatalf("reported %q after the failed operation", r.ops)
			}
		})
	}
}

// An error returned after a sync fails it, though what it synced is durable: the answer
// was lost, not the data.
func TestAnErrorAfterASyncFailsItWithTheDataWritten(t *testing.T) {
	dir := t.TempDir()
	r := &recorder{dir: dir, fail: "synced f"}
	fsys := vfs.WithFaults(vfs.Default, r.inject)
	f, err := fsys.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); !errors.Is(err, errInjected) {
		t.Fatalf("SyncData = %v, want the injected error", err)
	}
	if want := []string{"create f", "write f", "sync-data f", "synced f"}; !slices.Equal(r.ops, want) {
		t.Fatalf("reported %q, want %q", r.ops, want)
	}
	if got := mustRead(t, filepath.Join(dir, "f")); string(got) != "data" {
		t.Fatalf("f holds %q", got)
	}
}

// A nil injector reports to nobody: the wrapper is the FS it wraps.
func TestWithFaultsWithoutAnInjectorChangesNothing(t *testing.T) {
	dir := t.TempDir()
	fsys := vfs.WithFaults(vfs.Default, nil)
	if err := vfs.WriteFile(fsys, filepath.Join(dir, "f"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := vfs.SyncDir(fsys, dir); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, filepath.Join(dir, "f")); string(got) != "x" {
		t.Fatalf("f holds %q", got)
	}
}
