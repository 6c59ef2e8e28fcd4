package execstore

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execstore/execstore/wal"
)

// writerGate holds the store's writer inside a WAL write, so that a test can
// queue requests deterministically behind it and then let them go as one
// batch.
type writerGate struct {
	t       *testing.T
	s       *Store
	armed   atomic.Bool
	held    atomic.Bool
	release chan struct{}
	blocker chan error
}

// openGated opens a store whose writer a writerGate can hold.
func openGated(t *testing.T, dir string, opts Options) *writerGate {
	t.Helper()
	g := &writerGate{t: t}
	opts.WALFaults = &wal.Faults{BeforeWrite: func() error {
		if g.armed.CompareAndSwap(true, false) {
			g.held.Store(true)
			<-g.release
		}
		return nil
	}}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	g.s = s
	t.Cleanup(func() { s.Close() })
	return g
}

// hold admits a blocker and returns once the writer is held inside the
// blocker's write: every request made from then on queues.
func (g *writerGate) hold(blockerID string) {
	g.t.Helper()
	g.release = make(chan struct{})
	g.blocker = make(chan error, 1)
	g.armed.Store(true)
	go func() {
		_, err := g.s.Admit(context.Background(), AdmitRequest{ExecutionID: blockerID, WorkflowID: "blocker"})
		g.blocker <- err
	}()
	waitFor(g.t, "the writer to be held", func() bool { return g.held.Load() })
}

// waitQueued returns once n requests are queued behind the held writer.
func (g *writerGate) waitQueued(n int) {
	g.t.Helper()
	waitFor(g.t, "requests to queue", func() bool {
		g.s.qmu.Lock()
		defer g.s.qmu.Unlock()
		return len(g.s.queue) >= n
	})
}

// let releases the writer and waits for the blocker's answer.
func (g *writerGate) let() {
	g.t.Helper()
	g.held.Store(false)
	close(g.release)
	if err := <-g.blocker; err != nil {
		g.t.Fatalf("blocker: %v", err)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// call starts fn in its own goroutine and returns once fn's request is queued
// behind the held writer, so that calls queue in the order they are made.
// The returned channel yields fn's error.
func (g *writerGate) call(fn func() error) <-chan error {
	g.t.Helper()
	g.s.qmu.Lock()
	n := len(g.s.queue)
	g.s.qmu.Unlock()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	g.waitQueued(n + 1)
	return done
}
