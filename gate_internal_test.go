package execstore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execstore/execstore/vfs"
)

// patience bounds every wait for something that must happen, so that a broken
// store fails the test instead of hanging it. It is never an expectation of
// how long anything takes.
const patience = 10 * time.Second

// waitFor polls cond until it holds, and fails the test if it does not hold
// within patience.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitQueued waits until n requests are queued for the writer.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	queued := func() int {
		_, n, _ := s.in.state()
		return n
	}
	waitFor(t, fmt.Sprintf("%d requests are queued", n), func() bool { return queued() == n })
}

// writerGate holds the writer in its next WAL write once armed, so that the
// requests made meanwhile queue up behind it and are taken as one batch when
// the gate opens.
type writerGate struct {
	armed   atomic.Bool
	held    chan struct{} // closed once the writer is held
	release chan struct{} // closed by open
}

func newWriterGate() *writerGate {
	return &writerGate{held: make(chan struct{}), release: make(chan struct{})}
}

// fs is the operating system's filesystem with the gate at the log's writes.
func (g *writerGate) fs() vfs.FS {
	return atLogWrites(func() {
		if g.armed.CompareAndSwap(true, false) {
			close(g.held)
			<-g.release
		}
	})
}

// atLogWrites is the operating system's filesystem, calling at before each write to a
// segment file of a store's write-ahead log: a write of the entries of a batch.
func atLogWrites(at func()) vfs.FS {
	return vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		if op.Kind == vfs.OpWrite && isSegment(op.Path) {
			at()
		}
		return nil
	})
}

// isSegment reports whether path names a segment file of a store's log.
func isSegment(path string) bool {
	name := filepath.Base(path)
	return filepath.Base(filepath.Dir(path)) == "wal" && len(name) == 20 && strings.Trim(name, "0123456789") == ""
}

// arm makes the next WAL write wait for open.
func (g *writerGate) arm() { g.armed.Store(true) }

// waitHeld waits until the writer is held in a WAL write.
func (g *writerGate) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(patience):
		t.Fatal("the writer never reached a WAL write")
	}
}

// open lets the held writer go on.
func (g *writerGate) open() { close(g.release) }

// gatedStore is a store whose writer a writerGate can hold behind a
// blocking admission, so that a test queues requests deterministically and
// then lets them go as one batch.
type gatedStore struct {
	t       *testing.T
	s       *Store
	gate    *writerGate
	blocker chan error
}

// openGated opens a store whose writer hold can stop.
func openGated(t *testing.T, dir string, opts Options) *gatedStore {
	t.Helper()
	g := &gatedStore{t: t, gate: newWriterGate()}
	opts.FS = g.gate.fs()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	g.s = s
	t.Cleanup(func() { s.Close() })
	return g
}

// hold admits a blocker and returns once the writer is held inside the
// blocker's write: every request made from then on queues. Once per store.
func (g *gatedStore) hold(blockerID string) {
	g.t.Helper()
	g.blocker = make(chan error, 1)
	g.gate.arm()
	go func() {
		_, err := g.s.Admit(context.Background(), AdmitRequest{ExecutionID: blockerID, WorkflowID: "blocker"})
		g.blocker <- err
	}()
	g.gate.waitHeld(g.t)
}

// waitQueued returns once n requests are queued behind the held writer.
func (g *gatedStore) waitQueued(n int) {
	g.t.Helper()
	waitQueued(g.t, g.s, n)
}

// call starts fn in its own goroutine and returns once fn's request is queued
// behind the held writer, so that calls queue in the order they are made.
// The returned channel yields fn's error.
func (g *gatedStore) call(fn func() error) <-chan error {
	g.t.Helper()
	_, n, _ := g.s.in.state()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	g.waitQueued(n + 1)
	return done
}

// let releases the writer and waits for the blocker's answer.
func (g *gatedStore) let() {
	g.t.Helper()
	g.gate.open()
	select {
	case err := <-g.blocker:
		if err != nil {
			g.t.Fatalf("blocker: %v", err)
		}
	case <-time.After(patience):
		g.t.Fatal("the blocker was never answered")
	}
}
