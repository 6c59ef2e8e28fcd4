package dispatcher_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
)

// holdRounds makes every AcknowledgeAndClaim of f's store wait for a value
// on the returned channel.
func holdRounds(f *fixture) chan struct{} {
	hold := make(chan struct{})
	f.faults.mu.Lock()
	f.faults.hold = hold
	f.faults.mu.Unlock()
	return hold
}

// waitQueuedAcks waits until n acknowledgements wait for the next round.
func waitQueuedAcks(t *testing.T, d *dispatcher.Dispatcher, n int) {
	t.Helper()
	deadline := time.After(patience)
	for d.QueuedAcks() != n {
		select {
		case <-deadline:
			t.Fatalf("%d acknowledgements queued, want %d", d.QueuedAcks(), n)
		case <-time.After(time.Millisecond):
		}
	}
}

// release lets the round being written go on.
func release(t *testing.T, hold chan struct{}) {
	t.Helper()
	select {
	case hold <- struct{}{}:
	case <-time.After(patience):
		t.Fatal("no round waited to be written")
	}
}

func (f *fixture) rounds() []int {
	f.faults.mu.Lock()
	defer f.faults.mu.Unlock()
	return append([]int(nil), f.faults.rounds...)
}

// Deliveries that end while a round of acknowledgements is being written
// are written together in the next, in one AcknowledgeAndClaim that claims
// one execution for each of their slots; each slot's next execution is
// delivered without the claiming loop, and the slots are never exceeded.
func TestAcknowledgementsEndingTogetherAreWrittenInOneCallThatRefillsTheirSlots(t *testing.T) {
	f := newFixture(t, dispatcher.Options{Concurrency: 3})
	hold := holdRounds(f)
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		f.admit(id, "")
	}
	first := []*call{f.next(), f.next(), f.next()}
	first[0].finish(execstore.Completed(json.RawMessage(`1`)))
	f.faults.waitCalls(t, "AcknowledgeAndClaim", 1) // the first round waits in the store
	first[1].finish(execstore.Completed(json.RawMessage(`2`)))
	first[2].finish(execstore.Completed(json.RawMessage(`3`)))
	waitQueuedAcks(t, f.d, 2)
	claimsBefore := f.faults.count("ClaimDue")
	release(t, hold) // the first round: one acknowledgement, one execution claimed
	release(t, hold) // the second: both queued ones, two executions claimed
	var next []string
	for range 3 {
		next = append(next, f.next().d.ExecutionID)
	}
	slices.Sort(next) // the second round's two deliveries reach the invoker in either order
	if got := strings.Join(next, ","); got != "d,e,f" {
		t.Fatalf("delivered next %s, want d,e,f", got)
	}
	if got := f.rounds(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("AcknowledgeAndClaim took %v acknowledgements, want [1 2]", got)
	}
	// Both rounds' claims went through the store's ClaimDue (the wrapper's
	// AcknowledgeAndClaim calls it); the loop claimed nothing meanwhile.
	if n := f.faults.count("ClaimDue") - claimsBefore; n != 2 {
		t.Fatalf("%d claims after the first deliveries ended, want the rounds' 2", n)
	}
	if n := f.d.ActiveDeliveries(); n != 3 {
		t.Fatalf("ActiveDeliveries = %d, want 3", n)
	}
	for _, id := range []string{"a", "b", "c"} {
		if rec := f.get(id); rec.Status != execstore.StatusCompleted {
			t.Fatalf("%s is %s, want completed", id, rec.Status)
		}
	}
	for range 3 {
		f.outcome()
	}
	f.faults.mu.Lock()
	f.faults.hold = nil
	for _, limit := range f.faults.claims {
		if limit > 3 {
			t.Fatalf("a claim asked for %d executions with concurrency 3 (claims %v)", limit, f.faults.claims)
		}
	}
	f.faults.mu.Unlock()
}

// Acknowledgements that one call could not carry together (more bytes than
// Limits.AcknowledgeBatchBytes) are each written on their own, and each
// records its outcome, as it would have without the others.
func TestAcknowledgementsTooLargeTogetherAreWrittenOneByOne(t *testing.T) {
	f := newFixtureLimited(t, dispatcher.Options{Concurrency: 3}, nil, nil, execstore.Limits{AcknowledgeBatchBytes: 1000})
	hold := holdRounds(f)
	for _, id := range []string{"a", "b", "c"} {
		f.admit(id, "")
	}
	calls := []*call{f.next(), f.next(), f.next()}
	large := json.RawMessage(`"` + strings.Repeat("x", 600) + `"`)
	calls[0].finish(execstore.Completed(nil))
	f.faults.waitCalls(t, "AcknowledgeAndClaim", 1)
	calls[1].finish(execstore.Completed(large))
	calls[2].finish(execstore.Completed(large))
	waitQueuedAcks(t, f.d, 2)
	acksBefore := f.faults.count("Acknowledge")
	release(t, hold)
	release(t, hold)
	for range 3 {
		f.outcome()
	}
	f.drain()
	if got := f.rounds(); len(got) != 2 || got[1] != 2 {
		t.Fatalf("AcknowledgeAndClaim took %v acknowledgements, want the second round to take 2", got)
	}
	// The first round's, the refused round's, then one each.
	if n := f.faults.count("Acknowledge") - acksBefore; n != 4 {
		t.Fatalf("%d AcknowledgeBatch calls, want 4", n)
	}
	for _, c := range calls[1:] {
		rec := f.get(c.d.ExecutionID)
		if rec.Status != execstore.StatusCompleted || rec.Outcome == nil || string(rec.Outcome.Result) != string(large) {
			t.Fatalf("%s is %s with %+v, want completed with its large result", c.d.ExecutionID, rec.Status, rec.Outcome)
		}
	}
	f.noMoreOutcomes()
}

// Each delivery of a round gets its own acknowledgement's answer: in a round
// of an acknowledgement that records its outcome and one the store refuses
// on its own (a failure without its error), the first is published and the
// second, alone, logs the refusal.
func TestEachDeliveryOfARoundGetsItsOwnAnswer(t *testing.T) {
	f := newFixture(t, dispatcher.Options{Concurrency: 3})
	hold := holdRounds(f)
	for _, id := range []string{"a", "b", "c"} {
		f.admit(id, "")
	}
	byID := map[string]*call{}
	for range 3 {
		c := f.next()
		byID[c.d.ExecutionID] = c
	}
	byID["c"].finish(execstore.Completed(nil))
	f.faults.waitCalls(t, "AcknowledgeAndClaim", 1)
	byID["a"].finish(execstore.RunOutcome{Status: execstore.StatusFailed}) // no error: refused
	byID["b"].finish(execstore.Completed(json.RawMessage(`"b's"`)))
	waitQueuedAcks(t, f.d, 2)
	release(t, hold)
	release(t, hold)
	published := map[string]bool{}
	for range 2 {
		published[f.outcome().ExecutionID] = true
	}
	f.drain()
	f.noMoreOutcomes()
	if !published["b"] || !published["c"] || published["a"] {
		t.Fatalf("published %v, want b and c", published)
	}
	var refused []string
	for _, line := range strings.Split(f.logs.String(), "\n") {
		if strings.Contains(line, "failed to acknowledge") {
			refused = append(refused, line)
		}
	}
	if len(refused) != 1 || !strings.Contains(refused[0], "execution_id=a ") {
		t.Fatalf("failed acknowledgements logged %q, want one, for a", refused)
	}
	if rec := f.get("a"); rec.Status.Terminal() {
		t.Fatalf("a is %s, want it left to its lease's expiry", rec.Status)
	}
	if rec := f.get("b"); rec.Status != execstore.StatusCompleted || string(rec.Outcome.Result) != `"b's"` {
		t.Fatalf("b is %s with %+v, want completed with its own result", rec.Status, rec.Outcome)
	}
}
