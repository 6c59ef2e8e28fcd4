package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/execstore/execstore/vfs"
)

// zeroSegments is a NewSegment that creates each segment file filled with
// size zero bytes, as a preallocating caller does, and counts them.
func zeroSegments(size int, made *int) func(string) (vfs.File, error) {
	return func(path string) (vfs.File, error) {
		f, err := vfs.Default.Create(path)
		if err != nil {
			return nil, err
		}
		if _, err := f.Write(make([]byte, size)); err != nil {
			f.Close()
			return nil, err
		}
		*made++
		return f, nil
	}
}

func entry(i uint64) []byte {
	return fmt.Appendf(nil, "entry-%d-%s", i, bytes.Repeat([]byte{'x'}, int(i%7)))
}

// A padded log writes its tail over the zeros a new segment file starts with,
// reads the zeros after its entries as padding when it opens again, and cuts
// the padding off a segment when the next one starts.
func TestPaddedSegments(t *testing.T) {
	const seg, pad = 1024, 1536
	dir := t.TempDir()
	made := 0
	opts := func() *Options {
		return &Options{NoSync: true, SegmentSize: seg, LogFormat: Binary, Padded: true, NewSegment: zeroSegments(pad, &made)}
	}
	l, err := Open(dir, opts())
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := uint64(1); i <= n; i++ {
		if err := l.Write(i, entry(i)); err != nil {
			t.Fatal(err)
		}
		if i == 10 { // reopen in the middle of the first segment
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if l, err = Open(dir, opts()); err != nil {
				t.Fatal(err)
			}
		}
	}
	tail, err := l.TailSize()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob(filepath.Join(dir, "0*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 3 || made != len(names) {
		t.Fatalf("%d segment files, %d made by NewSegment: want at least 3, all made by it", len(names), made)
	}
	for i, name := range names {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		last := i == len(names)-1
		if last && fi.Size() != pad {
			t.Errorf("tail %s: %d bytes, want the padded %d", filepath.Base(name), fi.Size(), pad)
		}
		if !last {
			data, _ := os.ReadFile(name)
			if data[len(data)-1] == 0 || fi.Size() < seg {
				t.Errorf("segment %s: %d bytes ending in %#x: want it cut to its entries", filepath.Base(name), fi.Size(), data[len(data)-1])
			}
		}
	}
	l, err = Open(dir, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, _ := l.TailSize(); got != tail {
		t.Errorf("TailSize after reopening = %d, want %d", got, tail)
	}
	if last, _ := l.LastIndex(); last != n {
		t.Fatalf("LastIndex = %d, want %d", last, n)
	}
	for i := uint64(1); i <= n; i++ {
		got, err := l.Read(i)
		if err != nil || !bytes.Equal(got, entry(i)) {
			t.Fatalf("Read(%d) = %q, %v; want %q", i, got, err, entry(i))
		}
	}
	if err := l.Write(n+1, nil); !errors.Is(err, ErrEmptyEntry) {
		t.Errorf("writing an empty entry: %v, want ErrEmptyEntry", err)
	}
	if err := l.Write(n+1, entry(n+1)); err != nil {
		t.Fatalf("a write after the refused one: %v", err)
	}
}

// Cycle starts the next segment at once, after the tail's entries, and leaves
// an empty tail alone.
func TestCycleStartsTheNextSegmentNow(t *testing.T) {
	dir := t.TempDir()
	made := 0
	l, err := Open(dir, &Options{NoSync: true, SegmentSize: 1 << 20, LogFormat: Binary, Padded: true, NewSegment: zeroSegments(4096, &made)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Cycle(); err != nil || made != 1 {
		t.Fatalf("Cycle of an empty tail: %v, %d segment files made; want none more", err, made)
	}
	for i := uint64(1); i <= 3; i++ {
		if err := l.Write(i, entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Cycle(); err != nil || made != 2 {
		t.Fatalf("Cycle: %v, %d segment files made; want 2", err, made)
	}
	if err := l.Write(4, entry(4)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, segmentName(4))); err != nil {
		t.Fatalf("no segment starting at 4 after Cycle: %v", err)
	}
	for i := uint64(1); i <= 4; i++ {
		if got, err := l.Read(i); err != nil || !bytes.Equal(got, entry(i)) {
			t.Fatalf("Read(%d) = %q, %v", i, got, err)
		}
	}
}

// Padding is zeros to the end of the file: a non-zero byte after the first
// zero where an entry would start is damage.
func TestPaddingMustBeZeros(t *testing.T) {
	dir := t.TempDir()
	made := 0
	opts := &Options{NoSync: true, SegmentSize: 1 << 20, LogFormat: Binary, Padded: true, NewSegment: zeroSegments(4096, &made)}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		if err := l.Write(i, entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, segmentName(1))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{7}, 4000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if l, err := Open(dir, opts); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			l.Close()
		}
		t.Fatalf("Open with a non-zero byte in the padding: %v, want ErrCorrupt", err)
	}
}

// Without Padded, zeros are empty entries, as upstream reads them.
func TestUnpaddedZerosAreEmptyEntries(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, segmentName(1)), append([]byte{1, 'a'}, make([]byte, 3)...), 0o640); err != nil {
		t.Fatal(err)
	}
	l, err := Open(dir, &Options{NoSync: true, LogFormat: Binary})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if last, _ := l.LastIndex(); last != 4 {
		t.Fatalf("LastIndex = %d, want 4 (one entry, three empty ones)", last)
	}
}
