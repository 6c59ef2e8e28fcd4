package raftlog

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/execstore/execstore/replica"
	"github.com/execstore/execstore/wal"
)

// dataBytes is the size of each log's data: about one small command.
const dataBytes = 100

type store interface {
	raft.LogStore
	Close() error
}

// contenders open a store in a fresh directory, syncing every write as raft requires.
var contenders = []struct {
	name string
	open func(b *testing.B, dir string) store
}{
	{"wal", func(b *testing.B, dir string) store {
		s, err := replica.OpenLogStore(filepath.Join(dir, "wal"), wal.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
	{"boltdb", func(b *testing.B, dir string) store {
		s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
}

func logs(first uint64, n int) []*raft.Log {
	out := make([]*raft.Log, n)
	for i := range out {
		data := make([]byte, dataBytes)
		for j := range data {
			data[j] = byte(int(first) + i + j)
		}
		out[i] = &raft.Log{Index: first + uint64(i), Term: 3, Type: raft.LogCommand, Data: data,
			AppendedAt: time.Unix(1_700_000_000, int64(i))}
	}
	return out
}

// BenchmarkStoreLogs appends batches of 1 and 64 logs, each batch durable (fsynced) before
// the next, as raft's leader and followers do. logs/s counts logs, not batches.
func BenchmarkStoreLogs(b *testing.B) {
	for _, batch := range []int{1, 64} {
		for _, c := range contenders {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, c.name), func(b *testing.B) {
				s := c.open(b, b.TempDir())
				defer s.Close()
				next := uint64(1)
				b.ResetTimer()
				for b.Loop() {
					if err := s.StoreLogs(logs(next, batch)); err != nil {
						b.Fatal(err)
					}
					next += uint64(batch)
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "logs/s")
			})
		}
	}
}

// BenchmarkGetLog reads logs at random indexes from a store holding 20,000 logs, without a
// cache in front (raft puts raft.LogCache in front of either).
func BenchmarkGetLog(b *testing.B) {
	const held = 20_000
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) {
			s := c.open(b, b.TempDir())
			defer s.Close()
			for first := uint64(1); first <= held; first += 1000 {
				if err := s.StoreLogs(logs(first, 1000)); err != nil {
					b.Fatal(err)
				}
			}
			r := rand.New(rand.NewPCG(1, 2))
			var l raft.Log
			b.ResetTimer()
			for b.Loop() {
				if err := s.GetLog(1+r.Uint64N(held), &l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
