package execstore

import (
	"runtime"
	"testing"
	"time"
)

// groupStore is a writer with only what awaitGroup reads: the queue, the
// options, the committer's bound and the group's estimate.
func groupStore(wait time.Duration, expect, queued int) *writer {
	st := &Store{opts: Options{GroupWait: wait, MaxBatch: 4096}}
	st.in.init()
	w := &writer{s: st, c: &logCommitter{s: st}}
	w.group.expect = expect
	for i := 0; i < queued; i++ {
		st.in.reqs = append(st.in.reqs, &request{lead: true})
	}
	st.in.calls = queued
	return w
}

// The writer's wait for its callers is bounded, and a wait nobody answered
// makes it skip waiting for twice as many batches each time, so that callers
// who do not come back at once pay the bound rarely.
func TestGroupWaitThatNobodyAnswersEndsAtItsBoundAndBacksOff(t *testing.T) {
	s := groupStore(20*time.Millisecond, 4, 1)
	s.group.base = 1 // the one queued was there when the latest batch was answered
	for round, skipped := range []int{2, 4, 8, 16, 32, 64, 64} {
		s.awaitGroup()
		if got := s.group.missed.Load(); got != uint64(round+1) {
			t.Fatalf("round %d: %d waits missed, want %d", round, got, round+1)
		}
		if s.group.skip != skipped {
			t.Fatalf("round %d: skip %d batches, want %d", round, s.group.skip, skipped)
		}
		for range skipped {
			s.awaitGroup() // returns at once: nothing to wait for
		}
		if s.group.skip != 0 || s.group.missed.Load() != uint64(round+1) {
			t.Fatalf("round %d: after the skipped batches skip=%d missed=%d", round, s.group.skip, s.group.missed.Load())
		}
	}
	if s.group.waited.Load() != 0 {
		t.Fatalf("%d waits counted as answered", s.group.waited.Load())
	}
}

// A wait ends as soon as the expected calls have queued, counts as answered,
// and takes back one miss.
func TestGroupWaitEndsWhenTheExpectedCallsHaveQueued(t *testing.T) {
	s := groupStore(time.Hour, 3, 1)
	s.group.misses = 2
	go func() {
		// Once the wait has begun: queued before it, the calls would be
		// there already, and there would be nothing to wait for.
		for s.group.looks.Load() == 0 {
			runtime.Gosched()
		}
		for range 2 {
			s.s.in.mu.Lock()
			s.s.in.reqs = append(s.s.in.reqs, &request{lead: true})
			s.s.in.calls++
			s.s.in.mu.Unlock()
		}
	}()
	s.awaitGroup() // an hour's bound: only the two calls end it
	if s.group.waited.Load() != 1 || s.group.missed.Load() != 0 {
		t.Fatalf("waited %d, missed %d: want 1 and 0", s.group.waited.Load(), s.group.missed.Load())
	}
	if s.group.misses != 1 || s.group.skip != 0 {
		t.Fatalf("misses %d, skip %d after an answered wait: want 1 and 0", s.group.misses, s.group.skip)
	}
}

// A wait that some callers answered, but not all, ends at its bound without
// backing off: the callers are coming back, only not all in time.
func TestGroupWaitAnsweredInPartDoesNotBackOff(t *testing.T) {
	s := groupStore(20*time.Millisecond, 3, 2)
	s.group.base = 1 // one of the two queued came back since the latest batch
	s.awaitGroup()
	if s.group.missed.Load() != 1 || s.group.skip != 0 || s.group.misses != 0 {
		t.Fatalf("missed %d, skip %d, misses %d: want 1, 0, 0", s.group.missed.Load(), s.group.skip, s.group.misses)
	}
}

// The writer never waits when waiting could not save an fsync or nothing
// asks for one: without fsync, with GroupWait negative, with nothing queued,
// with the expected calls queued already, with a full batch queued, or when
// fewer than two callers are expected.
func TestGroupWaitOnlyWhenItCanSaveAnFsync(t *testing.T) {
	full := groupStore(time.Hour, 3, 1)
	full.s.opts.MaxBatch = 1
	noSync := groupStore(time.Hour, 3, 1)
	noSync.s.opts.NoSync = true
	for name, s := range map[string]*writer{
		"no fsync":       noSync,
		"GroupWait < 0":  groupStore(-1, 3, 1),
		"nothing queued": groupStore(time.Hour, 3, 0),
		"all queued":     groupStore(time.Hour, 3, 3),
		"batch full":     full,
		"one caller":     groupStore(time.Hour, 1, 1),
		"closing": func() *writer {
			s := groupStore(time.Hour, 3, 1)
			s.s.in.closing = true
			return s
		}(),
	} {
		s.awaitGroup() // an hour's bound: a wait here would hang the test
		if s.group.waited.Load()+s.group.missed.Load() != 0 {
			t.Errorf("%s: waited %d, missed %d", name, s.group.waited.Load(), s.group.missed.Load())
		}
	}
}
