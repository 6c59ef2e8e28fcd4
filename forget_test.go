package execstore_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/archive"
)

// forgetFixture is retentionFixture (retire an hour after the end, timers
// that never fire) that forgets a day after the end.
func forgetFixture(t *testing.T) *fixture {
	return untimedFixture(t, execstore.Options{NoSync: true, Retention: time.Hour, Archive: true, ForgetAfter: 24 * time.Hour})
}

// onDisk closes the store and counts the records its archive's files hold,
// forgotten ones included, then opens the store again.
func (f *fixture) onDisk() int {
	f.t.Helper()
	if err := f.s.Close(); err != nil {
		f.t.Fatal(err)
	}
	a, err := archive.Open(filepath.Join(f.dir, "archive"), archive.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	n, err := a.Check(0)
	if cerr := a.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		f.t.Fatal(err)
	}
	f.open()
	return n
}

// Archived executions past ForgetAfter are forgotten: reads do not find
// them, their IDs are admitted again as new executions, the counts and the
// archive's listing no longer hold them; across a reopen too. Their records
// stay on disk until no snapshot the store keeps counts them as archived,
// then are deleted.
func TestForgetAfterForgetsArchivedExecutionsAndThenDeletesThem(t *testing.T) {
	f := forgetFixture(t)
	f.completeMany(300)
	f.retireAll()
	if st := f.stats(); st.Archived != 300 {
		t.Fatalf("archived %d, want 300", st.Archived)
	}
	f.snapshotBytes() // before the forget: it counts them as archived

	f.clock.Advance(22 * time.Hour) // 24 hours after they ended: not past ForgetAfter yet
	f.admit(execstore.AdmitRequest{WorkflowID: "tick"})
	if st := f.stats(); st.Archived != 300 {
		t.Fatalf("archived %d at ForgetAfter's edge, want 300", st.Archived)
	}
	f.clock.Advance(time.Minute)
	before := f.stats().WALLastIndex
	f.admit(execstore.AdmitRequest{WorkflowID: "tick"})
	for reopen := range 2 {
		if reopen == 1 {
			f.reopen()
		}
		st := f.stats()
		if st.Archived != 0 || st.Terminal != 0 || st.Retired != 0 || st.ByStatus[execstore.StatusCompleted] != 0 || st.ByWorkflow["w1"] != 0 || st.Executions != 3 {
			t.Fatalf("after the forget (reopened %d): %+v", reopen, st)
		}
		if st.WALLastIndex != before+2 {
			t.Fatalf("log index %d -> %d: want the forget command and the admission", before, st.WALLastIndex)
		}
		if _, err := f.s.Get(ctx, "order-7"); !errors.Is(err, execstore.ErrExecutionNotFound) {
			t.Fatalf("Get of a forgotten execution: %v", err)
		}
		if page, err := f.s.ListArchived(ctx, execstore.ArchiveQuery{}); err != nil || len(page.Records) != 0 {
			t.Fatalf("ListArchived lists %d forgotten executions, %v", len(page.Records), err)
		}
		if err := f.s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.onDisk(); n != 300 {
		t.Fatalf("the archive holds %d records; a kept snapshot still counts the 300 as archived", n)
	}
	f.snapshotBytes() // the first to hold the cutoff; the older kept one does not
	if n := f.onDisk(); n != 300 {
		t.Fatalf("the archive holds %d records after one snapshot with the cutoff, want 300", n)
	}
	for range 2 { // both kept snapshots hold the cutoff (a process knows those it wrote)
		f.admit(execstore.AdmitRequest{WorkflowID: "tick"})
		f.snapshotBytes()
	}
	if n := f.onDisk(); n != 0 {
		t.Fatalf("the archive holds %d records once no kept snapshot needs them, want 0", n)
	}

	id := f.admit(execstore.AdmitRequest{ExecutionID: "order-7", WorkflowID: "again"})
	if rec := f.get(id); rec.WorkflowID != "again" || rec.Status != execstore.StatusAdmitted {
		t.Fatalf("a forgotten ID admitted again: %+v", rec)
	}
	if _, err := f.s.Admit(ctx, execstore.AdmitRequest{ExecutionID: "order-7", WorkflowID: "again"}); !errors.Is(err, execstore.ErrExecutionIDConflict) {
		t.Fatalf("its admission once more: %v", err)
	}
}

// Recovery from a snapshot older than a forget replays it exactly: the
// archive still holds what the replay asks for, an ID forgotten and archived
// again included (its new record is trimmed, its old one kept).
func TestARecoveryFromBeforeAForgetReplaysItExactly(t *testing.T) {
	f := forgetFixture(t)
	f.completeMany(40)
	f.retireAll()
	f.snapshotBytes() // the snapshot recovery falls back on
	f.clock.Advance(23 * time.Hour)
	f.admit(execstore.AdmitRequest{WorkflowID: "tick"}) // forgets the 40
	f.admit(execstore.AdmitRequest{ExecutionID: "order-3", WorkflowID: "again"})
	l := f.claimFor("order-3")
	again := f.ack(l, execstore.Completed(raw(`"second"`)))
	f.retireAll() // archives the new order-3 over the old
	f.snapshotBytes()
	want := f.stats()
	if want.Archived != 1 || want.ByWorkflow["again"] != 1 || want.ByWorkflow["w0"] != 0 {
		t.Fatalf("before the recovery: %+v", want)
	}
	f.recoverFromTheOlderSnapshot() // from before the forget
	again.Archived = true
	if diff := cmp.Diff(again, f.get("order-3")); diff != "" {
		t.Fatalf("order-3 (-want +got):\n%s", diff)
	}
	if _, err := f.s.Get(ctx, "order-4"); !errors.Is(err, execstore.ErrExecutionNotFound) {
		t.Fatalf("Get of a forgotten execution after the recovery: %v", err)
	}
	if err := f.s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// ForgetAfter is refused unless it can work: an archive to forget from, a
// retention to archive with, and a longer span than the retention's.
func TestForgetAfterIsRefusedWithoutAnArchiveOrWithinTheRetention(t *testing.T) {
	for _, o := range []execstore.Options{
		{ForgetAfter: -time.Hour, Archive: true, Retention: time.Minute},
		{ForgetAfter: time.Hour, Retention: time.Minute},
		{ForgetAfter: time.Hour, Archive: true},
		{ForgetAfter: time.Hour, Archive: true, Retention: time.Hour},
	} {
		o.NoSync = true
		s, err := execstore.Open(t.TempDir(), o)
		if !errors.Is(err, execstore.ErrInvalidArgument) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open with ForgetAfter %v, Archive %v, Retention %v: %v, want ErrInvalidArgument", o.ForgetAfter, o.Archive, o.Retention, err)
		}
	}
}
