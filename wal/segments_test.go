package wal

import (
	"fmt"
	"math/rand/v2"
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
