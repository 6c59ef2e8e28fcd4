package execstore_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

func TestCommitWritesAndDeletesKeys(t *testing.T) {
	f := newFixture(t)
	if err := f.s.Commit(ctx, execstore.Write{Key: "a", Value: raw(`1`)}, execstore.Write{Key: "b", Value: raw(`{"x": 2}`)}); err != nil {
		t.Fatal(err)
	}
	if err := f.s.Commit(ctx, execstore.Write{Key: "a"}, execstore.Write{Key: "b", Value: raw(`3`)}, execstore.Write{Key: "b", Value: raw(`4`)}); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	if _, ok, _ := f.s.Read(ctx, "a"); ok {
		t.Errorf("deleted key a still present")
	}
	if v, ok, _ := f.s.Read(ctx, "b"); !ok || string(v) != `4` {
		t.Errorf("b = %s %v, want the later write 4", v, ok)
	}
	if err := f.s.Commit(ctx); err != nil {
		t.Errorf("empty commit: %v", err)
	}
}

func TestCommitRefusesBadWritesAndChangesNothing(t *testing.T) {
	f := newFixture(t)
	for _, w := range [][]execstore.Write{
		{{Key: "", Value: raw(`1`)}},
		{{Key: "ok", Value: raw(`1`)}, {Key: "bad", Value: raw(`{`)}},
		{{Key: "k", Value: raw(``)}},
		{{Key: "\xff", Value: raw(`1`)}},
	} {
		if err := f.s.Commit(ctx, w...); !errors.Is(err, execstore.ErrInvalidArgument) {
			t.Errorf("Commit(%+v): err = %v, want ErrInvalidArgument", w, err)
		}
	}
	if _, ok, _ := f.s.Read(ctx, "ok"); ok {
		t.Fatalf("a refused commit wrote part of its writes")
	}
}

func TestWatchWakesOnTheFirstCommitAndIsRemoved(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.ack(f.claimOne("e"), execstore.Suspended())
	if res, err := f.s.Watch(ctx, "e", "k1", "k2", "k1"); err != nil || res != execstore.WakeRequested {
		t.Fatalf("Watch = %q, %v", res, err)
	}
	f.clock.Advance(time.Second)
	if err := f.s.Commit(ctx, execstore.Write{Key: "other", Value: raw(`1`)}); err != nil {
		t.Fatal(err)
	}
	if rec := f.get("e"); !rec.DueAt.IsZero() {
		t.Fatalf("woken by an unwatched key: %v", rec.DueAt)
	}
	f.clock.Advance(time.Second)
	if err := f.s.Commit(ctx, execstore.Write{Key: "k2"}); err != nil { // a delete counts
		t.Fatal(err)
	}
	if rec := f.get("e"); !rec.DueAt.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("DueAt = %v, want the commit's time", rec.DueAt)
	}
	f.ack(f.claimOne("e"), execstore.Suspended())
	// The whole watch was removed: k1 no longer wakes it.
	if err := f.s.Commit(ctx, execstore.Write{Key: "k1", Value: raw(`1`)}); err != nil {
		t.Fatal(err)
	}
	if rec := f.get("e"); !rec.DueAt.IsZero() {
		t.Fatalf("a removed watch fired: %v", rec.DueAt)
	}
}

func TestWatchOnUnknownAndTerminalExecutions(t *testing.T) {
	f := newFixture(t)
	if _, err := f.s.Watch(ctx, "ghost", "k"); !errors.Is(err, execstore.ErrExecutionNotFound) {
		t.Fatalf("Watch(ghost): err = %v", err)
	}
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	if _, err := f.s.Watch(ctx, "e"); !errors.Is(err, execstore.ErrInvalidArgument) {
		t.Fatalf("Watch with no keys: err = %v", err)
	}
	l := f.claimOne("e")
	if _, err := f.s.Watch(ctx, "e", "k"); err != nil {
		t.Fatal(err)
	}
	f.ack(l, execstore.Completed(nil))
	if res, err := f.s.Watch(ctx, "e", "k"); err != nil || res != execstore.WakeIgnored {
		t.Fatalf("Watch on terminal = %q, %v; want ignored", res, err)
	}
	// The terminal execution's earlier watch was dropped: a commit changes nothing.
	before := f.get("e")
	if err := f.s.Commit(ctx, execstore.Write{Key: "k", Value: raw(`1`)}); err != nil {
		t.Fatal(err)
	}
	if after := f.get("e"); !after.UpdatedAt.Equal(before.UpdatedAt) || !after.DueAt.IsZero() {
		t.Fatalf("terminal execution changed by a commit: %+v", after)
	}
}

func TestRepeatedWatchRegistersNothingMore(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	f.s.Watch(ctx, "e", "a", "b")
	logged := f.stats().WALLastIndex
	for i := 0; i < 3; i++ {
		if res, err := f.s.Watch(ctx, "e", "b", "a", "b"); err != nil || res != execstore.WakeRequested {
			t.Fatalf("repeat: %q %v", res, err)
		}
	}
	if f.stats().WALLastIndex != logged {
		t.Fatal("a repeated watch was logged")
	}
	f.s.Watch(ctx, "e", "a") // a different set is another watch
	if f.stats().WALLastIndex != logged+1 {
		t.Fatal("a different watch was not registered")
	}
}

func TestWatchLimitPerExecution(t *testing.T) {
	f := newFixture(t)
	f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	for i := 0; i < execstore.MaxWatchesPerExecution; i++ {
		if _, err := f.s.Watch(ctx, "e", fmt.Sprint("k", i)); err != nil {
			t.Fatalf("watch %d: %v", i, err)
		}
	}
	if _, err := f.s.Watch(ctx, "e", "k"); !errors.Is(err, execstore.ErrLimitExceeded) {
		t.Fatalf("watch over the limit: err = %v, want ErrLimitExceeded", err)
	}
	// One commit fires those it writes, and the count drops again.
	if err := f.s.Commit(ctx, execstore.Write{Key: "k0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Watch(ctx, "e", "k"); err != nil {
		t.Fatalf("watch after the commit: %v", err)
	}
}

// "A store commit and its wake requests are interrupted by a crash | After restart, either the commit and every wake are present, or neither is."
// The commit's log entry is cut at every byte offset, as a crash during its
// write could leave it; each cut must open with all of it or none of it.
func TestCommitAndItsWakesAreAtomicAcrossACrash(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"a", "b"} {
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
	}
	for _, l := range f.claim(10, time.Minute) {
		f.ack(l, execstore.Suspended())
	}
	f.s.Watch(ctx, "a", "k1")
	f.s.Watch(ctx, "b", "k2")
	f.s.Close()
	seg := lastSegment(t, filepath.Join(f.dir, "wal"))
	before := fileSize(t, seg)
	f.open()
	if err := f.s.Commit(ctx, execstore.Write{Key: "k1", Value: raw(`"v1"`)}, execstore.Write{Key: "k2", Value: raw(`"v2"`)}); err != nil {
		t.Fatal(err)
	}
	f.s.Close()
	f.s = nil
	after := fileSize(t, seg)
	if after <= before {
		t.Fatalf("commit wrote nothing: %d -> %d", before, after)
	}
	whole, none := 0, 0
	for cut := before; cut <= after; cut++ {
		dir := copyDir(t, f.dir)
		if err := os.Truncate(filepath.Join(dir, "wal", filepath.Base(seg)), cut); err != nil {
			t.Fatal(err)
		}
		s, err := execstore.Open(dir, execstore.Options{Now: f.clock.Now, NoSync: true})
		if err != nil {
			t.Fatalf("cut at %d: Open: %v", cut, err)
		}
		v1, ok1, _ := s.Read(ctx, "k1")
		_, ok2, _ := s.Read(ctx, "k2")
		ra, _ := s.Get(ctx, "a")
		rb, _ := s.Get(ctx, "b")
		woken := !ra.DueAt.IsZero() && !rb.DueAt.IsZero()
		asleep := ra.DueAt.IsZero() && rb.DueAt.IsZero()
		switch {
		case ok1 && ok2 && string(v1) == `"v1"` && woken:
			whole++
		case !ok1 && !ok2 && asleep:
			none++
		default:
			t.Fatalf("cut at %d: half a commit: k1 %v k2 %v, a due %v, b due %v", cut, ok1, ok2, ra.DueAt, rb.DueAt)
		}
		s.Close()
	}
	if whole != 1 || none != int(after-before) {
		t.Fatalf("whole %d, none %d over %d cuts", whole, none, after-before+1)
	}
}

func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if len(e.Name()) == 20 {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatalf("no segment in %s", dir)
	}
	slices.Sort(names)
	return filepath.Join(dir, names[len(names)-1])
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// copyDir copies a store directory (as a crash would leave it) to a new one.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o750)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
