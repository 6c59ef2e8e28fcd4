package wal

import (
	"fmt"
	"testing"

	"github.com/execstore/execstore/internal/prealloc"
	tidwall "github.com/execstore/execstore/internal/tidwall/wal"
)

// benchPayloadBytes is about the size of one encoded store command (an admission with small
// params); ackPayloadBytes is the size of an encoded acknowledgement of a 27-character ID.
const (
	benchPayloadBytes = 100
	ackPayloadBytes   = 42
)

var benchBatchSizes = []int{1, 16, 32, 64, 256}

// reportEntries adds the entries/s metric, the number the store's group commit cares about.
func reportEntries(b *testing.B, entries int) {
	b.ReportMetric(float64(entries)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkRawTidwallWriteBatch is the floor: tidwall/wal alone, one WriteBatch and one fsync
// per batch, no framing, its segments written over prepared files as this package's are.
func BenchmarkRawTidwallWriteBatch(b *testing.B) {
	for _, n := range benchBatchSizes {
		b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) {
			tw, err := prealloc.OpenRaw(b.TempDir(), DefaultSegmentSize)
			if err != nil {
				b.Fatal(err)
			}
			defer tw.Close()
			payload := payloadOf(1, benchPayloadBytes)
			var batch tidwall.Batch
			next, entries := uint64(1), 0
			b.SetBytes(int64(n * benchPayloadBytes))
			for b.Loop() {
				for range n {
					batch.Write(next, payload)
					next++
				}
				if err := tw.WriteSync(&batch); err != nil {
					b.Fatal(err)
				}
				entries += n
			}
			reportEntries(b, entries)
		})
	}
}

// BenchmarkWrite is this package's Write: framing, CRC-32C, the segment mirror and, with
// sync, one fsync per batch (plus a directory fsync when a segment is created).
func BenchmarkWrite(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		for _, n := range benchBatchSizes {
			b.Run(fmt.Sprintf("sync=%v/batch=%d", !noSync, n), func(b *testing.B) {
				benchWrite(b, noSync, n, benchPayloadBytes)
			})
		}
	}
	// The floor under the store's claim-and-acknowledge path: one acknowledgement-sized entry
	// per execution, batches of 64, no fsync.
	b.Run(fmt.Sprintf("sync=false/batch=64/bytes=%d", ackPayloadBytes), func(b *testing.B) {
		benchWrite(b, true, 64, ackPayloadBytes)
	})
}

func benchWrite(b *testing.B, noSync bool, n, size int) {
	l, err := Open(b.TempDir(), Options{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := payloadOf(1, size)
	var batch Batch
	entries := 0
	b.SetBytes(int64(n * size))
	for b.Loop() {
		batch.Reset()
		for range n {
			batch.Add(payload)
		}
		if _, err := l.Write(&batch); err != nil {
			b.Fatal(err)
		}
		entries += n
	}
	reportEntries(b, entries)
}
