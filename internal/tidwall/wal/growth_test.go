package wal

import (
	"fmt"
	"runtime"
	"testing"
)

// The tail segment's buffers grow fourfold (tailCap): writing a stream of
// small batches through a few segments allocates about as many bytes as it
// logs, where append's growth by a quarter allocated about five times as
// many for the entries and as many again, per entry, for their positions.
func TestWritingAllocatesAboutWhatItLogs(t *testing.T) {
	for _, seg := range []int{256 << 10, 4 << 20} {
		t.Run(fmt.Sprintf("segment=%d", seg), func(t *testing.T) {
			l, err := Open(t.TempDir(), &Options{NoSync: true, SegmentSize: seg, LogFormat: Binary})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			payload := make([]byte, 100)
			var b Batch
			const batches, perBatch = 5000, 32 // 16 MB logged
			next := uint64(1)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range batches {
				for range perBatch {
					b.Write(next, payload)
					next++
				}
				if err := l.WriteBatch(&b); err != nil {
					t.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			logged := float64(batches * perBatch * (len(payload) + 1))
			perByte := float64(after.TotalAlloc-before.TotalAlloc) / logged
			t.Logf("%.2f bytes allocated per byte logged", perByte)
			if perByte > 2 {
				t.Fatalf("%.2f bytes allocated per byte logged, want at most 2", perByte)
			}
		})
	}
}

func TestTailCap(t *testing.T) {
	const seg = 16 << 20
	for _, tc := range []struct{ have, need, want int }{
		{0, 100, tailFirstStep},
		{tailFirstStep, tailFirstStep + 1, 4 * tailFirstStep},
		{4 << 20, 5 << 20, seg + tailSlack},                         // the last step stops at the segment
		{seg + tailSlack, seg + tailSlack + 1, seg + tailSlack + 1}, // an entry beyond the slack
		{0, 3 << 20, 3 << 20},                                       // a batch larger than the first step
	} {
		if got := tailCap(tc.have, tc.need, seg); got != tc.want {
			t.Errorf("tailCap(%d, %d, %d) = %d, want %d", tc.have, tc.need, seg, got, tc.want)
		}
	}
	if got := tailCap(0, 100, 4<<10); got != 4<<10+tailSlack { // the first step is the last
		t.Errorf("a small segment: tailCap = %d, want %d", got, 4<<10+tailSlack)
	}
}
