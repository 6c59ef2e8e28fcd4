package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/google/go-cmp/cmp"
)

// The scenario of TestConcurrentReadersSeeOnlyAppliedStates: executions
// e-00 … e-59, the first 50 admitted up front and the rest while readers
// read; each is claimed raceAttempts times, and under the k-th lease saves k
// as step "first" (the first saved value wins, so it stays 1) and as step
// "a<k>", then suspends, or on the last attempt completes with k. Meanwhile
// another writer commits 1, 2, … to key "k".
const (
	raceInitial  = 50
	raceTotal    = 60
	raceAttempts = 3
	raceReaders  = 2
	raceCommits  = 200
)

func raceID(i int) string     { return fmt.Sprintf("e-%02d", i) }
func raceParams(i int) string { return fmt.Sprintf(`{"i":%d}`, i) }

// Readers share the store's read lock while the writer applies batches and
// snapshots clone the state, so everything a read touches must be safe to
// share; run with -race. Every read must also see an applied state: each
// record valid on its own and consistent with the steps and the stats read
// around it, nothing going backwards, a terminal record never changing and
// Await answering with what Get shows. At the end the state is exactly what
// the writers did.
func TestConcurrentReadersSeeOnlyAppliedStates(t *testing.T) {
	f := newFixture(t)
	f.s.Close()
	f.opts.SnapshotEntries = 64 // snapshots clone the state while readers read
	f.open()
	for i := range raceInitial {
		f.admit(execstore.AdmitRequest{ExecutionID: raceID(i), WorkflowID: "w", Params: raw(raceParams(i))})
	}

	// Awaiters wait for the executions admitted up front; each answer must
	// be the final record.
	awaitCtx, cancelAwaits := context.WithCancel(ctx)
	t.Cleanup(cancelAwaits)
	awaits := make([]chan awaited, raceInitial)
	for i := range awaits {
		awaits[i] = make(chan awaited, 1)
		go func() {
			rec, err := f.s.Await(awaitCtx, raceID(i))
			awaits[i] <- awaited{rec, err}
		}()
	}

	readers := startRaceReaders(f)
	t.Cleanup(readers.stop) // before the fixture closes the store
	readers.wg.Add(1)
	go func() {
		defer readers.wg.Done()
		for n := 1; n <= raceCommits; n++ {
			if err := f.s.Commit(ctx, execstore.Write{Key: "k", Value: raw(strconv.Itoa(n))}); err != nil {
				t.Errorf("Commit %d: %v", n, err)
				return
			}
		}
	}()
	f.runRaceLifecycle(readers.catchUp)
	readers.stop()
	if t.Failed() {
		return
	}
	f.checkRaceEnd(awaits)
}

// raceReaderGroup is the readers of TestConcurrentReadersSeeOnlyAppliedStates
// (and the key writer, which stop waits for too).
type raceReaderGroup struct {
	t       *testing.T
	halt    atomic.Bool
	wg      sync.WaitGroup
	passes  [raceReaders]atomic.Int64 // whole passes made by each reader
	exited  [raceReaders]atomic.Bool  // a reader exits at its first failure
	stopped sync.Once
}

func startRaceReaders(f *fixture) *raceReaderGroup {
	g := &raceReaderGroup{t: f.t}
	for r := range raceReaders {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer g.exited[r].Store(true)
			v := raceView{s: f.s, recs: map[string]execstore.Record{}, latest: map[string]int{}}
			for i := 0; !g.halt.Load(); i++ {
				if err := v.pass((i*7 + r) % raceTotal); err != nil {
					g.t.Errorf("reader %d, pass %d: %v", r, i, err)
					return
				}
				g.passes[r].Add(1)
			}
		}()
	}
	return g
}

// catchUp waits until every reader has made a whole pass that began after
// the call, so that reads provably interleave with the writes however the
// goroutines are scheduled.
func (g *raceReaderGroup) catchUp() {
	g.t.Helper()
	var from [raceReaders]int64
	for r := range from {
		from[r] = g.passes[r].Load()
	}
	eventually(g.t, "every reader made a pass", func() bool {
		for r := range from {
			if !g.exited[r].Load() && g.passes[r].Load() < from[r]+2 {
				return false
			}
		}
		return true
	})
}

func (g *raceReaderGroup) stop() {
	g.stopped.Do(func() {
		g.halt.Store(true)
		g.wg.Wait()
	})
}

// runRaceLifecycle admits the remaining executions, wakes them round-robin
// and claims, saves a step and acknowledges until every one is complete,
// checking each answer against its own model of the state.
func (f *fixture) runRaceLifecycle(readersCatchUp func()) {
	t := f.t
	t.Helper()
	type model struct {
		attempts int
		status   execstore.Status
	}
	m := make([]model, raceTotal)
	for i := range m {
		m[i].status = execstore.StatusAdmitted
	}
	admitted, completed := raceInitial, 0
	for round := 1; completed < raceTotal; round++ {
		if round > 10_000 {
			t.Fatalf("%d of %d executions completed after %d rounds", completed, raceTotal, round)
		}
		if round%4 == 0 && admitted < raceTotal {
			f.admit(execstore.AdmitRequest{ExecutionID: raceID(admitted), WorkflowID: "w", Params: raw(raceParams(admitted))})
			admitted++
		}
		w := round % admitted
		want := execstore.WakeRequested
		if m[w].status.Terminal() {
			want = execstore.WakeIgnored
		}
		if got := f.wake(raceID(w), f.clock.Now()); got != want {
			t.Fatalf("RequestWake(%s) = %q, want %q", raceID(w), got, want)
		}
		for _, l := range f.claim(3, time.Minute) {
			var i int
			if _, err := fmt.Sscanf(l.ExecutionID, "e-%d", &i); err != nil || i >= admitted {
				t.Fatalf("claimed %q, which was never admitted", l.ExecutionID)
			}
			m[i].attempts++
			if l.Token != uint64(m[i].attempts) {
				t.Fatalf("lease on %s has token %d, want %d", l.ExecutionID, l.Token, m[i].attempts)
			}
			token := raw(strconv.Itoa(m[i].attempts))
			for _, key := range []string{"first", fmt.Sprintf("a%d", m[i].attempts)} {
				if err := f.s.SaveStep(ctx, l, key, token); err != nil {
					t.Fatalf("SaveStep(%+v, %s): %v", l, key, err)
				}
			}
			outcome := execstore.Suspended()
			if m[i].attempts == raceAttempts {
				outcome = execstore.Completed(token)
			}
			rec := f.ack(l, outcome)
			m[i].status = rec.Status
			if want := outcome.Status; rec.Status != want || rec.Attempts != m[i].attempts {
				t.Fatalf("Acknowledge(%s) = %s after %d attempts, want %s after %d", l.ExecutionID, rec.Status, rec.Attempts, want, m[i].attempts)
			}
			if rec.Status.Terminal() {
				completed++
			}
		}
		f.clock.Advance(time.Millisecond)
		if round%16 == 0 {
			readersCatchUp()
		}
	}
}

// checkRaceEnd checks that the final state is exactly what the writers did,
// and that every Await answered with it.
func (f *fixture) checkRaceEnd(awaits []chan awaited) {
	t := f.t
	t.Helper()
	for i := range raceTotal {
		id := raceID(i)
		rec := f.get(id)
		if rec.Status != execstore.StatusCompleted || rec.Attempts != raceAttempts || rec.Lease != nil ||
			string(rec.Outcome.Result) != strconv.Itoa(raceAttempts) || string(rec.Params) != raceParams(i) {
			t.Errorf("%s ended %s after %d attempts, lease %+v, outcome %+v, params %s", id, rec.Status, rec.Attempts, rec.Lease, rec.Outcome, rec.Params)
		}
		for key, want := range map[string]string{"first": "1", "a1": "1", "a2": "2", "a3": "3"} {
			if v, ok, err := f.s.Step(ctx, id, key); err != nil || !ok || string(v) != want {
				t.Errorf("%s's step %s = %s, %v, %v; want %s", id, key, v, ok, err, want)
			}
		}
		if i >= len(awaits) {
			continue
		}
		select {
		case a := <-awaits[i]:
			if a.err != nil {
				t.Errorf("Await(%s): %v", id, a.err)
			} else if diff := cmp.Diff(rec, a.rec); diff != "" {
				t.Errorf("Await(%s) answered a record other than Get's (-get +await):\n%s", id, diff)
			}
		case <-time.After(patience):
			t.Errorf("Await(%s) never answered", id)
		}
	}
	if v, ok, err := f.s.Read(ctx, "k"); err != nil || string(v) != strconv.Itoa(raceCommits) {
		t.Errorf("Read(k) = %s, %v, %v; want %d", v, ok, err, raceCommits)
	}
	if st := f.stats(); st.Executions != raceTotal || st.Terminal != raceTotal || st.Pending != 0 {
		t.Errorf("stats = %+v, want %d executions, all terminal, none pending", st, raceTotal)
	}
	if err := f.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// raceView is what one reader has seen so far: every later read must be
// consistent with it.
type raceView struct {
	s      *execstore.Store
	recs   map[string]execstore.Record
	latest map[string]int // the latest attempt seen to have saved a step
	kv     int
	stats  execstore.Stats
}

// pass reads execution i (its steps, then its record, then Await if it is
// terminal), an ID never admitted, key k and the stats.
func (v *raceView) pass(i int) error {
	id := raceID(i)
	latest, err := v.steps(id)
	if err != nil {
		return err
	}
	if err := v.record(i, latest); err != nil {
		return err
	}
	if _, err := v.s.Get(ctx, "ghost"); !errors.Is(err, execstore.ErrExecutionNotFound) {
		return fmt.Errorf("Get(ghost): %v, want ErrExecutionNotFound", err)
	}
	if err := v.key(); err != nil {
		return err
	}
	return v.checkStats()
}

// steps reads id's steps and returns the latest attempt that saved one. Steps
// are read from the latest attempt's down, so a step seen missing after a
// later one was seen is a step lost, not one not yet saved. Once saved, a step
// never changes or disappears, and "first" keeps the first attempt's value.
func (v *raceView) steps(id string) (int, error) {
	latest := 0
	for k := raceAttempts; k >= 1; k-- {
		val, ok, err := v.s.Step(ctx, id, fmt.Sprintf("a%d", k))
		if err != nil && !errors.Is(err, execstore.ErrExecutionNotFound) {
			return 0, fmt.Errorf("Step(%s, a%d): %v", id, k, err)
		}
		switch {
		case ok && string(val) != strconv.Itoa(k):
			return 0, fmt.Errorf("%s's step a%d = %s", id, k, val)
		case ok && latest == 0:
			latest = k
		case !ok && latest > 0:
			return 0, fmt.Errorf("%s's step a%d is missing, but a%d was saved", id, k, latest)
		}
	}
	if latest < v.latest[id] {
		return 0, fmt.Errorf("%s's latest step went back from a%d to a%d", id, v.latest[id], latest)
	}
	v.latest[id] = latest
	val, ok, _ := v.s.Step(ctx, id, "first")
	if (latest > 0 && !ok) || (ok && string(val) != "1") {
		return 0, fmt.Errorf("%s's step first = %s, %v after a%d", id, val, ok, latest)
	}
	return latest, nil
}

// record reads execution i, whose latest step was just read as attempt
// step, and checks it against itself, the steps and what this reader saw
// before.
func (v *raceView) record(i, step int) error {
	id := raceID(i)
	rec, err := v.s.Get(ctx, id)
	prev, seen := v.recs[id]
	switch {
	case errors.Is(err, execstore.ErrExecutionNotFound) && !seen && step == 0:
		return nil // not admitted yet
	case err != nil:
		return fmt.Errorf("Get(%s) after seeing %+v and step %d: %v", id, prev, step, err)
	}
	if err := validRecord(rec, i); err != nil {
		return err
	}
	if rec.Attempts < step {
		return fmt.Errorf("%s has %d attempts, but attempt %d already saved a step", id, rec.Attempts, step)
	}
	if seen {
		if prev.Status.Terminal() {
			if diff := cmp.Diff(prev, rec); diff != "" {
				return fmt.Errorf("terminal %s changed (-before +after):\n%s", id, diff)
			}
		}
		if rec.Attempts < prev.Attempts || rank(rec.Status) < rank(prev.Status) || rec.UpdatedAt.Before(prev.UpdatedAt) {
			return fmt.Errorf("%s went back from %s after %d attempts (updated %v) to %s after %d (updated %v)",
				id, prev.Status, prev.Attempts, prev.UpdatedAt, rec.Status, rec.Attempts, rec.UpdatedAt)
		}
	}
	v.recs[id] = rec
	if !rec.Status.Terminal() {
		return nil
	}
	c, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	got, err := v.s.Await(c, id)
	if err != nil {
		return fmt.Errorf("Await(%s) of a terminal record: %v", id, err)
	}
	if diff := cmp.Diff(rec, got); diff != "" {
		return fmt.Errorf("Await(%s) differs from Get (-get +await):\n%s", id, diff)
	}
	return nil
}

// validRecord checks a record of execution i on its own.
func validRecord(rec execstore.Record, i int) error {
	bad := func(why string) error { return fmt.Errorf("invalid record (%s): %+v", why, rec) }
	switch {
	case rec.ExecutionID != raceID(i) || rec.WorkflowID != "w" || string(rec.Params) != raceParams(i):
		return bad("not what was admitted")
	case rec.AdmittedAt.IsZero() || rec.UpdatedAt.Before(rec.AdmittedAt):
		return bad("timestamps")
	case rec.Attempts < 0 || rec.Attempts > raceAttempts:
		return bad("attempts out of range")
	case rec.Lease != nil && (rec.Lease.ExecutionID != rec.ExecutionID || rec.Lease.Token != uint64(rec.Attempts)):
		return bad("the current lease is not the latest claim's")
	case (rec.Outcome != nil) != rec.Status.Terminal():
		return bad("an outcome exactly when terminal")
	}
	switch rec.Status {
	case execstore.StatusAdmitted:
		if rec.Attempts == 0 && rec.Lease != nil {
			return bad("a lease before any claim")
		}
	case execstore.StatusSuspended:
		if rec.Attempts == 0 {
			return bad("suspended before any claim")
		}
	case execstore.StatusCompleted:
		if rec.Attempts != raceAttempts || rec.Lease != nil || !rec.DueAt.IsZero() ||
			rec.Outcome.Status != execstore.StatusCompleted || string(rec.Outcome.Result) != strconv.Itoa(raceAttempts) {
			return bad("not the completion the writer acknowledged")
		}
	default:
		return bad("status")
	}
	return nil
}

// rank orders the statuses an execution of this test passes through.
func rank(s execstore.Status) int {
	switch s {
	case execstore.StatusAdmitted:
		return 0
	case execstore.StatusSuspended:
		return 1
	}
	return 2
}

// key reads k: the committed counter only grows.
func (v *raceView) key() error {
	val, ok, err := v.s.Read(ctx, "k")
	if err != nil {
		return fmt.Errorf("Read(k): %v", err)
	}
	if !ok {
		if v.kv != 0 {
			return fmt.Errorf("k vanished after holding %d", v.kv)
		}
		return nil
	}
	n, err := strconv.Atoi(string(val))
	if err != nil || n < v.kv || n > raceCommits {
		return fmt.Errorf("k = %s after %d", val, v.kv)
	}
	v.kv = n
	return nil
}

// checkStats reads the stats: counts only grow, stay within the scenario,
// and agree with each other and with the records this reader has seen.
func (v *raceView) checkStats() error {
	st, err := v.s.Stats(ctx)
	if err != nil {
		return fmt.Errorf("Stats: %v", err)
	}
	prev := v.stats
	switch {
	case st.Failed != nil:
		return fmt.Errorf("the store failed: %v", st.Failed)
	case st.Executions < max(prev.Executions, len(v.recs), raceInitial) || st.Executions > raceTotal:
		return fmt.Errorf("%d executions, after %d (and %d records seen)", st.Executions, prev.Executions, len(v.recs))
	case st.Terminal < prev.Terminal || st.Terminal > st.Executions:
		return fmt.Errorf("%d terminal of %d executions, after %d", st.Terminal, st.Executions, prev.Terminal)
	case st.Pending > st.Executions-st.Terminal:
		return fmt.Errorf("%d pending, but only %d executions are not terminal", st.Pending, st.Executions-st.Terminal)
	case st.WALLastIndex < prev.WALLastIndex || st.Now.Before(prev.Now):
		return fmt.Errorf("stats went back: %+v after %+v", st, prev)
	}
	v.stats = st
	return nil
}
