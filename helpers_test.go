package execstore_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher/dispatchertest"
	"github.com/execstore/execstore/internal/untimed"
	"github.com/execstore/execstore/vfs"
)

// t0 is the injected clock's start: every test's times are relative to it.
var t0 = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

// patience bounds every wait for something that must happen, so that a broken
// store fails the test instead of hanging it. It is never an expectation of
// how long anything takes.
const patience = 10 * time.Second

// clock is an injected clock that moves only when told. A fixture gives its
// Now to Options.Now, so the writer's timers are the system's; a test that
// wants them to fire when it moves the clock gives the clock itself to
// Options.Clock (timed), and one that wants them never to fire, a clock of
// its Now whose timers never do (untimed).
type clock = dispatchertest.Clock

func newClock() *clock { return dispatchertest.NewClock(t0) }

// fixture is a store on a temporary directory with an injected clock.
type fixture struct {
	t     *testing.T
	dir   string
	clock *clock
	opts  execstore.Options
	s     *execstore.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), clock: newClock()}
	f.opts = execstore.Options{Now: f.clock.Now, NoSync: true}
	f.open()
	t.Cleanup(func() {
		if f.s != nil {
			f.s.Close()
		}
	})
	return f
}

// timed makes the store's clock the fixture's own, from the next open: the
// writer's timers fire when the test moves the clock past them.
func (f *fixture) timed() {
	f.opts.Now, f.opts.Clock = nil, f.clock
}

// untimed makes the store's clock one whose timers never fire, from the
// next open: the writer retires and reaches occurrences only when it takes
// requests, so a test decides when, at its next write.
func (f *fixture) untimed() {
	f.opts.Now, f.opts.Clock = nil, untimed.Clock(f.clock.Now)
}

func (f *fixture) open() {
	f.t.Helper()
	s, err := execstore.Open(f.dir, f.opts)
	if err != nil {
		f.t.Fatalf("Open: %v", err)
	}
	f.s = s
}

// reopen closes the store cleanly and opens it again from its files.
func (f *fixture) reopen() {
	f.t.Helper()
	if err := f.s.Close(); err != nil {
		f.t.Fatalf("Close: %v", err)
	}
	f.open()
}

var ctx = context.Background()

func (f *fixture) admit(req execstore.AdmitRequest) string {
	f.t.Helper()
	id, err := f.s.Admit(ctx, req)
	if err != nil {
		f.t.Fatalf("Admit(%+v): %v", req, err)
	}
	return id
}

func (f *fixture) get(id string) execstore.Record {
	f.t.Helper()
	rec, err := f.s.Get(ctx, id)
	if err != nil {
		f.t.Fatalf("Get(%q): %v", id, err)
	}
	return rec
}

func (f *fixture) claim(limit int, d time.Duration) []execstore.Lease {
	f.t.Helper()
	leases, err := f.s.ClaimDue(ctx, limit, d)
	if err != nil {
		f.t.Fatalf("ClaimDue: %v", err)
	}
	return leases
}

// claimOne claims and requires exactly one lease, for id.
func (f *fixture) claimOne(id string) execstore.Lease {
	f.t.Helper()
	leases := f.claim(10, time.Minute)
	if len(leases) != 1 || leases[0].ExecutionID != id {
		f.t.Fatalf("ClaimDue = %+v, want one lease for %q", leases, id)
	}
	return leases[0]
}

// claimFor claims everything due and returns the lease for id.
func (f *fixture) claimFor(id string) execstore.Lease {
	f.t.Helper()
	for _, l := range f.claim(100, time.Minute) {
		if l.ExecutionID == id {
			return l
		}
	}
	f.t.Fatalf("ClaimDue did not return %q", id)
	return execstore.Lease{}
}

func (f *fixture) wake(id string, at time.Time) execstore.WakeResult {
	f.t.Helper()
	res, err := f.s.RequestWake(ctx, id, at)
	if err != nil {
		f.t.Fatalf("RequestWake(%q): %v", id, err)
	}
	return res
}

func (f *fixture) ack(l execstore.Lease, o execstore.RunOutcome) execstore.Record {
	f.t.Helper()
	rec, err := f.s.Acknowledge(ctx, l, o)
	if err != nil {
		f.t.Fatalf("Acknowledge(%+v): %v", l, err)
	}
	return rec
}

func (f *fixture) stats() execstore.Stats {
	f.t.Helper()
	st, err := f.s.Stats(ctx)
	if err != nil {
		f.t.Fatalf("Stats: %v", err)
	}
	return st
}

func ids(leases []execstore.Lease) []string {
	out := make([]string, len(leases))
	for i, l := range leases {
		out[i] = l.ExecutionID
	}
	return out
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// waitingCtx is a context that tells when a call first waits on it. Await
// reads the record (which consults only ctx.Err), then blocks in a select
// on ctx.Done() and the store's signals: once Done has been called, the
// Await has read a record that is not terminal and waits for a change.
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// awaited is one Await's answer.
type awaited struct {
	rec execstore.Record
	err error
}

// awaitWaiting starts Await(id) and returns once it is waiting for id to
// change, with the channel its answer will arrive on (see answer).
func (f *fixture) awaitWaiting(id string) <-chan awaited {
	f.t.Helper()
	c := &waitingCtx{Context: ctx, waiting: make(chan struct{})}
	ch := make(chan awaited, 1)
	go func() {
		rec, err := f.s.Await(c, id)
		ch <- awaited{rec, err}
	}()
	select {
	case <-c.waiting:
	case a := <-ch:
		f.t.Fatalf("Await(%q) answered without waiting: %+v, %v", id, a.rec, a.err)
	case <-time.After(patience):
		f.t.Fatalf("Await(%q) neither answered nor waited", id)
	}
	return ch
}

// answer waits for the answer of an Await started by awaitWaiting.
func (f *fixture) answer(ch <-chan awaited) awaited {
	f.t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(patience):
		f.t.Fatal("the waiting Await never answered")
		return awaited{}
	}
}

// eventually polls cond until it holds, and fails the test if it does not
// hold within patience.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// onLog is the operating system's filesystem, calling at with each write (vfs.OpWrite) or
// fsync (vfs.OpSyncData) of a segment file of a store's write-ahead log: the write of a
// batch's entries, and the fsync that makes them durable. An error from at fails that
// operation, as a disk would.
func onLog(kind vfs.OpKind, at func() error) vfs.FS {
	return vfs.WithFaults(vfs.Default, func(op vfs.Op) error {
		name := filepath.Base(op.Path)
		segment := filepath.Base(filepath.Dir(op.Path)) == "wal" && len(name) == 20 && strings.Trim(name, "0123456789") == ""
		if op.Kind == kind && segment {
			return at()
		}
		return nil
	})
}
