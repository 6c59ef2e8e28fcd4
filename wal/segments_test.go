package wal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// checkMirror fails unless the Log's prediction of tidwall's segment files equals the
// directory. It guards the directory fsync: a tidwall release that cycles segments by another
// rule makes this fail instead of silently skipping the fsync.
func checkMirror(t *testing.T, l *Log, dir string, step string) {
	t.Helper()
	if got, want := l.segs.names(), segmentFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("%s: predicted segments %v, directory holds %v", step, got, want)
	}
}

func TestSegmentPredictionMatchesTheDirectoryAfterEveryWrite(t *testing.T) {
	tests := []struct {
		name        string
		segmentSize int
		maxBatch    int
		maxPayload  int
	}{
		{"entries much smaller than segments", 1000, 12, 60},
		{"entries near the segment size", 150, 3, 200},
		{"segment smaller than any entry", 16, 5, 40},
		{"one-byte payloads", 97, 40, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{NoSync: true, SegmentSize: tt.segmentSize}
			l := openLog(t, dir, opts)
			r := rand.New(rand.NewPCG(uint64(tt.segmentSize), 7))
			for step := range 150 {
				switch {
				case step%50 == 49:
					// Reopening initialises the mirror from the tail file's size.
					closeLog(t, l)
					l = openLog(t, dir, opts)
				case step%37 == 36:
					if err := l.TruncateFront(l.LastIndex() - uint64(r.IntN(5))); err != nil {
						t.Fatal(err)
					}
				case step%23 == 22:
					if _, err := l.CompactTo(l.LastIndex() - uint64(r.IntN(20))); err != nil {
						t.Fatal(err)
					}
				case step%19 == 18:
					// Back to an entry, or to FirstIndex()-1, emptying the log.
					back := max(l.LastIndex(), uint64(15)) - uint64(r.IntN(15))
					back = min(max(back, l.FirstIndex()-1), l.LastIndex())
					if err := l.TruncateBack(back); err != nil {
						t.Fatal(err)
					}
				case step%61 == 60:
					if err := l.Reset(l.LastIndex() + uint64(r.IntN(3))*10); err != nil {
						t.Fatal(err)
					}
				default:
					batch := make([]int, 1+r.IntN(tt.maxBatch))
					for i := range batch {
						batch[i] = 1 + r.IntN(tt.maxPayload)
					}
					writeBatch(t, l, batch...)
				}
				checkMirror(t, l, dir, fmt.Sprintf("step %d", step))
			}
			closeLog(t, l)
		})
	}
}

func TestSegmentLimitChangedBetweenOpensIsPredicted(t *testing.T) {
	// tidwall's first rule (the tail already holds more than SegmentSize when a batch starts)
	// can only fire when the log is reopened with a smaller SegmentSize. At exactly
	// SegmentSize it does not fire; the second rule does after the first entry.
	tests := []struct {
		name     string
		shrinkBy int
		want     []string
	}{
		{"tail larger than the new limit", 1, []string{segmentName(1), segmentName(4)}},
		{"tail exactly at the new limit", 0, []string{segmentName(1), segmentName(5)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, Options{NoSync: true})
			writeBatch(t, l, 20, 20, 20)
			closeLog(t, l)
			size := len(readFile(t, lastSegment(t, dir)))

			l = openLog(t, dir, Options{NoSync: true, SegmentSize: size - tt.shrinkBy})
			defer closeLog(t, l)
			writeBatch(t, l, 10)
			checkMirror(t, l, dir, "after the first write")
			if got := segmentFiles(t, dir); !slices.Equal(got, tt.want) {
				t.Fatalf("segment files %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGapsInTheLogAreRefusedAtOpen(t *testing.T) {
	tests := []struct {
		name    string
		mangle  func(t *testing.T, dir string, s []uint64)
		segment func(s []uint64) uint64 // the segment the error names
		index   func(s []uint64) uint64 // the index it names
	}{
		{"a middle segment removed", func(t *testing.T, dir string, s []uint64) {
			remove(t, dir, s[2])
		}, func(s []uint64) uint64 { return s[1] }, func(s []uint64) uint64 { return s[2] }},
		{"the segment before the tail removed", func(t *testing.T, dir string, s []uint64) {
			remove(t, dir, s[len(s)-2])
		}, func(s []uint64) uint64 { return s[len(s)-3] }, func(s []uint64) uint64 { return s[len(s)-2] }},
		{"newer segments removed before the oldest", func(t *testing.T, dir string, s []uint64) {
			remove(t, dir, s[1])
			remove(t, dir, s[2])
		}, func(s []uint64) uint64 { return s[0] }, func(s []uint64) uint64 { return s[1] }},
		{"a segment renamed one index later", func(t *testing.T, dir string, s []uint64) {
			if err := os.Rename(filepath.Join(dir, segmentName(s[2])), filepath.Join(dir, segmentName(s[2]+1))); err != nil {
				t.Fatal(err)
			}
		}, func(s []uint64) uint64 { return s[1] }, func(s []uint64) uint64 { return s[2] }},
		{"an older segment holding one entry too many", func(t *testing.T, dir string, s []uint64) {
			next := readFile(t, filepath.Join(dir, segmentName(s[2])))
			path := filepath.Join(dir, segmentName(s[1]))
			writeFile(t, path, append(readFile(t, path), next[:entryBounds(t, next)[0]]...))
		}, func(s []uint64) uint64 { return s[1] }, func(s []uint64) uint64 { return s[2] }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentSize: compactSegmentSize}
			l := openLog(t, dir, opts)
			segmentedLog(t, l, dir, 6)
			closeLog(t, l)
			s := segmentStarts(t, dir)
			tt.mangle(t, dir, s)
			files := segmentFiles(t, dir)

			_, err := Open(dir, opts)
			var c *CorruptionError
			if !errors.As(err, &c) || c.Segment != segmentName(tt.segment(s)) || c.Index != tt.index(s) {
				t.Fatalf("Open = %v; want a *CorruptionError for index %d in segment %s", err, tt.index(s), segmentName(tt.segment(s)))
			}
			if got := segmentFiles(t, dir); !slices.Equal(got, files) {
				t.Fatalf("a refused open changed the segments: %v, was %v", got, files)
			}
		})
	}
}

func remove(t *testing.T, dir string, start uint64) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, segmentName(start))); err != nil {
		t.Fatal(err)
	}
}
