package archive

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/google/go-cmp/cmp"

	"github.com/execstore/execstore/fsm"
)

func open(t *testing.T, dir string) *Archive {
	t.Helper()
	a, err := Open(dir, Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// rec makes a retired record: workflows w0..w2, updated at 1000+i, every
// fifth failed, every seventh with a parent.
func rec(i int) fsm.ArchivedRecord {
	r := fsm.ArchivedRecord{ID: fmt.Sprintf("order-%06d", i), Retired: fsm.Retired{
		WorkflowID: fmt.Sprintf("w%d", i%3),
		Outcome:    &fsm.Outcome{Status: fsm.StatusCompleted, Result: fmt.Sprintf(`{"n":%d}`, i), HasRes: true},
		AdmittedAt: int64(500 + i), UpdatedAt: int64(1000 + i), Deliveries: uint64(1 + i%4),
	}}
	if i%5 == 0 {
		r.Outcome = &fsm.Outcome{Status: fsm.StatusFailed, Error: &fsm.ErrorInfo{Name: "Boom", Message: "failed " + r.ID}}
	}
	if i%7 == 0 {
		r.Parent = &fsm.Parent{ExecutionID: "parent", StepKey: r.ID}
	}
	return r
}

func recs(from, to int) []fsm.ArchivedRecord {
	var out []fsm.ArchivedRecord
	for i := from; i < to; i++ {
		out = append(out, rec(i))
	}
	return out
}

func TestAnArchivedRecordReadsBackAsItWasPutWithItsRetireIndex(t *testing.T) {
	a := open(t, t.TempDir())
	if err := a.Put(recs(0, 100), 7); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		want := rec(i)
		got, index, found, err := a.Get(want.ID)
		if err != nil || !found || index != 7 {
			t.Fatalf("Get(%q) = found %v, index %d, %v", want.ID, found, index, err)
		}
		if diff := cmp.Diff(want.Retired, got); diff != "" {
			t.Fatalf("Get(%q) (-put +got):\n%s", want.ID, diff)
		}
	}
	for _, id := range []string{"order-000100", "order-", "", "zzz"} {
		if _, _, found, err := a.Get(id); found || err != nil {
			t.Fatalf("Get(%q) of an absent ID = found %v, %v", id, found, err)
		}
	}
}

func TestAFlushedArchiveKeepsEverythingAcrossAReopen(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Put(recs(0, 50), 3); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if _, _, _, err := a.Get("order-000001"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close = %v, want ErrClosed", err)
	}
	b := open(t, dir)
	for i := range 50 {
		if _, _, found, err := b.Get(rec(i).ID); !found || err != nil {
			t.Fatalf("after a reopen, Get(%q) = %v, %v", rec(i).ID, found, err)
		}
	}
	if n, err := b.Check(0); n != 50 || err != nil {
		t.Fatalf("Check = %d, %v; want 50 records", n, err)
	}
}

func TestTrimAfterRemovesExactlyTheRetirementsAfterAnIndex(t *testing.T) {
	a := open(t, t.TempDir())
	for k := range 5 {
		if err := a.Put(recs(10*k, 10*k+10), uint64(100+k)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := a.TrimAfter(102)
	if n != 20 || err != nil {
		t.Fatalf("TrimAfter(102) = %d, %v; want 20 removed", n, err)
	}
	for i := range 50 {
		_, _, found, err := a.Get(rec(i).ID)
		if err != nil || found != (i < 30) {
			t.Fatalf("after TrimAfter(102), Get(%q) = found %v, %v", rec(i).ID, found, err)
		}
	}
	if got, err := a.Check(0); got != 30 || err != nil {
		t.Fatalf("Check = %d, %v", got, err)
	}
	if page, _, _, err := a.Scan(Query{To: 1 << 62, Limit: 100}); len(page) != 30 || err != nil {
		t.Fatalf("the listing after a trim has %d records, %v", len(page), err)
	}
	if n, err := a.TrimAfter(200); n != 0 || err != nil {
		t.Fatalf("TrimAfter past the end = %d, %v", n, err)
	}
}

func TestAListingPagesInTimeThenIDOrderWithinItsBounds(t *testing.T) {
	a := open(t, t.TempDir())
	if err := a.Put(recs(0, 60), 1); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		q        Query
		want     func(i int) bool
		pageSize int
	}{
		{"all", Query{From: 0, To: 1 << 62}, func(int) bool { return true }, 7},
		{"a time range", Query{From: 1010, To: 1020}, func(i int) bool { return i >= 10 && i < 20 }, 3},
		{"a workflow", Query{WorkflowID: "w1", From: 0, To: 1 << 62}, func(i int) bool { return i%3 == 1 }, 4},
		{"a workflow in a range", Query{WorkflowID: "w2", From: 1005, To: 1030}, func(i int) bool { return i%3 == 2 && i >= 5 && i < 30 }, 100},
		{"an unknown workflow", Query{WorkflowID: "w", From: 0, To: 1 << 62}, func(int) bool { return false }, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want, got []string
			for i := range 60 {
				if tc.want(i) {
					want = append(want, rec(i).ID)
				}
			}
			q := tc.q
			q.Limit = tc.pageSize
			for pages := 0; ; pages++ {
				page, more, _, err := a.Scan(q)
				if err != nil || pages > 100 {
					t.Fatal(err)
				}
				for _, e := range page {
					got = append(got, e.ID)
				}
				if !more {
					break
				}
				last := page[len(page)-1]
				q.AfterUpdatedAt, q.AfterID = last.UpdatedAt, last.ID
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("listed (-want +got):\n%s", diff)
			}
		})
	}
	if _, _, _, err := a.Scan(Query{To: 10}); err == nil {
		t.Fatal("a listing with no limit was accepted")
	}
}

// A damaged value, or an index entry without its record, is an error: never
// a miss, which would let an ID be admitted twice.
func TestADamagedArchiveIsAnErrorNeverAMiss(t *testing.T) {
	a := open(t, t.TempDir())
	if err := a.Put(recs(0, 3), 1); err != nil {
		t.Fatal(err)
	}
	id := rec(1).ID
	if err := a.db.Set(recordKey(nil, id), []byte{fsm.ArchiveVersion, 0xff}, pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if _, _, found, err := a.Get(id); !errors.Is(err, ErrCorrupt) || found {
		t.Fatalf("Get of a damaged record = found %v, %v; want ErrCorrupt", found, err)
	}
	if _, err := a.Check(0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check of a damaged record = %v", err)
	}
	if err := a.db.Delete(recordKey(nil, id), pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := a.Scan(Query{To: 1 << 62, Limit: 10}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a listing through an index entry without its record = %v", err)
	}
	if _, err := a.Check(0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check with index entries without their record = %v", err)
	}
}

func TestAnInvalidRecordIsRefusedAndNothingOfItsBatchWritten(t *testing.T) {
	a := open(t, t.TempDir())
	bad := recs(0, 3)
	bad[2].Outcome = &fsm.Outcome{Status: fsm.StatusAdmitted}
	if err := a.Put(bad, 1); err == nil {
		t.Fatal("a record that is not terminal was archived")
	}
	if _, _, found, _ := a.Get(bad[0].ID); found {
		t.Fatal("a refused batch wrote its first record")
	}
}

// A Reader answers as Get does, from the archive as it was at its first
// read; closed, it reads the archive as it is at its next.
func TestAReaderSeesWhatWasPutBeforeItsFirstReadOrSinceItWasClosed(t *testing.T) {
	a := open(t, t.TempDir())
	if err := a.Put(recs(0, 10), 1); err != nil {
		t.Fatal(err)
	}
	r := a.NewReader()
	defer r.Close()
	if got, index, found, err := r.Get(rec(3).ID); !found || err != nil || index != 1 || !cmp.Equal(got, rec(3).Retired) {
		t.Fatalf("Reader.Get = %+v, %d, %v, %v", got, index, found, err)
	}
	if err := a.Put(recs(10, 20), 2); err != nil {
		t.Fatal(err)
	}
	if _, _, found, err := r.Get(rec(15).ID); found || err != nil {
		t.Fatalf("a reader saw a record put after its first read: %v, %v", found, err)
	}
	r.Close()
	if _, index, found, err := r.Get(rec(15).ID); !found || err != nil || index != 2 {
		t.Fatalf("a closed reader did not see the record put before its next read: %v, %d, %v", found, index, err)
	}
	if _, _, found, err := r.Get("absent"); found || err != nil {
		t.Fatalf("Reader.Get of an absent ID = %v, %v", found, err)
	}
}

func FuzzDecodeArchived(f *testing.F) {
	for i := range 8 {
		r := rec(i)
		f.Add(fsm.AppendArchived(nil, &r.Retired, uint64(i)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, index, err := fsm.DecodeArchived(b)
		if err != nil {
			return
		}
		if again := fsm.AppendArchived(nil, &r, index); string(again) != string(b) {
			t.Fatalf("a decoded value encodes differently:\n%x\n%x", b, again)
		}
	})
}

// An ID the store forgot and admitted again: its new record goes over the
// old one (PutMerging), which reads, lists and checks as before; TrimAfter
// takes the new one back out, leaving the old; putting it again is a
// replay; Forget deletes the old records, the ID's new one stays.
func TestAForgottenIDsNewRecordGoesOverItsOldOneUntilForgetDeletesIt(t *testing.T) {
	a := open(t, t.TempDir())
	if err := a.Put(recs(0, 10), 5); err != nil {
		t.Fatal(err)
	}
	again := rec(3)
	again.WorkflowID, again.AdmittedAt, again.UpdatedAt = "w9", 4000, 5000
	check := func(forgotBefore int64, want int) {
		t.Helper()
		if n, err := a.Check(forgotBefore); err != nil || n != want {
			t.Fatalf("Check(%d) = %d, %v; want %d", forgotBefore, n, err, want)
		}
	}
	get := func(id string, want *fsm.ArchivedRecord, index uint64) {
		t.Helper()
		got, i, found, err := a.Get(id)
		if err != nil || found != (want != nil) || (want != nil && (i != index || !cmp.Equal(got, want.Retired))) {
			t.Fatalf("Get(%q) = %+v at %d, found %v, %v; want %+v at %d", id, got, i, found, err, want, index)
		}
	}
	listed := func(workflow string) []string {
		t.Helper()
		out, _, _, err := a.Scan(Query{WorkflowID: workflow, From: 0, To: 1 << 62, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range out {
			ids = append(ids, fmt.Sprintf("%s@%d", e.ID, e.UpdatedAt))
		}
		return ids
	}
	for range 2 { // the second is a replay of the first
		if err := a.PutMerging([]fsm.ArchivedRecord{again}, 20); err != nil {
			t.Fatal(err)
		}
		get(again.ID, &again, 20)
		check(0, 11)
		check(1010, 1)
		if got := listed("w9"); !cmp.Equal(got, []string{"order-000003@5000"}) {
			t.Fatalf("w9 lists %v", got)
		}
		if got := listed(""); len(got) != 11 || got[3] != "order-000003@1003" || got[10] != "order-000003@5000" {
			t.Fatalf("the listing by time is %v", got)
		}
	}

	if n, err := a.TrimAfter(10); err != nil || n != 1 {
		t.Fatalf("TrimAfter(10) = %d, %v", n, err)
	}
	old := rec(3)
	get(old.ID, &old, 5)
	check(0, 10)
	if got := listed("w9"); got != nil {
		t.Fatalf("w9 lists %v after the trim", got)
	}

	if err := a.PutMerging([]fsm.ArchivedRecord{again}, 20); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Forget(1010); err != nil || n != 10 {
		t.Fatalf("Forget(1010) = %d, %v; want 10", n, err)
	}
	get(again.ID, &again, 20)
	get(rec(1).ID, nil, 0)
	check(0, 1)
	if got := listed(""); !cmp.Equal(got, []string{"order-000003@5000"}) {
		t.Fatalf("after Forget, the listing is %v", got)
	}
	if n, err := a.Forget(1010); err != nil || n != 0 {
		t.Fatalf("Forget again = %d, %v", n, err)
	}
	if n, err := a.TrimAfter(10); err != nil || n != 1 {
		t.Fatalf("TrimAfter(10) after Forget = %d, %v", n, err)
	}
	get(again.ID, nil, 0)
	check(0, 0)
}

// The bloom filters hold the records' keys alone: a table's filter is as
// large with a record's three index entries as without them, and still
// answers for every record. Check, which must find the index entries, seeks
// them, and finds them in flushed tables.
func TestTheFiltersHoldTheRecordsKeysAlone(t *testing.T) {
	f := recordFilter{bloom.FilterPolicy(bloomBitsPerKey)}
	only, all := f.NewWriter(pebble.TableFilter), f.NewWriter(pebble.TableFilter)
	var key []byte
	for i := range 1000 {
		r := rec(i)
		key = recordKey(key[:0], r.ID)
		only.AddKey(key)
		all.AddKey(key)
		for _, k := range [][]byte{workflowKey(nil, r.WorkflowID, r.UpdatedAt, r.ID), timeKey(nil, r.UpdatedAt, r.ID), indexKey(nil, 7, r.ID)} {
			all.AddKey(k)
		}
	}
	a, b := only.Finish(nil), all.Finish(nil)
	if len(a) != len(b) || !bytes.Equal(a, b) {
		t.Fatalf("a filter with the index entries is %d bytes, without %d: it holds them", len(b), len(a))
	}
	for i := range 1000 {
		if !f.MayContain(pebble.TableFilter, b, recordKey(nil, rec(i).ID)) {
			t.Fatalf("the filter lost record %d", i)
		}
	}

	arch := open(t, t.TempDir())
	if err := arch.Put(recs(0, 500), 3); err != nil {
		t.Fatal(err)
	}
	if err := arch.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, err := arch.Check(0); err != nil || n != 500 {
		t.Fatalf("Check of flushed tables = %d, %v", n, err)
	}
	if _, _, found, err := arch.Get(rec(42).ID); !found || err != nil {
		t.Fatalf("Get through the filters: found %v, %v", found, err)
	}
}
