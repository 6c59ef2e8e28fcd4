package wal

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

func TestBatchesRoundTripThroughReopen(t *testing.T) {
	tests := []struct {
		name        string
		segmentSize int
		batches     [][]int // payload sizes per batch
	}{
		{"one entry", 0, [][]int{{1}}},
		{"single segment", 0, [][]int{{10, 20, 30}, {5}, sizes(64, 100), {1, 1, 1}}},
		{"many small segments", 256, [][]int{{100}, sizes(7, 90), {300}, sizes(3, 1), sizes(20, 40)}},
		{"entry larger than a segment", 64, [][]int{{500}, {1}, {64, 64}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentSize: tt.segmentSize}
			l := openLog(t, dir, opts)
			if l.FirstIndex() != 1 || l.LastIndex() != 0 {
				t.Fatalf("new log holds [%d, %d], want [1, 0]", l.FirstIndex(), l.LastIndex())
			}
			var want []entry
			for _, batch := range tt.batches {
				want = append(want, writeBatch(t, l, batch...)...)
			}
			for _, e := range want {
				got, err := l.Read(e.Index)
				if err != nil || !bytes.Equal(got, e.Payload) {
					t.Fatalf("Read(%d) = %x, %v; want %x", e.Index, got, err, e.Payload)
				}
			}
			closeLog(t, l)

			l = openLog(t, dir, opts)
			defer closeLog(t, l)
			if l.TailRepair() != nil {
				t.Fatalf("clean log reported a repair: %v", l.TailRepair())
			}
			checkEntries(t, l, want)
		})
	}
}

func TestReplayStartsAtTheGivenIndexAndStopsOnCallbackError(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{NoSync: true})
	defer closeLog(t, l)
	want := writeBatch(t, l, sizes(10, 8)...)

	var got []uint64
	stop := errors.New("stop")
	err := l.Replay(4, func(index uint64, _ []byte) error {
		got = append(got, index)
		if index == 6 {
			return stop
		}
		return nil
	})
	if err != stop || len(got) != 3 || got[0] != 4 || got[2] != 6 {
		t.Fatalf("Replay(4) visited %v, returned %v; want [4 5 6], stop", got, err)
	}
	if err := l.Replay(want[len(want)-1].Index+1, nil); err != nil {
		t.Fatalf("Replay(LastIndex+1) = %v, want nil", err)
	}
	if err := l.Replay(want[len(want)-1].Index+2, nil); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Replay(LastIndex+2) = %v, want ErrOutOfRange", err)
	}
}

func TestEmptyBatchWritesNothing(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	defer closeLog(t, l)
	writeBatch(t, l, 3, 4)
	var b Batch
	first, err := l.Write(&b)
	if err != nil || first != 3 || l.LastIndex() != 2 {
		t.Fatalf("Write(empty) = %d, %v with LastIndex %d; want 3, nil, 2", first, err, l.LastIndex())
	}
}

func TestInvalidPayloadsAreRefusedWithoutWriting(t *testing.T) {
	tests := []struct {
		name string
		fill func(b *Batch)
		want error
	}{
		{"empty payload", func(b *Batch) { b.Add([]byte("ok")); b.Add(nil) }, ErrEmptyPayload},
		{"payload over MaxPayloadBytes", func(b *Batch) { b.Add(make([]byte, MaxPayloadBytes+1)) }, ErrTooLarge},
		{"more than MaxBatchEntries", func(b *Batch) {
			for range MaxBatchEntries + 1 {
				b.Add([]byte{1})
			}
		}, ErrTooLarge},
		{"more than MaxBatchBytes", func(b *Batch) {
			// A full batch built in place: the pages are never touched, so this costs no memory.
			b.data = make([]byte, MaxBatchBytes)
			b.ends = []int{MaxBatchBytes}
			b.Add([]byte{1})
		}, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openLog(t, t.TempDir(), Options{NoSync: true})
			defer closeLog(t, l)
			var b Batch
			tt.fill(&b)
			if _, err := l.Write(&b); !errors.Is(err, tt.want) {
				t.Fatalf("Write = %v, want %v", err, tt.want)
			}
			if l.LastIndex() != 0 {
				t.Fatalf("LastIndex = %d after a refused batch, want 0", l.LastIndex())
			}
			// A refused batch is the caller's mistake, not a storage error: the log goes on.
			b.Reset()
			b.Add([]byte("next"))
			if first, err := l.Write(&b); err != nil || first != 1 {
				t.Fatalf("Write after Reset = %d, %v; want 1, nil", first, err)
			}
		})
	}
}

func TestReadOutsideTheLogIsOutOfRange(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{NoSync: true})
	writeBatch(t, l, 5, 5)
	for _, index := range []uint64{0, 3, 100} {
		if _, err := l.Read(index); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Read(%d) = %v, want ErrOutOfRange", index, err)
		}
	}
	closeLog(t, l)
	if _, err := l.Read(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after Close = %v, want ErrClosed", err)
	}
	if _, err := l.Write(&Batch{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}

func TestTruncateFrontSurvivesReopen(t *testing.T) {
	tests := []struct {
		name  string
		index uint64 // new first index; 31 is LastIndex+1
	}{
		{"first index is a no-op", 1},
		{"inside the first segment", 2},
		{"inside a middle segment", 13},
		{"last entry", 30},
		{"everything", 31},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{SegmentSize: 300}
			l := openLog(t, dir, opts)
			var all []entry
			for range 5 {
				all = append(all, writeBatch(t, l, sizes(6, 40)...)...)
			}
			if err := l.TruncateFront(tt.index); err != nil {
				t.Fatalf("TruncateFront(%d): %v", tt.index, err)
			}
			want := all[tt.index-1:]
			check := func(l *Log) {
				t.Helper()
				if l.FirstIndex() != tt.index || l.LastIndex() != 30 {
					t.Fatalf("log holds [%d, %d], want [%d, 30]", l.FirstIndex(), l.LastIndex(), tt.index)
				}
				checkEntries(t, l, want)
			}
			check(l)
			closeLog(t, l)

			l = openLog(t, dir, opts)
			check(l)
			// Appending continues the numbering, even after emptying the log.
			want = append(want, writeBatch(t, l, 7, 8)...)
			closeLog(t, l)
			l = openLog(t, dir, opts)
			defer closeLog(t, l)
			checkEntries(t, l, want)
		})
	}
}

func TestTruncateFrontOutsideTheLogIsRefused(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{NoSync: true})
	defer closeLog(t, l)
	writeBatch(t, l, 1, 1, 1)
	if err := l.TruncateFront(2); err != nil {
		t.Fatal(err)
	}
	for _, index := range []uint64{1, 5} {
		if err := l.TruncateFront(index); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("TruncateFront(%d) = %v, want ErrOutOfRange", index, err)
		}
	}
	// A refused truncation is not a storage error: writes go on.
	writeBatch(t, l, 1)
}

func TestReadersSeeOnlyWrittenEntriesWhileWritesRun(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{NoSync: true, SegmentSize: 2000})
	defer closeLog(t, l)
	const batches, perBatch, size = 100, 5, 20
	done := make(chan struct{})
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				last := l.LastIndex()
				if last == 0 {
					continue
				}
				got, err := l.Read(last)
				if err != nil || !bytes.Equal(got, payloadOf(last, size)) {
					errs <- fmt.Errorf("Read(%d) = %x, %v", last, got, err)
					return
				}
			}
		}()
	}
	for range batches {
		writeBatch(t, l, sizes(perBatch, size)...)
	}
	close(done)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
