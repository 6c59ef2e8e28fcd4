package workflow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
	"github.com/execstore/execstore/workflow"
)

// BenchmarkThreeStepWorkflow measures end-to-end throughput: b.N executions
// of a workflow of three no-op steps are triggered, and the benchmark ends
// when the last one is completed. Each execution is an admission, a claim,
// three step saves and an acknowledgement (six logged commands) plus reads.
// It reports executions per second, for each concurrency and with and
// without fsync.
//
//	go test -run '^$' -bench ThreeStepWorkflow -benchmem ./workflow/
func BenchmarkThreeStepWorkflow(b *testing.B) {
	for _, noSync := range []bool{true, false} {
		for _, concurrency := range []int{10, 100} {
			name := fmt.Sprintf("concurrency=%d/sync=%v", concurrency, !noSync)
			b.Run(name, func(b *testing.B) { benchThreeSteps(b, concurrency, noSync) })
		}
	}
}

func benchThreeSteps(b *testing.B, concurrency int, noSync bool) {
	store, err := execstore.Open(b.TempDir(), execstore.Options{NoSync: noSync})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	worker := workflow.NewWorker(store, workflow.Options{})
	noop := func(context.Context) (int, error) { return 1, nil }
	workflow.Register(worker, "three-steps", func(x *workflow.Execution, _ struct{}) (int, error) {
		for _, key := range []string{"one", "two", "three"} {
			if _, err := workflow.Run(x, key, noop); err != nil {
				return 0, err
			}
		}
		return 3, nil
	})
	done := make(chan struct{}, b.N)
	d, err := dispatcher.New(store, worker, dispatcher.Options{
		Concurrency: concurrency,
		OnOutcome:   func(execstore.Record) { done <- struct{}{} },
	})
	if err != nil {
		b.Fatal(err)
	}
	d.Start()
	defer d.Stop(context.Background())
	client := workflow.NewClient(store)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	failed := make(chan error, 1)
	go func() {
		for range b.N {
			if _, err := client.Trigger(ctx, workflow.TriggerRequest{WorkflowID: "three-steps"}); err != nil {
				failed <- err
				return
			}
		}
	}()
	for range b.N {
		select {
		case <-done:
		case err := <-failed:
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "executions/s")
}
