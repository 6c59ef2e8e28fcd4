package archive

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Workflows are the workload's workflow IDs, each with its share of the
// executions in hundredths.
var Workflows = []struct {
	ID     string
	Weight int
}{
	{"checkout", 40}, {"ship-order", 20}, {"send-receipt", 20},
	{"refund", 10}, {"nightly-report", 5}, {"sync-inventory", 5},
}

// The workload's clock: the first admission, and the time between two.
const (
	workloadStartNanos = 1_767_225_600_000_000_000 // 2026-01-01T00:00:00Z
	admitEveryNanos    = 1_000_000                 // a thousand admissions a second
	runNanosMax        = 5_000_000_000             // admission to the terminal outcome
)

// mix is splitmix64's finalizer: the workload's deterministic randomness,
// a pure function of the record's number and a stream.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// ArchivedID is the ID of the workload's i-th archived execution. Archived
// IDs are the even-numbered orders: the odd ones between them are absent
// (AbsentID), so that an absent ID falls among present ones, where neither
// an engine's key range nor its index can answer for it.
func ArchivedID(i int) string { return fmt.Sprintf("order-%012d", 2*i) }

// AbsentID is an ID between ArchivedID(i) and ArchivedID(i+1), never archived.
func AbsentID(i int) string { return fmt.Sprintf("order-%012d", 2*i+1) }

// GenerateRecord returns the workload's i-th archived execution: admitted
// in order, a millisecond apart, terminal within five seconds; completed
// nine times in ten with a result of about 35 bytes, failed or cancelled
// otherwise; a fifth of the shipping and receipt executions are children
// of an earlier checkout.
func GenerateRecord(i int) Record {
	h := mix(uint64(i))
	admitted := workloadStartNanos + int64(i)*admitEveryNanos
	r := Record{
		ID:              ArchivedID(i),
		WorkflowID:      workflowOf(h % 100),
		AdmittedAtNanos: admitted,
		UpdatedAtNanos:  admitted + int64(mix(h)%runNanosMax),
		Deliveries:      1 + (h>>8)%3,
	}
	switch p := (h >> 16) % 100; {
	case p < 90:
		r.Status = StatusCompleted
		r.Outcome = fmt.Sprintf(`{"charge":"ch_%010d","amount":%d}`, mix(h+1)%10_000_000_000, 100+(h>>24)%99_900)
	case p < 97:
		r.Status = StatusFailed
		r.Outcome = `{"name":"CardDeclined","code":"declined"}`
	default:
		r.Status = StatusCancelled
		r.Outcome = `{"reason":"customer"}`
	}
	if (r.WorkflowID == "ship-order" || r.WorkflowID == "send-receipt") && (h>>32)%5 == 0 && i > 0 {
		r.Parent = &Parent{ExecutionID: ArchivedID(int((h >> 40) % uint64(i))), StepKey: "ship"}
	}
	return r
}

func workflowOf(percent uint64) string {
	for _, w := range Workflows {
		if percent < uint64(w.Weight) {
			return w.ID
		}
		percent -= uint64(w.Weight)
	}
	panic("archive: workflow weights do not add up to 100")
}

// GenerateBatch returns records [first, first+n) as a retire command hands
// them over: in (updatedAt, ID) order.
func GenerateBatch(first, n int) []Record {
	recs := make([]Record, n)
	for k := range recs {
		recs[k] = GenerateRecord(first + k)
	}
	slices.SortFunc(recs, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.UpdatedAtNanos, b.UpdatedAtNanos), strings.Compare(a.ID, b.ID))
	})
	return recs
}

// WorkloadSpanNanos is the span of updated times of the first n records.
func WorkloadSpanNanos(n int) (from, to int64) {
	return workloadStartNanos, workloadStartNanos + int64(n)*admitEveryNanos + runNanosMax
}

// BatchBytes is what a batch's keys and values weigh before an engine's
// own overhead: the bytes the floor writes for it.
func BatchBytes(recs []Record) int {
	n := 0
	for i := range recs {
		r := &recs[i]
		v, err := appendValue(nil, r)
		if err != nil {
			panic(err)
		}
		n += 1 + len(r.ID) + len(v)
		n += 1 + len(appendWorkflowKey(nil, r.WorkflowID, r.UpdatedAtNanos, r.ID))
		n += 1 + len(appendTimeKey(nil, r.UpdatedAtNanos, r.ID))
	}
	return n
}
