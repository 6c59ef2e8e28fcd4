package archive

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// benchRecords is how many records the read benchmarks archive first: enough
// for Pebble to have flushed tables beyond its memtable, small enough to be
// quick. The evaluation command's -n is the measurement at scale.
const benchRecords = 200_000

// filled opens e in a fresh directory holding the first n generated records,
// in batches of 1,024, with the engine's background work done.
func filled(b *testing.B, e Engine, n int) Archive {
	b.Helper()
	a, err := e.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	for first := 0; first < n; first += 1024 {
		if err := a.Put(GenerateBatch(first, min(1024, n-first))); err != nil {
			b.Fatal(err)
		}
	}
	for a.Busy() {
		time.Sleep(10 * time.Millisecond)
	}
	return a
}

// BenchmarkPut archives batches of 1,024 and 4,096 records, each synced
// before the next, as the writer would after each retire command (or
// after four). records/s counts records, not batches.
func BenchmarkPut(b *testing.B) {
	for _, batch := range []int{1024, 4096} {
		for _, e := range Engines {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, e.Name), func(b *testing.B) {
				a := filled(b, e, 0)
				batches := make([][]Record, 16)
				for k := range batches {
					batches[k] = GenerateBatch(k*batch, batch)
				}
				first := 0
				for b.Loop() {
					recs := batches[(first/batch)%len(batches)]
					for k := range recs { // a new ID each time round
						recs[k].ID = ArchivedID(first + k)
					}
					if err := a.Put(recs); err != nil {
						b.Fatal(err)
					}
					first += batch
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// BenchmarkGet reads a present ID, drawn uniformly from benchRecords.
func BenchmarkGet(b *testing.B) {
	for _, e := range Engines {
		b.Run(e.Name, func(b *testing.B) {
			a := filled(b, e, benchRecords)
			rng := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				if _, ok, err := a.Get(ArchivedID(rng.IntN(benchRecords))); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

// BenchmarkHasAbsent checks an ID that is absent, among present ones:
// admission's precheck of a caller-chosen ID.
func BenchmarkHasAbsent(b *testing.B) {
	for _, e := range Engines {
		b.Run(e.Name, func(b *testing.B) {
			a := filled(b, e, benchRecords)
			rng := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				if ok, err := a.Has(AbsentID(rng.IntN(benchRecords))); err != nil || ok {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

// BenchmarkListPage reads a page of 100 records of one workflow, or of
// all, from a random time.
func BenchmarkListPage(b *testing.B) {
	for _, by := range []string{"workflow", "time"} {
		for _, e := range Engines {
			b.Run(by+"/"+e.Name, func(b *testing.B) {
				a := filled(b, e, benchRecords)
				rng := rand.New(rand.NewPCG(1, 2))
				from, to := WorkloadSpanNanos(benchRecords)
				for b.Loop() {
					q := Query{FromNanos: from + rng.Int64N(to-from)/2, ToNanos: to, Limit: PageRecords}
					if by == "workflow" {
						q.WorkflowID = Workflows[rng.IntN(len(Workflows))].ID
					}
					if recs, err := a.List(q); err != nil || len(recs) != PageRecords {
						b.Fatal(len(recs), err)
					}
				}
			})
		}
	}
}
