package dispatcher_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
)

// BenchmarkAdmitToInvoke measures the latency from the start of an Admit to
// the invoker being called, with an idle dispatcher on the system clock. It
// reports the median and 99th percentile in microseconds.
//
//	go test -run '^$' -bench AdmitToInvoke -benchmem ./dispatcher/
func BenchmarkAdmitToInvoke(b *testing.B) {
	for _, bc := range []struct {
		name   string
		noSync bool
	}{{"nosync", true}, {"fsync", false}} {
		b.Run(bc.name, func(b *testing.B) { benchAdmitToInvoke(b, bc.noSync) })
	}
}

func benchAdmitToInvoke(b *testing.B, noSync bool) {
	store, err := execstore.Open(b.TempDir(), execstore.Options{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	invoked := make(chan time.Time, 1)
	inv := dispatcher.InvokerFunc(func(context.Context, dispatcher.Delivery) (execstore.RunOutcome, error) {
		invoked <- time.Now()
		return execstore.Completed(nil), nil
	})
	ended := make(chan struct{}, 1)
	d, err := dispatcher.New(store, inv, dispatcher.Options{OnOutcome: func(execstore.Record) { ended <- struct{}{} }})
	if err != nil {
		b.Fatal(err)
	}
	d.Start()
	defer d.Stop(context.Background())
	ctx := context.Background()
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := store.Admit(ctx, execstore.AdmitRequest{WorkflowID: "w"}); err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, (<-invoked).Sub(start))
		<-ended // idle again before the next admission
	}
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(micros(percentile(latencies, 50)), "p50-µs")
	b.ReportMetric(micros(percentile(latencies, 99)), "p99-µs")
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[(len(sorted)-1)*p/100]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkDispatch measures a dispatcher's throughput: b.N executions, all
// due, admitted before the timer starts, delivered to an invoker that
// completes each at once. It reports executions/s and WAL batches (each one
// fsync, when durable) per execution.
//
//	go test -run '^$' -bench Dispatch -benchtime 100000x ./dispatcher/
func BenchmarkDispatch(b *testing.B) {
	for _, durable := range []bool{false, true} {
		for _, concurrency := range []int{10, 64, 256} {
			b.Run(fmt.Sprintf("sync=%v/concurrency=%d", durable, concurrency), func(b *testing.B) {
				benchDispatch(b, !durable, concurrency)
			})
		}
	}
}

func benchDispatch(b *testing.B, noSync bool, concurrency int) {
	store, err := execstore.Open(b.TempDir(), execstore.Options{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := store.Admit(ctx, execstore.AdmitRequest{WorkflowID: "w"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	inv := dispatcher.InvokerFunc(func(context.Context, dispatcher.Delivery) (execstore.RunOutcome, error) {
		return execstore.Completed(nil), nil
	})
	var ended atomic.Int64
	all := make(chan struct{})
	d, err := dispatcher.New(store, inv, dispatcher.Options{Concurrency: concurrency, OnOutcome: func(execstore.Record) {
		if ended.Add(1) == int64(b.N) {
			close(all)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	before, err := store.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	d.Start()
	<-all
	b.StopTimer()
	if err := d.Stop(ctx); err != nil {
		b.Fatal(err)
	}
	after, err := store.Stats(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "executions/s")
	b.ReportMetric(float64(after.WALBatches-before.WALBatches)/float64(b.N), "batches/execution")
}
