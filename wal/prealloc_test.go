package wal

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore/internal/prealloc"
	"github.com/execstore/execstore/vfs"
)

// wrapped is the operating system's filesystem behind a wrapper: any FS but vfs.Default,
// on which the log prepares its next segment's file inline, in the Write that asks for it.
var wrapped = vfs.WithFaults(vfs.Default, nil)

// The log prepares the next segment's file in the background on the operating system's
// filesystem only: on any other, in the Write that asks for it, so that a filesystem that
// observes the log sees one sequence of operations for one sequence of calls.
func TestTheLogPreparesInTheBackgroundOnlyOnTheOperatingSystemsFilesystem(t *testing.T) {
	if !prepareInBackground(vfs.Default) {
		t.Fatal("no background preparation on vfs.Default")
	}
	if prepareInBackground(wrapped) {
		t.Fatal("background preparation on a wrapped filesystem")
	}
	var ops []string
	fs := vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		if filepath.Base(op.Path) == prealloc.Name {
			ops = append(ops, op.Kind.String())
		}
		return nil
	})
	l := openLog(t, t.TempDir(), Options{SegmentSize: 4096, FS: fs})
	defer closeLog(t, l)
	writeBatch(t, l, 1100) // past a quarter of the segment
	if want := []string{"create", "write", "sync", "synced"}; !slices.Equal(ops, want) {
		t.Fatalf("operations on the prepared file when the Write that asked for it returned: %q, want %q", ops, want)
	}
}

// waitPrepared polls, with a bound, until the log's preallocator has a prepared file ready.
func waitPrepared(t *testing.T, l *Log) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l.pre.Ready() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no prepared segment file within 10 s: %+v", l.pre.Counts())
		}
		time.Sleep(time.Millisecond)
	}
}

// prepared reports the size of the prepared file in dir, or -1 if there is none.
func prepared(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, prealloc.Name))
	if os.IsNotExist(err) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// A durable log prepares the next segment's file once the tail holds a quarter of a small
// SegmentSize, leaves the first segment (written by appending) for it once that holds twice
// as much, writes the entries over its zeros, cuts the segment it closes to its entries,
// starts the next segment on the next prepared file when it is full, and reads everything
// back after a reopen.
func TestTheNextSegmentStartsOnAPreparedFile(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "background", true: "inline"}[inline], func(t *testing.T) {
			const seg = 4096
			dir := t.TempDir()
			var fs vfs.FS // vfs.Default: the preparation runs in the background
			if inline {
				fs = wrapped
			}
			opts := Options{SegmentSize: seg, FS: fs}
			l := openLog(t, dir, opts)
			want := writeBatch(t, l, 500) // an eighth of the segment: not yet
			if got := prepared(t, dir); got != -1 || l.pre.Counts().Prepared != 0 {
				t.Fatalf("prepared file of %d bytes below a quarter of the segment, want none", got)
			}
			want = append(want, writeBatch(t, l, 600)...) // past a quarter
			if !inline {
				waitPrepared(t, l)
			}
			size := int64(seg + prealloc.Slack(seg))
			if got := prepared(t, dir); got != size {
				t.Fatalf("prepared file of %d bytes, want %d", got, size)
			}
			for len(segmentFiles(t, dir)) < 2 {
				want = append(want, writeBatch(t, l, 700)...)
			}
			c := l.pre.Counts()
			if c.Taken != 1 || c.Appended != 1 { // the first segment of a new log is appended
				t.Fatalf("counts %+v, want the second segment taken from the prepared file", c)
			}
			names := segmentFiles(t, dir)
			first, second := readFile(t, filepath.Join(dir, names[0])), readFile(t, filepath.Join(dir, names[1]))
			if first[len(first)-1] == 0 || len(first) < 2*seg/4 || len(first) >= seg {
				t.Fatalf("first segment of %d bytes ending in %#x: want it left, once it held %d bytes, at its last entry",
					len(first), first[len(first)-1], 2*seg/4)
			}
			if int64(len(second)) != size || !bytes.HasSuffix(second, make([]byte, 100)) {
				t.Fatalf("new segment of %d bytes: want the prepared %d, entries then zeros", len(second), size)
			}
			// The second fills up; the third starts on the next prepared file.
			for len(segmentFiles(t, dir)) < 3 {
				want = append(want, writeBatch(t, l, 700)...)
			}
			names = segmentFiles(t, dir)
			second = readFile(t, filepath.Join(dir, names[1]))
			if c := l.pre.Counts(); c.Taken != 2 || len(second) < seg || second[len(second)-1] == 0 {
				t.Fatalf("counts %+v, second segment %d bytes: want it full and cut to its entries, the third prepared", c, len(second))
			}
			if !inline {
				// What is prepared next may still be under way: Close stops it and removes it.
				want = append(want, writeBatch(t, l, 1200)...)
			}
			checkEntries(t, l, want)
			closeLog(t, l)
			if got := prepared(t, dir); got != -1 {
				t.Fatalf("Close left a prepared file of %d bytes", got)
			}
			l = openLog(t, dir, opts)
			defer closeLog(t, l)
			if l.TailRepair() != nil {
				t.Fatalf("reopen repaired %v", l.TailRepair())
			}
			checkEntries(t, l, want)
		})
	}
}

// A preparation that fails costs only the speed-up: it is logged, the segment is written by
// appending, and the next segment tries again.
func TestAFailedPreparationIsLoggedAndTheSegmentAppended(t *testing.T) {
	const seg = 2048
	dir := t.TempDir()
	var logs syncBuffer
	opts := Options{SegmentSize: seg, FS: wrapped,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	l := openLog(t, dir, opts)
	defer closeLog(t, l)
	// A directory where the prepared file goes: creating the file fails.
	if err := os.Mkdir(filepath.Join(dir, prealloc.Name), 0o750); err != nil {
		t.Fatal(err)
	}
	want := writeBatch(t, l, 700)
	if c := l.pre.Counts(); c.Failed != 1 || c.Prepared != 0 {
		t.Fatalf("counts %+v, want one failed preparation", c)
	}
	if !strings.Contains(logs.String(), "could not prepare the next segment") {
		t.Fatalf("no warning logged: %q", logs.String())
	}
	want = append(want, writeBatch(t, l, 700)...) // no second try within the segment
	if c := l.pre.Counts(); c.Failed != 1 {
		t.Fatalf("counts %+v: tried again within the segment", c)
	}
	if err := os.Remove(filepath.Join(dir, prealloc.Name)); err != nil {
		t.Fatal(err)
	}
	for len(segmentFiles(t, dir)) < 3 {
		want = append(want, writeBatch(t, l, 700)...)
	}
	c := l.pre.Counts()
	if c.Appended < 2 || c.Taken < 1 || c.Prepared < 1 {
		t.Fatalf("counts %+v: want the second segment appended, a later one prepared and taken", c)
	}
	checkEntries(t, l, want)
}

// A prepared file that is not the one the log prepared (replaced behind its back) is never
// taken: the segment is appended instead.
func TestAReplacedPreparedFileIsNotTaken(t *testing.T) {
	const seg = 2048
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentSize: seg, FS: wrapped})
	defer closeLog(t, l)
	want := writeBatch(t, l, 700)
	path := filepath.Join(dir, prealloc.Name)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	stranger := bytes.Repeat([]byte{0xee}, seg)
	writeFile(t, path, stranger)
	for len(segmentFiles(t, dir)) < 2 {
		want = append(want, writeBatch(t, l, 700)...)
	}
	if c := l.pre.Counts(); c.Taken != 0 {
		t.Fatalf("counts %+v: took a file it did not prepare", c)
	}
	if got := readFile(t, path); !bytes.Equal(got, stranger) {
		t.Fatal("the file put in place of the prepared one was changed")
	}
	checkEntries(t, l, want)
}

// Open removes a prepared file that a stopped log left; a log with NoSync prepares nothing.
func TestPreparedFilesAcrossOpenAndNoSync(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 1024, FS: wrapped}
	l := openLog(t, dir, opts)
	want := writeBatch(t, l, 400)
	abandon(l)
	if prepared(t, dir) < 0 {
		t.Fatal("no prepared file after a write past a quarter of the segment")
	}
	l = openLog(t, dir, Options{SegmentSize: 1024, NoSync: true})
	if got := prepared(t, dir); got != -1 {
		t.Fatalf("Open left the stopped log's prepared file (%d bytes)", got)
	}
	for len(segmentFiles(t, dir)) < 3 {
		want = append(want, writeBatch(t, l, 400)...)
	}
	if l.pre != nil || prepared(t, dir) != -1 {
		t.Fatal("a NoSync log prepared a segment file")
	}
	checkEntries(t, l, want)
	closeLog(t, l)
}

// Writes, the background preparation and Close run concurrently without a race, and
// whatever was prepared when Close came is gone after it.
func TestPreparationRacesWithWritesAndClose(t *testing.T) {
	for i := range 20 {
		dir := t.TempDir()
		l := openLog(t, dir, Options{SegmentSize: 1024})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := l.Write(batchOf(3, 100)); err != nil {
					return // closed
				}
			}
		}()
		for deadline := time.Now().Add(10 * time.Second); len(segmentFiles(t, dir)) < 3+i%5; {
			if time.Now().After(deadline) {
				t.Fatalf("run %d: fewer than %d segments after 10 s", i, 3+i%5)
			}
			time.Sleep(100 * time.Microsecond)
		}
		closeLog(t, l)
		cancel()
		wg.Wait()
		if got := prepared(t, dir); got != -1 {
			t.Fatalf("run %d: Close left a prepared file of %d bytes", i, got)
		}
		l = openLog(t, dir, Options{SegmentSize: 1024, NoSync: true})
		replayAll(t, l)
		closeLog(t, l)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
