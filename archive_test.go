package execstore_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/snapshot"
	"github.com/execstore/execstore/vfs"
)

// completeMany admits n executions (order-0 ... with params of about 200
// bytes), claims and completes them all, and returns their records.
func (f *fixture) completeMany(n int) map[string]execstore.Record {
	f.t.Helper()
	params := raw(fmt.Sprintf(`{"note":%q}`, strings.Repeat("p", 200)))
	for i := range n {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("order-%d", i), WorkflowID: fmt.Sprintf("w%d", i%3), Params: params})
	}
	done := map[string]execstore.Record{}
	for len(done) < n {
		leases := f.claim(256, time.Minute)
		if len(leases) == 0 {
			f.t.Fatalf("nothing to claim with %d of %d done", len(done), n)
		}
		acks := make([]execstore.Ack, len(leases))
		for i, l := range leases {
			acks[i] = execstore.Ack{Lease: l, Outcome: execstore.Completed(raw(`{"ok":true}`))}
		}
		res, err := f.s.AcknowledgeBatch(ctx, acks)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				f.t.Fatal(r.Err)
			}
			done[r.Record.ExecutionID] = r.Record
		}
	}
	return done
}

// retireAll moves the clock past the retention and lets the writer retire
// everything that ended before.
func (f *fixture) retireAll() {
	f.t.Helper()
	f.clock.Advance(2 * time.Hour)
	f.admit(execstore.AdmitRequest{WorkflowID: "tick"}) // a write: the writer retires all that is due first
}

// recoverFromTheOlderSnapshot closes the store, removes its newest snapshot
// and opens it again, from the older one and the log after it; the counts
// must be those before.
func (f *fixture) recoverFromTheOlderSnapshot() {
	f.t.Helper()
	want := f.stats()
	newest := f.newestSnapshot()
	if err := f.s.Close(); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Remove(newest.Path); err != nil {
		f.t.Fatal(err)
	}
	f.open()
	got := f.stats()
	if got.SnapshotIndex >= newest.Index {
		f.t.Fatalf("recovered from index %d: the newer snapshot (%d) was not dropped", got.SnapshotIndex, newest.Index)
	}
	if got.Archived != want.Archived || got.Executions != want.Executions || got.Terminal != want.Terminal ||
		!cmp.Equal(got.ByStatus, want.ByStatus) || !cmp.Equal(got.ByWorkflow, want.ByWorkflow) {
		f.t.Fatalf("after a recovery from the older snapshot: %+v\nbefore: %+v", got, want)
	}
}

func (f *fixture) newestSnapshot() snapshot.Info {
	f.t.Helper()
	infos, err := snapshot.List(vfs.Default, filepath.Join(f.dir, "snapshots"))
	if err != nil || len(infos) == 0 {
		f.t.Fatalf("snapshots: %v, %v", infos, err)
	}
	return infos[0] // newest first
}

func (f *fixture) snapshotBytes() int64 {
	f.t.Helper()
	if err := f.s.Snapshot(ctx); err != nil {
		f.t.Fatal(err)
	}
	fi, err := os.Stat(f.newestSnapshot().Path)
	if err != nil {
		f.t.Fatal(err)
	}
	return fi.Size()
}

// retentionFixture is a store that retires an hour after the end, with or
// without an archive, on a clock whose timers never fire.
func retentionFixture(t *testing.T, archive bool) *fixture {
	return untimedFixture(t, execstore.Options{NoSync: true, Retention: time.Hour, Archive: archive})
}

// untimedFixture is a store opened with opts on a clock whose timers never
// fire, closed at the test's end.
func untimedFixture(t *testing.T, opts execstore.Options) *fixture {
	f := &fixture{t: t, dir: t.TempDir(), clock: newClock()}
	f.opts = opts
	f.untimed()
	f.open()
	t.Cleanup(func() {
		if f.s != nil {
			f.s.Close()
		}
	})
	return f
}

// Archived executions leave the state: its snapshot does not grow with them
// (it does without the archive), while every read answers for them as it did,
// marked Archived, their IDs still conflict before anything is logged, and
// the counts still include them; across a reopen too.
func TestArchivedExecutionsLeaveTheSnapshotAndStillAnswer(t *testing.T) {
	const n = 3000
	sizes := map[bool]int64{}
	for _, archive := range []bool{false, true} {
		t.Run(fmt.Sprintf("archive=%v", archive), func(t *testing.T) {
			f := retentionFixture(t, archive)
			done := f.completeMany(n)
			f.retireAll()
			sizes[archive] = f.snapshotBytes()
			for _, reopen := range []bool{false, true} {
				if reopen {
					f.reopen()
				}
				st := f.stats()
				wantArchived := map[bool]int{false: 0, true: n}[archive]
				if st.Retired != n || st.Archived != wantArchived || st.Executions != n+1 || st.Terminal != n || st.ByStatus[execstore.StatusCompleted] != n {
					t.Fatalf("stats (reopened %v): retired %d, archived %d, executions %d, terminal %d, by status %v",
						reopen, st.Retired, st.Archived, st.Executions, st.Terminal, st.ByStatus)
				}
				if archive && st.ArchiveBytes == 0 {
					t.Fatal("Stats.ArchiveBytes is 0 with executions archived and flushed")
				}
				for id, rec := range done {
					want := rec
					want.Params, want.Archived = nil, archive
					if diff := cmp.Diff(want, f.get(id)); diff != "" {
						t.Fatalf("Get(%q) (reopened %v) (-want +got):\n%s", id, reopen, diff)
					}
				}
				before := f.stats().WALLastIndex
				_, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-7", WorkflowID: "w1"})
				if !errors.Is(err, execstore.ErrExecutionIDConflict) {
					t.Fatalf("re-admission of a retired ID: %v", err)
				}
				if after := f.stats().WALLastIndex; after != before {
					t.Fatalf("a conflicting admission was logged: index %d -> %d", before, after)
				}
				if rec, err := f.s.Await(ctx, "order-9"); err != nil || rec.Status != execstore.StatusCompleted || rec.Archived != archive {
					t.Fatalf("Await of a retired execution: %+v, %v", rec, err)
				}
				if d, err := f.s.Detail(ctx, "order-9", 10); err != nil || len(d.Steps) != 0 {
					t.Fatalf("Detail of a retired execution: %+v, %v", d, err)
				}
				if _, found, err := f.s.Step(ctx, "order-9", "k"); found || err != nil {
					t.Fatalf("Step of a retired execution: %v, %v", found, err)
				}
				if _, err := f.s.Get(ctx, "order-x"); !errors.Is(err, execstore.ErrExecutionNotFound) {
					t.Fatalf("Get of an ID never admitted: %v", err)
				}
				if err := f.s.CheckInvariants(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	// The live set is one execution: the archived snapshot holds about that
	// much, the other every retired record.
	if sizes[true]*20 > sizes[false] {
		t.Fatalf("snapshot with the archive %d bytes, without %d: the archived records are still in it", sizes[true], sizes[false])
	}
}

// Recovery may fall back on an older snapshot while the archive holds
// retirements applied after it (flushed before the newer snapshot): the
// replay must decide as the first run did, so it must not find those
// executions archived before it replays their retirement.
func TestARecoveryFromAnOlderSnapshotReplaysArchivedRetirementsExactly(t *testing.T) {
	f := retentionFixture(t, true)
	f.completeMany(50)
	f.retireAll()
	f.snapshotBytes() // the older snapshot: 50 archived
	done := f.completeMany(0)
	for i := range 40 {
		f.admit(execstore.AdmitRequest{ExecutionID: fmt.Sprintf("late-%d", i), WorkflowID: "late"})
	}
	for _, l := range f.claim(40, time.Minute) {
		done[l.ExecutionID] = f.ack(l, execstore.Failed(errors.New("no")))
	}
	f.retireAll()
	f.snapshotBytes() // the newer snapshot: 90 archived, all flushed
	f.recoverFromTheOlderSnapshot()
	for id, rec := range done {
		want := rec
		want.Archived = true
		if diff := cmp.Diff(want, f.get(id)); diff != "" {
			t.Fatalf("Get(%q) (-want +got):\n%s", id, diff)
		}
	}
	if err := f.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A data directory written without the archive (its retired records in
// memory and in its snapshots) opens with one: the retired records move to
// the archive, answer as before, and leave the next snapshot. From then on
// the directory's archive opens whatever the options say.
func TestRetiredRecordsOfAStoreWithoutAnArchiveMoveToIt(t *testing.T) {
	f := retentionFixture(t, false)
	done := f.completeMany(2000)
	f.retireAll()
	before := f.snapshotBytes()
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	f.opts.Archive = true
	f.open()
	if st := f.stats(); st.Archived != 2000 || st.Retired != 2000 {
		t.Fatalf("after opening with the archive: archived %d, retired %d", st.Archived, st.Retired)
	}
	after := f.snapshotBytes()
	if after*20 > before {
		t.Fatalf("the snapshot after the move has %d bytes, before it %d", after, before)
	}
	f.opts.Archive = false
	f.reopen()
	for id, rec := range done {
		want := rec
		want.Params, want.Archived = nil, true
		if diff := cmp.Diff(want, f.get(id)); diff != "" {
			t.Fatalf("Get(%q) (-want +got):\n%s", id, diff)
		}
	}
	if _, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-1", WorkflowID: "w"}); !errors.Is(err, execstore.ErrExecutionIDConflict) {
		t.Fatalf("a moved ID was admitted again: %v", err)
	}
}

// A damaged archive is an error, never "not found": neither a read nor an
// admission may take a damaged ID for a free one.
func TestADamagedArchiveIsAnErrorNeverAMiss(t *testing.T) {
	f := retentionFixture(t, true)
	f.completeMany(500)
	f.retireAll()
	f.snapshotBytes() // flushes the archive's tables
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(f.dir, "archive", "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no archive tables on disk")
	}
	for _, name := range tables {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(b)/2; i += 64 {
			b[i] ^= 0x5a // the data blocks, at the start of the file
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := execstore.Open(f.dir, f.opts)
	if err != nil {
		if !strings.Contains(err.Error(), "archive") {
			t.Fatalf("Open of a store with a damaged archive: %v", err)
		}
		t.Logf("found at open: %v", err)
		return // loud, and nothing answered
	}
	f.s = s
	if _, err := s.Get(ctx, "order-3"); err == nil || errors.Is(err, execstore.ErrExecutionNotFound) {
		t.Fatalf("Get of an execution in a damaged archive = %v; want an error that is not ErrExecutionNotFound", err)
	}
	if st, err := s.Stats(ctx); err != nil || st.ArchiveErr == nil {
		t.Fatalf("Stats after a failed read of the archive: ArchiveErr %v, %v", st.ArchiveErr, err)
	}
	if _, err := s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-3", WorkflowID: "w0"}); err == nil {
		t.Fatal("an ID in a damaged archive was admitted again")
	}
}

func TestAReplicatedStoreRefusesTheArchive(t *testing.T) {
	_, err := execstore.OpenReplicated(t.TempDir(), execstore.ReplicaOptions{Options: execstore.Options{Archive: true}})
	if !errors.Is(err, execstore.ErrInvalidArgument) {
		t.Fatalf("OpenReplicated with Options.Archive = %v, want ErrInvalidArgument", err)
	}
}

// ListArchived pages through the archive by the time executions ended, by
// workflow and by status, with cursors that continue exactly after a page
// and refuse another query; a store without an archive lists nothing.
func TestListArchivedFindsArchivedExecutionsByWorkflowTimeAndStatus(t *testing.T) {
	f := retentionFixture(t, true)
	want := map[string]execstore.Record{}
	for i := range 60 {
		id := fmt.Sprintf("job-%02d", i)
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: fmt.Sprintf("w%d", i%2)})
		l := f.claimFor(id)
		f.clock.Advance(time.Second) // each ends a second after the one before
		outcome := execstore.Completed(nil)
		if i%3 == 0 {
			outcome = execstore.Failed(errors.New("declined"))
		}
		rec := f.ack(l, outcome)
		rec.Archived = true
		want[id] = rec
	}
	f.retireAll()
	first := want["job-00"].UpdatedAt
	list := func(q execstore.ArchiveQuery) []string {
		t.Helper()
		var ids []string
		for pages := 0; ; pages++ {
			page, err := f.s.ListArchived(ctx, q)
			if err != nil || pages > 100 {
				t.Fatalf("ListArchived(%+v): %v", q, err)
			}
			for _, rec := range page.Records {
				if diff := cmp.Diff(want[rec.ExecutionID], rec); diff != "" {
					t.Fatalf("listed %q (-want +got):\n%s", rec.ExecutionID, diff)
				}
				ids = append(ids, rec.ExecutionID)
			}
			if page.Cursor == "" {
				return ids
			}
			q.Cursor = page.Cursor
		}
	}
	expect := func(keep func(i int) bool) []string {
		var ids []string
		for i := range 60 {
			if keep(i) {
				ids = append(ids, fmt.Sprintf("job-%02d", i))
			}
		}
		return ids
	}
	for _, tc := range []struct {
		name string
		q    execstore.ArchiveQuery
		want []string
	}{
		{"all", execstore.ArchiveQuery{Limit: 7}, expect(func(int) bool { return true })},
		{"a workflow", execstore.ArchiveQuery{WorkflowID: "w1", Limit: 4}, expect(func(i int) bool { return i%2 == 1 })},
		{"failures", execstore.ArchiveQuery{Status: execstore.StatusFailed, Limit: 3}, expect(func(i int) bool { return i%3 == 0 })},
		{"a workflow's failures in an hour", execstore.ArchiveQuery{WorkflowID: "w0", Status: execstore.StatusFailed,
			EndedAfter: first.Add(10 * time.Second), EndedBefore: first.Add(40 * time.Second), Limit: 2},
			expect(func(i int) bool { return i%2 == 0 && i%3 == 0 && i >= 10 && i < 40 })},
		{"nothing", execstore.ArchiveQuery{WorkflowID: "w9"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, list(tc.q)); diff != "" {
				t.Fatalf("listed (-want +got):\n%s", diff)
			}
		})
	}
	page, err := f.s.ListArchived(ctx, execstore.ArchiveQuery{Limit: 5})
	if err != nil || page.Cursor == "" {
		t.Fatalf("first page: %v", err)
	}
	for _, q := range []execstore.ArchiveQuery{
		{Limit: 5, WorkflowID: "w0", Cursor: page.Cursor}, // another query's cursor
		{Cursor: "!!"},
		{Limit: -1},
		{Limit: f.s.Limits().ListPageMax + 1},
		{Status: execstore.StatusAdmitted},
		{Status: "done"},
	} {
		if _, err := f.s.ListArchived(ctx, q); !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("ListArchived(%+v) = %v, want ErrInvalidArgument", q, err)
		}
	}
	plain := retentionFixture(t, false)
	plain.completeMany(3)
	plain.retireAll()
	if page, err := plain.s.ListArchived(ctx, execstore.ArchiveQuery{}); err != nil || len(page.Records) != 0 {
		t.Fatalf("a store without an archive listed %d archived executions, %v", len(page.Records), err)
	}
}

// archive/testdata/retired-v5 is a data directory the code before the archive wrote
// (state version 5): 42 executions, 30 of them retired in its snapshot and
// 10 more by retire commands in the log after it. Opened with the archive,
// all 40 move there and answer as before; opened without, they stay in
// memory as they were.
func TestADataDirectoryFromBeforeTheArchiveOpensWithAndWithoutIt(t *testing.T) {
	for _, archive := range []bool{false, true} {
		t.Run(fmt.Sprintf("archive=%v", archive), func(t *testing.T) {
			f := &fixture{t: t, dir: copyDir(t, "archive/testdata/retired-v5"), clock: newClock()}
			f.opts = execstore.Options{NoSync: true, Retention: time.Hour, Archive: archive, SegmentSize: 4096}
			f.untimed()
			f.open()
			t.Cleanup(func() { f.s.Close() })
			for _, reopen := range []bool{false, true} {
				if reopen {
					if archive {
						f.snapshotBytes() // without the moved records
					}
					f.reopen()
				}
				st := f.stats()
				wantArchived := map[bool]int{false: 0, true: 40}[archive]
				if st.Executions != 42 || st.Retired != 40 || st.Archived != wantArchived || st.ByStatus[execstore.StatusFailed] != 10 {
					t.Fatalf("reopened %v: executions %d, retired %d, archived %d, failed %d", reopen, st.Executions, st.Retired, st.Archived, st.ByStatus[execstore.StatusFailed])
				}
				for i := range 40 {
					rec := f.get(fmt.Sprintf("old-%02d", i))
					wantStatus := execstore.StatusCompleted
					if i%4 == 0 {
						wantStatus = execstore.StatusFailed
					}
					if rec.Status != wantStatus || rec.Archived != archive || rec.Params != nil || rec.WorkflowID != fmt.Sprintf("w%d", i%2) {
						t.Fatalf("reopened %v: old-%02d = %+v", reopen, i, rec)
					}
					if wantStatus == execstore.StatusCompleted && string(rec.Outcome.Result) != fmt.Sprintf(`{"i":%d}`, i) {
						t.Fatalf("old-%02d's result %s", i, rec.Outcome.Result)
					}
				}
				if _, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "old-05", WorkflowID: "w1"}); !errors.Is(err, execstore.ErrExecutionIDConflict) {
					t.Fatalf("an old retired ID admitted again: %v", err)
				}
				if err := f.s.CheckInvariants(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// The snapshot cadence follows the records a snapshot holds, which the
// archived ones are not among: a store that archived many executions still
// snapshots every Options.SnapshotEntries commands, so the log a reopen
// replays does not grow with the archive.
func TestArchivedExecutionsDoNotSpaceSnapshotsOut(t *testing.T) {
	f := &fixture{t: t, dir: t.TempDir(), clock: newClock()}
	f.opts = execstore.Options{NoSync: true, Retention: time.Hour, Archive: true, SnapshotEntries: 100}
	f.untimed()
	f.open()
	t.Cleanup(func() { f.s.Close() })
	f.completeMany(2000)
	f.retireAll()
	if err := f.s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	before := f.stats().SnapshotIndex
	// 150 logged commands: past SnapshotEntries, well short of an eighth
	// of the 2,000 archived executions.
	for i := range 150 {
		if err := f.s.Commit(ctx, execstore.Write{Key: "k", Value: raw(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "a snapshot after 100 commands", func() bool { return f.stats().SnapshotIndex > before })
}
