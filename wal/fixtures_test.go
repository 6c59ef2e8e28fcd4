package wal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/execstore/execstore/internal/prealloc"
	"github.com/execstore/execstore/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// entry is one replayed entry.
type entry struct {
	Index   uint64
	Payload []byte
}

// payloadOf is the deterministic payload of index: size bytes (at least 1) that differ for
// every index, so a misplaced or mixed-up entry is caught.
func payloadOf(index uint64, size int) []byte {
	size = max(size, 1)
	r := rand.New(rand.NewPCG(index, uint64(size)))
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

func openLog(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return l
}

func closeLog(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// writeBatch appends one batch of payloads of the given sizes and returns the entries written.
func writeBatch(t testing.TB, l *Log, sizes ...int) []entry {
	t.Helper()
	var b Batch
	next := l.LastIndex() + 1
	want := make([]entry, len(sizes))
	for i, size := range sizes {
		want[i] = entry{Index: next + uint64(i), Payload: payloadOf(next+uint64(i), size)}
		b.Add(want[i].Payload)
	}
	first, err := l.Write(&b)
	if err != nil {
		t.Fatalf("Write(%d entries at %d): %v", len(sizes), next, err)
	}
	if first != next {
		t.Fatalf("Write returned first index %d, want %d", first, next)
	}
	return want
}

// sizes returns n copies of size.
func sizes(n, size int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = size
	}
	return out
}

func replayAll(t testing.TB, l *Log) []entry {
	t.Helper()
	var got []entry
	err := l.Replay(l.FirstIndex(), func(index uint64, payload []byte) error {
		got = append(got, entry{Index: index, Payload: bytes.Clone(payload)})
		return nil
	})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	return got
}

func checkEntries(t testing.TB, l *Log, want []entry) {
	t.Helper()
	got := replayAll(t, l)
	// cmp renders the difference but compares byte slices by reflection, slowly; the
	// every-offset tests call this hundreds of times, so compare by hand first.
	if entriesEqual(got, want) {
		return
	}
	t.Fatalf("replayed entries differ (-want +got):\n%s", cmp.Diff(want, got, cmpopts.EquateEmpty()))
}

func entriesEqual(a, b []entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Index != b[i].Index || !bytes.Equal(a[i].Payload, b[i].Payload) {
			return false
		}
	}
	return true
}

// segmentFiles lists the segment file names in dir, ascending.
func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	starts, err := listSegments(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(starts))
	for i, s := range starts {
		names[i] = segmentName(s)
	}
	return names
}

func lastSegment(t testing.TB, dir string) string {
	t.Helper()
	names := segmentFiles(t, dir)
	if len(names) == 0 {
		t.Fatalf("no segment in %s", dir)
	}
	return filepath.Join(dir, names[len(names)-1])
}

// sideFiles lists the torn-tail side files in dir.
func sideFiles(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "torn-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// entryBounds returns the end offset of every whole tidwall entry in a segment.
func entryBounds(t testing.TB, data []byte) []int {
	t.Helper()
	var ends []int
	for off := 0; off < len(data); {
		_, size, reason := nextEntry(data[off:])
		if reason != "" {
			t.Fatalf("segment does not parse at %d: %s", off, reason)
		}
		off += size
		ends = append(ends, off)
	}
	return ends
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

// compactSegmentSize makes segments of four or five 40-byte entries.
const compactSegmentSize = 300

// segmentedLog writes batches of three 40-byte entries until the log has at least n segment
// files, and returns every entry written.
func segmentedLog(t testing.TB, l *Log, dir string, n int) []entry {
	t.Helper()
	var all []entry
	for len(segmentFiles(t, dir)) < n {
		all = append(all, writeBatch(t, l, sizes(3, 40)...)...)
	}
	return all
}

// segmentStarts lists the first index of every segment file in dir.
func segmentStarts(t testing.TB, dir string) []uint64 {
	t.Helper()
	starts, err := listSegments(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	return starts
}

// errInjected is the storage error the fault tests inject.
var errInjected = fmt.Errorf("injected storage error")

// strays lists the files in dir matching pattern, less the next segment's prepared file,
// which a log keeps there while it is open (and a stopped one may leave).
func strays(t testing.TB, dir, pattern string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return filepath.Base(n) == prealloc.Name })
}

// abandon stops l as a process that dies would, without closing it: a preparation of the next
// segment's file under way finishes first, so that what the directory holds afterwards does
// not depend on timing.
func abandon(l *Log) { l.pre.Settle() }
