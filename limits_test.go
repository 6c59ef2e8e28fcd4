package execstore_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/vfs"
	"github.com/execstore/execstore/wal"
	"github.com/google/go-cmp/cmp"
)

// writerHold holds the store's writer inside its next WAL write, through the
// store's filesystem (Options.FS). A request queued meanwhile cannot be
// answered until the hold lets go, so an answer that arrives while the writer
// is held came from the caller's goroutine.
type writerHold struct {
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
	once    sync.Once
	blocker chan error
}

// holdingFixture is a fixture whose writer hold can stop. The hold is let go
// before the fixture closes the store, so a failing test does not hang.
func holdingFixture(t *testing.T, limits execstore.Limits) (*fixture, *writerHold) {
	t.Helper()
	h := &writerHold{held: make(chan struct{}), release: make(chan struct{}), blocker: make(chan error, 1)}
	f := newFixture(t)
	f.s.Close()
	f.opts.Limits = limits
	f.opts.FS = onLog(vfs.OpWrite, func() error {
		if h.armed.CompareAndSwap(true, false) {
			close(h.held)
			<-h.release
		}
		return nil
	})
	f.open()
	t.Cleanup(h.let) // runs before the fixture's Close
	return f, h
}

// hold admits a blocker and returns once the writer is held inside its write.
func (h *writerHold) hold(f *fixture) {
	f.t.Helper()
	h.armed.Store(true)
	go func() {
		_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "blocker", WorkflowID: "blocker"})
		h.blocker <- err
	}()
	select {
	case <-h.held:
	case <-time.After(patience):
		f.t.Fatal("the writer never reached a WAL write")
	}
}

// let lets the held writer go on.
func (h *writerHold) let() { h.once.Do(func() { close(h.release) }) }

// letAndWait lets the writer go and waits for the blocker's answer.
func (h *writerHold) letAndWait(t *testing.T) {
	t.Helper()
	h.let()
	select {
	case err := <-h.blocker:
		if err != nil {
			t.Fatalf("blocker: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("the blocker was never answered")
	}
}

// answeredWhileHeld runs fn and returns its error, failing the test if fn is
// not answered while the writer is held: it was queued behind the writer.
func answeredWhileHeld(t *testing.T, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(patience):
		t.Fatal("the request waited for the held writer: it was queued, not checked in its caller's goroutine")
		return nil
	}
}

// jsonStringOf is a JSON string value of exactly n bytes.
func jsonStringOf(n int) []byte { return []byte(`"` + strings.Repeat("v", n-2) + `"`) }

// paramsOf is a JSON object of exactly n bytes.
func paramsOf(n int) []byte { return []byte(`{"p":"` + strings.Repeat("p", n-8) + `"}`) }

// smallLimits make every limit cheap to reach.
var smallLimits = execstore.Limits{EventBytes: 64, ValueBytes: 32, KeyBytes: 8, ContextEntries: 2, WritesPerCommit: 2,
	CommitBytes: 40, KeysPerWatch: 2, ClaimLimit: 3, AcknowledgeBatchBytes: 100, LeaseDuration: time.Hour, RetryAfter: time.Hour,
	CancelReasonBytes: 8}

// Every size and count limit, and the ID rule, is checked in the caller's
// goroutine BEFORE the request is queued: one request over it is answered
// while the writer is held, with an error that matches ErrLimitExceeded
// besides the route's own sentinel (whose code it carries), changes nothing
// and stops nothing; the same request at the limit goes through afterwards.
func TestEveryLimitIsCheckedBeforeTheRequestIsQueued(t *testing.T) {
	admit := func(id, workflow string, params []byte, context map[string]string) func(*fixture, execstore.Lease) error {
		return func(f *fixture, _ execstore.Lease) error {
			_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: id, WorkflowID: workflow, Params: params, Context: context})
			return err
		}
	}
	start := func(params []byte) func(*fixture, execstore.Lease) error {
		return func(f *fixture, l execstore.Lease) error {
			_, err := f.s.Start(ctx, l, "child", "w", params)
			return err
		}
	}
	saveStep := func(key string, value []byte) func(*fixture, execstore.Lease) error {
		return func(f *fixture, l execstore.Lease) error { return f.s.SaveStep(ctx, l, key, value) }
	}
	commit := func(writes ...execstore.Write) func(*fixture, execstore.Lease) error {
		return func(f *fixture, _ execstore.Lease) error { return f.s.Commit(ctx, writes...) }
	}
	watch := func(keys ...string) func(*fixture, execstore.Lease) error {
		return func(f *fixture, _ execstore.Lease) error { _, err := f.s.Watch(ctx, "e", keys...); return err }
	}
	claim := func(limit int, d time.Duration) func(*fixture, execstore.Lease) error {
		return func(f *fixture, _ execstore.Lease) error { _, err := f.s.ClaimDue(ctx, limit, d); return err }
	}
	acks := func(n int, outcome execstore.RunOutcome) func(*fixture, execstore.Lease) error {
		return func(f *fixture, l execstore.Lease) error {
			batch := make([]execstore.Ack, n)
			for i := range batch {
				batch[i] = execstore.Ack{Lease: l, Outcome: outcome}
			}
			_, err := f.s.AcknowledgeBatch(ctx, batch)
			return err
		}
	}
	put := func(id string, params []byte, every time.Duration) func(*fixture, execstore.Lease) error {
		return func(f *fixture, _ execstore.Lease) error {
			_, err := f.s.PutSchedule(ctx, execstore.Schedule{ID: id, WorkflowID: "w", Params: params, Interval: every, Start: t0})
			return err
		}
	}
	id200, id201 := strings.Repeat("i", execstore.IDBytes), strings.Repeat("i", execstore.IDBytes+1)
	w := func(key string, value []byte) execstore.Write { return execstore.Write{Key: key, Value: value} }
	cases := []struct {
		name     string
		want     error
		over, at func(f *fixture, l execstore.Lease) error
	}{
		{"params and context together", execstore.ErrInvalidExecutionEvent,
			admit("x", "w", paramsOf(50), map[string]string{"k": strings.Repeat("c", 14)}),
			admit("x", "w", paramsOf(50), map[string]string{"k": strings.Repeat("c", 13)})},
		{"context entries", execstore.ErrInvalidExecutionEvent,
			admit("x", "w", nil, map[string]string{"a": "", "b": "", "c": ""}), admit("x", "w", nil, map[string]string{"a": "", "b": ""})},
		{"execution ID bytes", execstore.ErrInvalidExecutionEvent, admit(id201, "w", nil, nil), admit(id200, "w", nil, nil)},
		{"workflow ID bytes", execstore.ErrInvalidExecutionEvent, admit("x", id201, nil, nil), admit("x", id200, nil, nil)},
		// A child's params alone count: it inherits its caller's context.
		{"a child start's params", execstore.ErrInvalidExecutionEvent, start(paramsOf(65)), start(paramsOf(64))},
		{"step key bytes", execstore.ErrInvalidArgument, saveStep(strings.Repeat("k", 9), []byte(`1`)), saveStep(strings.Repeat("k", 8), []byte(`1`))},
		{"step value bytes", execstore.ErrInvalidArgument, saveStep("s", jsonStringOf(33)), saveStep("s", jsonStringOf(32))},
		{"writes per commit", execstore.ErrInvalidArgument,
			commit(w("a", []byte(`1`)), w("b", []byte(`1`)), w("c", []byte(`1`))), commit(w("a", []byte(`1`)), w("b", []byte(`1`)))},
		{"keys and values per commit", execstore.ErrInvalidArgument,
			commit(w("k1", jsonStringOf(19)), w("k2", jsonStringOf(19))), commit(w("k1", jsonStringOf(18)), w("k2", jsonStringOf(18)))},
		{"store value bytes", execstore.ErrInvalidArgument, commit(w("k", jsonStringOf(33))), commit(w("k", jsonStringOf(32)))},
		{"store key bytes", execstore.ErrInvalidArgument, commit(w(strings.Repeat("k", 9), []byte(`1`))), commit(w(strings.Repeat("k", 8), []byte(`1`)))},
		{"keys per watch", execstore.ErrInvalidArgument, watch("a", "b", "c"), watch("a", "b")},
		{"watch key bytes", execstore.ErrInvalidArgument, watch(strings.Repeat("k", 9)), watch(strings.Repeat("k", 8))},
		{"claim limit", execstore.ErrInvalidArgument, claim(4, time.Minute), claim(3, time.Minute)},
		{"lease duration of a claim", execstore.ErrInvalidArgument, claim(1, time.Hour+1), claim(1, time.Hour)},
		{"lease duration of a renewal", execstore.ErrInvalidArgument,
			func(f *fixture, l execstore.Lease) error { _, err := f.s.Renew(ctx, l, time.Hour+1); return err },
			func(f *fixture, l execstore.Lease) error { _, err := f.s.Renew(ctx, l, time.Hour); return err }},
		{"retry delay", execstore.ErrInvalidArgument,
			func(f *fixture, l execstore.Lease) error { return f.s.Release(ctx, l, time.Hour+1) },
			func(f *fixture, l execstore.Lease) error { return f.s.Release(ctx, l, time.Hour) }},
		{"acknowledgements per batch", execstore.ErrInvalidArgument, acks(4, execstore.Suspended()), acks(3, execstore.Suspended())},
		{"cancel reason bytes", execstore.ErrInvalidArgument,
			func(f *fixture, _ execstore.Lease) error {
				_, err := f.s.Cancel(ctx, "e", strings.Repeat("r", 9))
				return err
			},
			func(f *fixture, _ execstore.Lease) error {
				_, err := f.s.Cancel(ctx, "e", strings.Repeat("r", 8))
				return err
			}},
		{"max attempts", execstore.ErrInvalidExecutionEvent,
			func(f *fixture, _ execstore.Lease) error {
				_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "x", WorkflowID: "w", MaxAttempts: execstore.MaxAttemptsLimit + 1})
				return err
			},
			func(f *fixture, _ execstore.Lease) error {
				_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "x", WorkflowID: "w", MaxAttempts: execstore.MaxAttemptsLimit})
				return err
			}},
		{"bytes per acknowledgement batch", execstore.ErrInvalidArgument,
			acks(3, execstore.Completed(jsonStringOf(32))), acks(1, execstore.Completed(jsonStringOf(32)))},
		{"schedule ID bytes", execstore.ErrInvalidArgument,
			put(strings.Repeat("s", execstore.ScheduleIDBytes+1), nil, time.Second), put(strings.Repeat("s", execstore.ScheduleIDBytes), nil, time.Second)},
		{"a schedule's params", execstore.ErrInvalidArgument, put("s", paramsOf(65), time.Second), put("s", paramsOf(64), time.Second)},
		{"a schedule's interval", execstore.ErrInvalidArgument, put("s", nil, time.Second-1), put("s", nil, time.Second)},
		{"cron expression bytes", execstore.ErrInvalidArgument,
			func(f *fixture, _ execstore.Lease) error {
				_, err := f.s.PutSchedule(ctx, execstore.Schedule{ID: "s", WorkflowID: "w", Cron: "0 2 * * *" + strings.Repeat(" ", 248), Start: t0})
				return err
			},
			func(f *fixture, _ execstore.Lease) error {
				_, err := f.s.PutSchedule(ctx, execstore.Schedule{ID: "s", WorkflowID: "w", Cron: "0 2 * * *" + strings.Repeat(" ", 247), Start: t0})
				return err
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, h := holdingFixture(t, smallLimits)
			f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w", Context: map[string]string{"tenant": "t"}})
			leases := f.claim(1, time.Minute)
			if len(leases) != 1 {
				t.Fatalf("ClaimDue = %+v, want e", leases)
			}
			l := leases[0]
			h.hold(f)
			before, rec := f.stats(), f.get("e")

			err := answeredWhileHeld(t, func() error { return c.over(f, l) })
			if !errors.Is(err, c.want) || !errors.Is(err, execstore.ErrLimitExceeded) || execstore.ErrorCode(err) != execstore.ErrorCode(c.want) {
				t.Fatalf("over the limit: err = %v (code %q), want one matching %v and ErrLimitExceeded, with the first's code",
					err, execstore.ErrorCode(err), c.want)
			}
			h.letAndWait(t)
			after := f.stats()
			if after.Failed != nil || after.WALLastIndex != before.WALLastIndex+1 || after.Executions != before.Executions+1 {
				t.Fatalf("the refused request changed the store: %+v, then %+v (only the blocker may be logged)", before, after)
			}
			if diff := cmp.Diff(rec, f.get("e")); diff != "" {
				t.Fatalf("the refused request changed e (-before +after):\n%s", diff)
			}
			if err := c.at(f, l); err != nil {
				t.Fatalf("at the limit, after a refusal: %v", err)
			}
		})
	}
}

// The Limits section of docs/operating.md states the defaults; a changed
// default makes it wrong.
func TestTheDefaultLimitsAreTheOnesTheManualStates(t *testing.T) {
	want := execstore.Limits{
		EventBytes:            1 << 20,  // "params and context together 1 MiB"
		ValueBytes:            1 << 20,  // "results, step values and store values 1 MiB"
		KeyBytes:              1024,     // "step and store keys 1024 bytes"
		ContextEntries:        1024,     // "1024 context entries"
		WritesPerCommit:       1024,     // "1024 writes ... per commit"
		CommitBytes:           8 << 20,  // "8 MiB of keys and values per commit"
		KeysPerWatch:          64,       // "64 keys per watch"
		ClaimLimit:            10_000,   // "claims and AcknowledgeBatch calls of at most 10,000"
		AcknowledgeBatchBytes: 64 << 20, // "64 MiB per AcknowledgeBatch call"
		LeaseDuration:         24 * time.Hour,
		RetryAfter:            365 * 24 * time.Hour,
		ErrorMessageBytes:     16 << 10,
		ErrorCauseDepth:       8,
		ListPageDefault:       100,         // "pages of List and Changes of 100 records by default"
		ListPageMax:           1000,        // "and at most 1000"
		CancelReasonBytes:     4096,        // "cancellation reasons 4096 bytes"
		Schedules:             10_000,      // "10,000 schedules"
		ScheduleInterval:      time.Second, // "intervals of at least 1 s"
		ScheduleCatchUp:       1000,        // "1,000 missed occurrences admitted in a row"
	}
	if diff := cmp.Diff(want, execstore.DefaultLimits); diff != "" {
		t.Errorf("DefaultLimits (-manual +code):\n%s", diff)
	}
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"IDBytes", execstore.IDBytes, 200},
		{"MaxAttemptsLimit", execstore.MaxAttemptsLimit, 65535},
		{"MaxStepsPerExecution", execstore.MaxStepsPerExecution, 100_000},
		{"MaxWatchesPerExecution", execstore.MaxWatchesPerExecution, 1024},
		{"DefaultMaxBatchBytes", execstore.DefaultMaxBatchBytes, 64 << 20},
		{"wal.MaxPayloadBytes (one WAL entry)", wal.MaxPayloadBytes, 64 << 20},
		{"DefaultSnapshotEntries", execstore.DefaultSnapshotEntries, 100_000},
		{"DefaultSnapshotWALBytes", execstore.DefaultSnapshotWALBytes, 64 << 20},
		{"StatsWorkflowsMax", execstore.StatsWorkflowsMax, 1000},
		{"ScheduleIDBytes", execstore.ScheduleIDBytes, 169},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, the manual says %d", c.name, c.got, c.want)
		}
	}
}

// A request that is malformed rather than too large is refused with its
// sentinel alone: only a request over a limit matches ErrLimitExceeded, so a
// caller (the HTTP server's 400 and 422) can tell the two apart.
func TestAMalformedRequestDoesNotMatchErrLimitExceeded(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claim(1, time.Minute)[0]
	cases := []struct {
		name string
		want error
		call func() error
	}{
		{"an empty workflow ID", execstore.ErrInvalidExecutionEvent, func() error {
			_, err := f.s.Admit(ctx, execstore.AdmitRequest{WorkflowID: ""})
			return err
		}},
		{"params that are not an object", execstore.ErrInvalidExecutionEvent, func() error {
			_, err := f.s.Admit(ctx, execstore.AdmitRequest{WorkflowID: "w", Params: []byte(`[]`)})
			return err
		}},
		{"a negative max attempts", execstore.ErrInvalidExecutionEvent, func() error {
			_, err := f.s.Admit(ctx, execstore.AdmitRequest{WorkflowID: "w", MaxAttempts: -1})
			return err
		}},
		{"an empty step key", execstore.ErrInvalidArgument, func() error { return f.s.SaveStep(ctx, l, "", []byte(`1`)) }},
		{"a step value that is not JSON", execstore.ErrInvalidArgument, func() error { return f.s.SaveStep(ctx, l, "s", []byte(`{`)) }},
		{"a claim of no executions", execstore.ErrInvalidArgument, func() error { _, err := f.s.ClaimDue(ctx, 0, time.Minute); return err }},
		{"a lease of no time", execstore.ErrInvalidArgument, func() error { _, err := f.s.ClaimDue(ctx, 1, 0); return err }},
		{"a negative retry delay", execstore.ErrInvalidArgument, func() error { return f.s.Release(ctx, l, -1) }},
		{"a watch of no keys", execstore.ErrInvalidArgument, func() error { _, err := f.s.Watch(ctx, "e"); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if !errors.Is(err, c.want) || errors.Is(err, execstore.ErrLimitExceeded) {
				t.Fatalf("err = %v, want %v and not ErrLimitExceeded", err, c.want)
			}
		})
	}
}

// Store.Limits answers the limits the store enforces: the ones given, with
// every field left zero at its default.
func TestStoreLimitsAreTheOptionsLimitsWithTheirDefaults(t *testing.T) {
	given := execstore.Limits{CommitBytes: 1 << 10, ClaimLimit: 7, LeaseDuration: time.Minute}
	s, err := execstore.Open(t.TempDir(), execstore.Options{NoSync: true, Limits: given})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := execstore.DefaultLimits
	want.CommitBytes, want.ClaimLimit, want.LeaseDuration = given.CommitBytes, given.ClaimLimit, given.LeaseDuration
	if diff := cmp.Diff(want, s.Limits()); diff != "" {
		t.Errorf("Store.Limits (-want +got):\n%s", diff)
	}
	// The store enforces what it answers: one write over CommitBytes is refused.
	if err := s.Commit(ctx, execstore.Write{Key: "k", Value: jsonStringOf(1 << 10)}); !errors.Is(err, execstore.ErrLimitExceeded) {
		t.Errorf("a commit over the CommitBytes Limits answered: %v", err)
	}
}
