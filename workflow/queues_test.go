package workflow_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/execstore/execstore/dispatcher"
	"github.com/execstore/execstore/workflow"
)

// Two workers on one store, each with the workflows it registered and a
// dispatcher of its Queues: every execution runs on the worker that
// registered its workflow, and neither ever sees the other's (no delivery
// of an unregistered workflow, which a worker would have to release).
// A child started into a named queue runs where that queue is served.
func TestWorkersClaimOnlyTheWorkflowsTheyRegistered(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	ran := map[string][]string{} // worker → workflows it ran
	record := func(worker, wf string) {
		mu.Lock()
		defer mu.Unlock()
		ran[worker] = append(ran[worker], wf)
	}
	charges := workflow.NewWorker(h.store, workflow.Options{Queues: []string{"payments"}})
	workflow.Register(charges, "charge-order", func(x *workflow.Execution, p struct{ N int }) (int, error) {
		record("charges", "charge-order")
		id, err := x.Start("email", "send-email", map[string]int{"n": p.N})
		if err != nil {
			return 0, err
		}
		if _, err := workflow.Await[int](x, id); err != nil {
			return 0, err
		}
		refund, err := x.StartIn("refund", "payments", "refund", nil)
		if err != nil {
			return 0, err
		}
		return workflow.Await[int](x, refund)
	})
	workflow.Register(charges, "refund", func(x *workflow.Execution, _ struct{}) (int, error) {
		record("charges", "refund")
		return 7, nil
	})
	emails := workflow.NewWorker(h.store, workflow.Options{})
	workflow.Register(emails, "send-email", func(x *workflow.Execution, p struct{ N int }) (int, error) {
		record("emails", "send-email")
		return p.N, nil
	})
	if diff := cmp.Diff([]string{"charge-order", "payments", "refund"}, charges.Queues()); diff != "" {
		t.Fatalf("charges.Queues() (-want +got):\n%s", diff)
	}
	for _, w := range []*workflow.Worker{charges, emails} {
		d, err := dispatcher.New(h.store, w, dispatcher.Options{Clock: h.clock, Queues: w.Queues()})
		if err != nil {
			t.Fatal(err)
		}
		d.Start()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(bg, patience)
			defer cancel()
			d.Stop(ctx)
		})
	}
	const n = 20
	for i := range n {
		h.trigger(fmt.Sprintf("order-%d", i), "charge-order", map[string]int{"n": i})
		h.trigger(fmt.Sprintf("email-%d", i), "send-email", map[string]int{"n": i})
	}
	for i := range n {
		if rec := h.await(fmt.Sprintf("order-%d", i)); rec.Outcome.Error != nil {
			t.Fatalf("order-%d: %v", i, rec.Outcome.Error)
		}
		h.await(fmt.Sprintf("email-%d", i))
	}
	mu.Lock()
	defer mu.Unlock()
	count := func(worker, wf string) int {
		c := 0
		for _, w := range ran[worker] {
			if w == wf {
				c++
			}
		}
		return c
	}
	if len(ran["charges"]) != count("charges", "charge-order")+count("charges", "refund") || len(ran["emails"]) != count("emails", "send-email") {
		t.Fatalf("a worker ran a workflow it did not register: %v", ran)
	}
	if count("emails", "send-email") != 2*n || count("charges", "refund") != n {
		t.Fatalf("ran %d emails and %d refunds, want %d and %d", count("emails", "send-email"), count("charges", "refund"), 2*n, n)
	}
}

// A dispatcher refuses queues its store cannot claim by name.
func TestADispatcherOfQueuesNeedsAQueueClaimer(t *testing.T) {
	h := newHarness(t)
	var s dispatcher.Store = struct{ dispatcher.Store }{h.store} // hides Claim and NextDueIn
	if _, err := dispatcher.New(s, h.worker, dispatcher.Options{Queues: []string{"q"}}); err == nil {
		t.Fatal("dispatcher.New with queues on a store that is no QueueClaimer: no error")
	}
}
