package prealloc

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	tidwall "github.com/execstore/execstore/internal/tidwall/wal"
)

// The raw log starts on a prepared file, prepares the next segments as it writes, and reads
// back what it wrote.
func TestRawLogWritesOverPreparedSegments(t *testing.T) {
	const seg = 8 << 10
	dir := t.TempDir()
	r, err := OpenRaw(dir, seg)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%020d", 1))); err != nil || fi.Size() != int64(seg+Slack(seg)) {
		t.Fatalf("first segment: %v, %v; want a prepared file of %d bytes", fi, err, seg+Slack(seg))
	}
	var b tidwall.Batch
	next := uint64(1)
	for range 200 {
		for range 4 {
			b.Write(next, fmt.Appendf(nil, "entry %d", next))
			next++
		}
		if err := r.WriteSync(&b); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); r.pre.Counts().Taken == 0 && time.Now().Before(deadline); {
		// Segments may be written faster than a background preparation finishes: write until
		// one was taken.
		b.Write(next, fmt.Appendf(nil, "entry %d", next))
		next++
		if err := r.WriteSync(&b); err != nil {
			t.Fatal(err)
		}
	}
	if c := r.pre.Counts(); c.Taken == 0 {
		t.Fatalf("counts %+v: no later segment was started on a prepared file", c)
	}
	for i := uint64(1); i < next; i++ {
		got, err := r.Read(i)
		if err != nil || string(got) != fmt.Sprintf("entry %d", i) {
			t.Fatalf("Read(%d) = %q, %v", i, got, err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, Name)); !os.IsNotExist(err) {
		t.Fatalf("Close left the prepared file (%v)", err)
	}
}
