package archive

import (
	"cmp"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// testRecords are the first 3,000 generated records and a few made to sit
// on the edges of the keys: equal times, an ID that is a prefix of
// another, times before 1970 and at the ends of int64.
func testRecords() []Record {
	var recs []Record
	for first := 0; first < 3000; first += 1000 {
		recs = append(recs, GenerateBatch(first, 1000)...)
	}
	edge := func(id string, at int64) Record {
		return Record{ID: id, WorkflowID: "edge", Status: StatusCancelled, AdmittedAtNanos: at, UpdatedAtNanos: at}
	}
	return append(recs,
		edge("x", 7), edge("x0", 7), edge("x\x00", 7), edge("w", 7),
		edge("before-1970", -1_000_000), edge("first", math.MinInt64), edge("last", math.MaxInt64),
		Record{ID: "child", WorkflowID: "edge", Status: StatusFailed, Outcome: `{"name":"E"}`,
			Parent: &Parent{ExecutionID: "x", StepKey: ""}, AdmittedAtNanos: 1, UpdatedAtNanos: 9, Deliveries: 1 << 40},
	)
}

// openFilled opens e in a fresh directory and puts recs in batches of 1,000.
func openFilled(t *testing.T, e Engine, dir string, recs []Record) Archive {
	t.Helper()
	a, err := e.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	for i := 0; i < len(recs); i += 1000 {
		if err := a.Put(recs[i:min(i+1000, len(recs))]); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// eachEngine runs f as a subtest for each engine.
func eachEngine(t *testing.T, f func(t *testing.T, e Engine)) {
	for _, e := range Engines {
		t.Run(e.Name, func(t *testing.T) { f(t, e) })
	}
}

func checkAllThere(t *testing.T, a Archive, recs []Record) {
	t.Helper()
	for _, want := range recs {
		got, ok, err := a.Get(want.ID)
		if err != nil || !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("Get(%q) = %+v, %v, %v; want %+v", want.ID, got, ok, err, want)
		}
		if ok, err := a.Has(want.ID); err != nil || !ok {
			t.Fatalf("Has(%q) = %v, %v; want true", want.ID, ok, err)
		}
	}
}

func TestEachArchiveReturnsEveryRecordAsItWasPut(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		recs := testRecords()
		checkAllThere(t, openFilled(t, e, t.TempDir(), recs), recs)
	})
}

func TestEachArchiveAnswersAnAbsentIDAsAbsent(t *testing.T) {
	absent := []string{AbsentID(0), AbsentID(1499), AbsentID(2999), ArchivedID(3000), ArchivedID(1 << 40),
		"order-", "order-00000000000", ArchivedID(7) + "x", "", "a", "x1", "zzz", "\xff"}
	eachEngine(t, func(t *testing.T, e Engine) {
		a := openFilled(t, e, t.TempDir(), testRecords())
		for _, id := range absent {
			if ok, err := a.Has(id); err != nil || ok {
				t.Errorf("Has(%q) = %v, %v; want false", id, ok, err)
			}
			if r, ok, err := a.Get(id); err != nil || ok {
				t.Errorf("Get(%q) = %+v, %v, %v; want none", id, r, ok, err)
			}
		}
	})
}

// model is what a listing must return: recs filtered by the query and
// sorted by (updatedAt, ID), at most q.Limit of them.
func model(recs []Record, q Query) []Record {
	var out []Record
	for _, r := range recs {
		if (q.WorkflowID == "" || r.WorkflowID == q.WorkflowID) && r.UpdatedAtNanos >= q.FromNanos && r.UpdatedAtNanos < q.ToNanos &&
			(q.After == nil || r.UpdatedAtNanos > q.After.UpdatedAtNanos ||
				r.UpdatedAtNanos == q.After.UpdatedAtNanos && r.ID > q.After.ID) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.UpdatedAtNanos, b.UpdatedAtNanos), strings.Compare(a.ID, b.ID))
	})
	return out[:min(len(out), q.Limit)]
}

func listQueries() []Query {
	from, to := WorkloadSpanNanos(3000)
	mid := from + (to-from)/2
	return []Query{
		{WorkflowID: "checkout", FromNanos: from, ToNanos: to, Limit: 100},
		{WorkflowID: "refund", FromNanos: mid, ToNanos: mid + 500_000_000, Limit: 1000},
		{WorkflowID: "sync-inventory", FromNanos: mid, ToNanos: mid, Limit: 100},
		{WorkflowID: "no-such-workflow", FromNanos: math.MinInt64, ToNanos: math.MaxInt64, Limit: 100},
		{WorkflowID: "edge", FromNanos: math.MinInt64, ToNanos: math.MaxInt64, Limit: 100},
		{WorkflowID: "edge", FromNanos: 7, ToNanos: 8, Limit: 2},
		{WorkflowID: "edge", FromNanos: 7, ToNanos: 8, After: &Cursor{7, "x"}, Limit: 100},
		{FromNanos: from, ToNanos: to, Limit: 100},
		{FromNanos: mid, ToNanos: mid + 100_000_000, Limit: 1000},
		{FromNanos: math.MinInt64, ToNanos: 10, Limit: 100},
		{FromNanos: 7, ToNanos: 8, After: &Cursor{7, "x\x00"}, Limit: 100},
		{FromNanos: mid, ToNanos: to, After: &Cursor{mid - 1, "zzz"}, Limit: 50},
	}
}

func TestEachArchiveListsInTimeThenIDOrderWithinTheBounds(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		recs := testRecords()
		a := openFilled(t, e, t.TempDir(), recs)
		for _, q := range listQueries() {
			got, err := a.List(q)
			if want := model(recs, q); err != nil || !equalRecords(got, want) {
				t.Errorf("List(%+v) = %d records (%v), want %d: %s", q, len(got), err, len(want), firstDifference(got, want))
			}
		}
	})
}

func TestEachArchivePagesThroughAListingWithCursors(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		recs := testRecords()
		a := openFilled(t, e, t.TempDir(), recs)
		for _, workflow := range []string{"", "send-receipt", "edge"} {
			all := Query{WorkflowID: workflow, FromNanos: math.MinInt64, ToNanos: math.MaxInt64, Limit: len(recs)}
			var paged []Record
			q := all
			q.Limit = 100
			for {
				page, err := a.List(q)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, page...)
				if len(page) < q.Limit {
					break
				}
				q.After = CursorOf(page[len(page)-1])
			}
			if want := model(recs, all); !equalRecords(paged, want) {
				t.Errorf("workflow %q: pages hold %d records, want %d: %s", workflow, len(paged), len(want), firstDifference(paged, want))
			}
		}
	})
}

func TestEachArchiveKeepsEverythingAcrossAReopen(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		recs, dir := testRecords(), t.TempDir()
		if err := openFilled(t, e, dir, recs).Close(); err != nil {
			t.Fatal(err)
		}
		a, err := e.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		checkAllThere(t, a, recs)
		for _, q := range listQueries() {
			if got, err := a.List(q); err != nil || !equalRecords(got, model(recs, q)) {
				t.Errorf("after reopening, List(%+v): %s (%v)", q, firstDifference(got, model(recs, q)), err)
			}
		}
		if err := a.Settle(); err != nil {
			t.Fatal(err)
		}
		checkAllThere(t, a, recs)
	})
}

func TestEachArchiveRefusesABatchWithAnInvalidRecordWhole(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		a := openFilled(t, e, t.TempDir(), nil)
		batch := GenerateBatch(0, 10)
		batch[9].Status = 1 // admitted: not terminal
		if err := a.Put(batch); err == nil {
			t.Fatal("Put of a batch with a record that is not terminal succeeded")
		}
		for _, r := range batch {
			if ok, err := a.Has(r.ID); err != nil || ok {
				t.Errorf("Has(%q) = %v, %v after a refused batch", r.ID, ok, err)
			}
		}
	})
}

func TestARecordValueRoundTrips(t *testing.T) {
	for _, r := range testRecords() {
		v, err := appendValue(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := decodeValue(r.ID, v); err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("decodeValue(encoded %+v) = %+v, %v", r, got, err)
		}
	}
}

func TestADamagedValueIsCorruptionNeverAMiss(t *testing.T) {
	r := testRecords()[len(testRecords())-1] // with a parent and an outcome
	v, err := appendValue(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	damaged := [][]byte{nil, {recordVersion}, append([]byte{9}, v[1:]...), append(slices.Clone(v), 0)}
	for n := range len(v) {
		damaged = append(damaged, v[:n])
	}
	for _, d := range damaged {
		if _, err := decodeValue(r.ID, d); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeValue(%q) = %v, want ErrCorrupt", d, err)
		}
	}
}

func FuzzDecodeValue(f *testing.F) {
	for _, r := range testRecords()[2990:] {
		v, _ := appendValue(nil, &r)
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		r, err := decodeValue("id", v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("an error that is not ErrCorrupt: %v", err)
			}
			return
		}
		again, err := appendValue(nil, &r)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		if back, err := decodeValue("id", again); err != nil || !reflect.DeepEqual(back, r) {
			t.Fatalf("decoded %+v, re-encoded and decoded %+v, %v", r, back, err)
		}
	})
}

// The evaluation command's work at a small N, for every engine: every
// answer it checks on the way is right, and it measures something.
func TestTheEvaluationRunsEveryEngineAtASmallN(t *testing.T) {
	if floor, err := Floor(t.TempDir(), 4096, 3); err != nil || floor <= 0 {
		t.Fatalf("Floor = %v, %v", floor, err)
	}
	eachEngine(t, func(t *testing.T, e Engine) {
		res, err := Evaluate(e, EvalConfig{N: 20_000, Batch: 1024, Samples: 200, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if res.RecordsPerSecond <= 0 || res.DiskBytesIngested <= 0 || res.DiskBytesSettled <= 0 || res.Get.P99 <= 0 ||
			res.ListTime.P50 <= 0 || res.HeapBytes == 0 {
			t.Errorf("a measurement is missing: %+v", res)
		}
	})
}

func equalRecords(a, b []Record) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

func firstDifference(got, want []Record) string {
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			return "at " + strings.Repeat(" ", 0) + got[i].ID + " want " + want[i].ID
		}
	}
	if len(got) != len(want) {
		return "lengths differ"
	}
	return "none"
}
