package vfs_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/execstore/execstore/vfs"
)

func mustWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// ReuseForWrite renames a prepared file and writes over it from its start, keeping what is
// not written over: how a log starts a segment on a file of zeros.
func TestReuseForWriteWritesOverThePreparedFileFromItsStart(t *testing.T) {
	dir := t.TempDir()
	prepared, segment := filepath.Join(dir, "prepared"), filepath.Join(dir, "segment")
	mustWrite(t, prepared, make([]byte, 8))
	f, err := vfs.Default.ReuseForWrite(prepared, segment)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("z"), 5); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := mustRead(t, segment), []byte("abc\x00\x00z\x00\x00"); !bytes.Equal(got, want) {
		t.Fatalf("segment holds %q, want %q", got, want)
	}
	if _, err := os.Stat(prepared); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the prepared name is still there (%v)", err)
	}
}

// CreateNew never takes over a file that exists; Create truncates it; OpenReadWrite neither
// creates nor truncates.
func TestCreateNewRefusesAFileThatExists(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	mustWrite(t, path, []byte("kept"))
	if _, err := vfs.Default.CreateNew(path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("CreateNew of an existing file = %v, want fs.ErrExist", err)
	}
	if _, err := vfs.Default.OpenReadWrite(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenReadWrite of a missing file = %v, want fs.ErrNotExist", err)
	}
	f, err := vfs.Default.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("K")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := mustRead(t, path); string(got) != "Kept" {
		t.Fatalf("after OpenReadWrite and a write at its start: %q", got)
	}
	f, err = vfs.Default.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := mustRead(t, path); len(got) != 0 {
		t.Fatalf("Create left %q", got)
	}
}

// A directory's lock is held by one owner at a time, and released by closing it.
func TestLockIsExclusiveUntilClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOCK")
	l, err := vfs.Default.Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vfs.Default.Lock(path); err == nil {
		t.Fatal("a second Lock of a held lock succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = vfs.Default.Lock(path)
	if err != nil {
		t.Fatalf("Lock after the holder closed it: %v", err)
	}
	l.Close()
}

// List names a directory's entries, files and directories, sorted; ReadFile and WriteFile
// round-trip a file's bytes.
func TestListIsSortedAndFilesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b", "c", "a"} {
		if err := vfs.WriteFile(vfs.Default, filepath.Join(dir, name), []byte(name+name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := vfs.Default.MkdirAll(filepath.Join(dir, "d", "e"), 0o750); err != nil {
		t.Fatal(err)
	}
	names, err := vfs.Default.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(names, want) {
		t.Fatalf("List = %q, want %q", names, want)
	}
	data, err := vfs.ReadFile(vfs.Default, filepath.Join(dir, "b"))
	if err != nil || string(data) != "bb" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	if err := vfs.SyncDir(vfs.Default, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := vfs.ReadFile(vfs.Default, filepath.Join(dir, "x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile of a missing file = %v", err)
	}
}
