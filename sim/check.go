package sim

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/execstore/execstore"
	"github.com/google/go-cmp/cmp"
)

// do runs one operation with nothing armed: the store's answer must be the
// model's, the touched records and the summary must agree afterwards, and
// an operation the contract promises writes nothing must have logged
// nothing.
func (w *world) do(o *op) (result, error) {
	w.prepare(o)
	clock := w.clock.nanos()
	before, err := w.store.Stats(context.Background())
	if err != nil {
		before.Failed = err // no position to compare with: the check passes
	}
	got := o.call(w.store)
	return got, w.settle(o, clock, got, &before)
}

// checkWroteNothing checks, after an operation the model applied, the
// promise that it writes nothing: when the model says the contract makes it
// (a no-op, a refusal, a read) and the writer had nothing of its own to log
// at the operation's time (no retirement, no occurrence reached), the log
// must be where it was. It only reads.
func (w *world) checkWroteNothing(o *op, before execstore.Stats) error {
	if !w.model.quiet || w.model.writerLogs {
		return nil
	}
	after, err := w.store.Stats(context.Background())
	if err != nil {
		return violationf("Stats: %v", err)
	}
	if err := wroteNothing(before, after); err != nil {
		return violationf("%s: %v", o.describe(w.tr), err)
	}
	return nil
}

// wroteNothing compares the store's log position before and after a request
// that must write nothing: the last entry, the batches written and the last
// entry applied must not have moved. A store that failed on either side
// (its log is no longer trusted) is not judged here; the fail-stop checks
// judge it.
func wroteNothing(before, after execstore.Stats) error {
	if before.Failed != nil || after.Failed != nil {
		return nil
	}
	if after.WALLastIndex != before.WALLastIndex || after.WALBatches != before.WALBatches || after.AppliedIndex != before.AppliedIndex {
		return fmt.Errorf("the contract says it writes nothing, and the log moved: last entry %d -> %d, batches %d -> %d, applied %d -> %d",
			before.WALLastIndex, after.WALLastIndex, before.WALBatches, after.WALBatches, before.AppliedIndex, after.AppliedIndex)
	}
	return nil
}

// prepare gives an operation that generates an ID a millisecond of its own.
// Generated IDs are a timestamp and random bits, and claims order ties by ID:
// distinct milliseconds keep that order, and so the run, independent of the
// random bits.
func (w *world) prepare(o *op) {
	if !o.generates() {
		return
	}
	ms := w.clock.nanos() / 1e6
	if w.clock.nanos()%1e6 != 0 {
		ms++
	}
	for w.millis[ms] {
		ms++
	}
	w.millis[ms] = true
	w.clock.set(max(w.clock.nanos(), ms*1e6))
}

// settle compares an acknowledged operation with the model, traces it, and
// checks what it touched. With before, the store's Stats before the
// operation, it also checks the promise that the operation writes nothing,
// right after the model said so (the reads of checkAfter are operations of
// the model's too).
func (w *world) settle(o *op, clock int64, got result, before *execstore.Stats) error {
	w.tr.line("%d %s -> %s", w.ops, o.describe(w.tr), got.describe(w.tr))
	if err := w.compare(o, clock, got); err != nil {
		return err
	}
	if before != nil {
		if err := w.checkWroteNothing(o, *before); err != nil {
			return err
		}
	}
	return w.checkAfter()
}

// compare applies o to the model and diffs the result with the store's.
func (w *world) compare(o *op, clock int64, got result) error {
	w.model.touched = nil
	w.model.quiet, w.model.writerLogs, w.model.cancelled = false, false, 0
	w.model.forgot, w.model.readmitted = 0, false
	exp := o.apply(w.model, clock, generatedID(o, got))
	w.coverResult(o, got)
	if w.model.forgot > 0 {
		w.cover("forget", "archived executions forgotten")
	}
	if w.model.readmitted && got.Code == "" {
		w.cover("forget", "a forgotten ID admitted again")
	}
	w.coverCancel()
	if diff := diffResults(exp, got); diff != "" {
		return violationf("%s: result differs from the model (-model +store):\n%s", o.describe(w.tr), diff)
	}
	return w.noteLeases(o, got)
}

// generatedID is the ID the store chose for o, if it chose one.
func generatedID(o *op, got result) string {
	if o.generates() && got.Code == "" {
		return got.ID
	}
	return ""
}

// issuedMax is the highest token handed out for an execution, and when the
// execution it was handed out for was admitted.
type issuedMax struct {
	token    uint64
	admitted int64
}

// noteLeases remembers issued leases for stale use later, and checks that a
// token is never handed out twice, across restarts too: only the repeat of
// the keyed claim that handed it out (same request key) answers it again.
func (w *world) noteLeases(o *op, got result) error {
	for _, l := range got.Leases {
		issued := tokenOf{l.ExecutionID, l.Token}
		if o.kind == opClaim && o.key != "" && w.grantedBy[issued] == o.key {
			continue // a repeat's answer
		}
		// An ID forgotten and admitted again (Options.ForgetAfter) is a
		// new execution: its tokens start again.
		var admitted int64
		if e := w.model.execs[l.ExecutionID]; e != nil {
			admitted = e.admittedAt
		}
		if prev, ok := w.maxToken[l.ExecutionID]; ok && prev.admitted == admitted && l.Token <= prev.token {
			return violationf("claim of %s issued token %d; token %d was handed out before",
				w.tr.alias(l.ExecutionID), l.Token, prev.token)
		}
		w.leases = append(w.leases, l)
		w.maxToken[l.ExecutionID] = issuedMax{token: l.Token, admitted: admitted}
		if o.kind == opClaim && o.key != "" {
			w.grantedBy[issued] = o.key
		}
	}
	return nil
}

// tokenOf names one lease token of one execution.
type tokenOf struct {
	id    string
	token uint64
}

// diffResults compares two results; "" when they are equal.
func diffResults(exp, got result) string {
	if equalResults(exp, got) {
		return ""
	}
	if d := cmp.Diff(exp, got); d != "" {
		return d
	}
	return fmt.Sprintf("%+v\n%+v", exp, got)
}

// checkAfter runs after every acknowledged operation: the records it touched,
// the store's summary, the invariants, and now and then the whole state.
func (w *world) checkAfter() error {
	ids := slices.Compact(slices.Sorted(slices.Values(w.model.touched)))
	for _, id := range ids {
		if err := w.checkRecord(w.store, id); err != nil {
			return err
		}
	}
	if err := w.checkSummary(w.store); err != nil {
		return err
	}
	if err := w.store.CheckInvariants(); err != nil {
		return violationf("%v", err)
	}
	if err := w.readFeed(); err != nil {
		return err
	}
	if err := w.checkSchedules(w.store); err != nil {
		return err
	}
	w.checkDue--
	if w.checkDue <= 0 {
		w.checkDue = w.cfg.CheckEvery
		return w.checkFull(w.store, "in a periodic check")
	}
	return nil
}

// checkRecord compares one record with the model's, and a terminal record
// with the first one seen: terminal outcomes never change.
func (w *world) checkRecord(s *execstore.Store, id string) error {
	exp := w.model.get(id)
	got := recordResult(s.Get(context.Background(), id))
	if diff := diffResults(exp, got); diff != "" {
		return violationf("record %s differs from the model (-model +store):\n%s", w.tr.alias(id), diff)
	}
	if got.Record == nil || !got.Record.Status.Terminal() {
		return nil
	}
	first, seen := w.terminal[id]
	if !seen || !first.AdmittedAt.Equal(got.Record.AdmittedAt) { // new, or forgotten and admitted again
		w.terminal[id] = *got.Record
		return nil
	}
	if e := w.model.execs[id]; e != nil && e.retired {
		// Retirement drops these and nothing else (the model's record and
		// the store's are already equal).
		first.Params, first.Context, first.MaxAttempts = nil, nil, 0
	}
	if equalRecords(first, *got.Record) {
		return nil
	}
	if diff := cmp.Diff(first, *got.Record); diff != "" {
		return violationf("terminal record %s changed (-first +now):\n%s", w.tr.alias(id), diff)
	}
	return nil
}

// checkSummary compares Stats with the model: counts, pending, next due.
func (w *world) checkSummary(s *execstore.Store) error {
	st, err := s.Stats(context.Background())
	if err != nil {
		return violationf("Stats: %v", err)
	}
	got, exp := summary{Executions: st.Executions, Terminal: st.Terminal, Pending: st.Pending, Retired: st.Retired, NextDue: st.NextDue}, w.model.summary()
	if got.Executions != exp.Executions || got.Terminal != exp.Terminal || got.Pending != exp.Pending || got.Retired != exp.Retired || !got.NextDue.Equal(exp.NextDue) {
		return violationf("store summary differs from the model (-model +store):\n%s", cmp.Diff(exp, got))
	}
	if st.Failed == nil && st.AppliedIndex != st.WALLastIndex {
		return violationf("the writer says entries up to %d are applied, and the log ends at %d", st.AppliedIndex, st.WALLastIndex)
	}
	if now := st.Now.UnixNano(); !st.Now.IsZero() && now < w.storeNow {
		return violationf("store time went backwards: %s after %s", simTime(st.Now), simTime(timeOf(w.storeNow)))
	} else if !st.Now.IsZero() {
		w.storeNow = now
	}
	return nil
}

// checkFull compares the whole observable state with the model: every
// record, every step and key the workload uses, the summary and the
// invariants.
func (w *world) checkFull(s *execstore.Store, when string) error {
	if err := s.CheckInvariants(); err != nil {
		return violationf("%s: %v", when, err)
	}
	if err := w.checkSummary(s); err != nil {
		return fmt.Errorf("%s: %w", when, err)
	}
	if w.model.summary().Retired > 0 {
		w.cover("retention", "retired records compared "+when)
	}
	if err := w.checkSchedules(s); err != nil {
		return fmt.Errorf("%s: %w", when, err)
	}
	if err := w.checkQueueSettings(s); err != nil { // queue_settings.go
		return fmt.Errorf("%s: %w", when, err)
	}
	ctx := context.Background()
	for _, id := range w.model.order {
		if err := w.checkRecord(s, id); err != nil {
			return fmt.Errorf("%s: %w", when, err)
		}
		for _, key := range w.stepKeys {
			v, found, err := s.Step(ctx, id, key)
			exp := w.model.step(id, key)
			if !found {
				v = nil
			}
			if err != nil || found != exp.Found || !bytes.Equal(v, exp.Value) {
				return violationf("%s: step %s/%s is %q (found %v, %v), the model has %q (found %v)",
					when, w.tr.alias(id), key, v, found, err, exp.Value, exp.Found)
			}
		}
	}
	if err := w.checkFeed(s, when); err != nil {
		return err
	}
	for _, key := range w.kvKeys {
		v, found, err := s.Read(ctx, key)
		exp := w.model.read(key)
		if err != nil || found != exp.Found || !bytes.Equal(v, exp.Value) {
			return violationf("%s: key %s is %q (found %v, %v), the model has %q (found %v)",
				when, key, v, found, err, exp.Value, exp.Found)
		}
	}
	return nil
}

// The equality below is go-cmp's for these types (nil and empty differ, times
// compare as instants), written out because it runs after every operation;
// cmp.Diff renders a difference once one is found.

func equalResults(a, b result) bool {
	if a.Code != b.Code || a.ID != b.ID || a.Wake != b.Wake || a.Found != b.Found || a.Applied != b.Applied || a.Replayed != b.Replayed ||
		!equalBytes(a.Value, b.Value) || !equalLeasePtr(a.Lease, b.Lease) ||
		(a.Record == nil) != (b.Record == nil) || (a.Record != nil && !equalRecords(*a.Record, *b.Record)) ||
		(a.Leases == nil) != (b.Leases == nil) || len(a.Leases) != len(b.Leases) ||
		(a.Batch == nil) != (b.Batch == nil) || len(a.Batch) != len(b.Batch) ||
		(a.Records == nil) != (b.Records == nil) || len(a.Records) != len(b.Records) ||
		(a.Feed == nil) != (b.Feed == nil) || (a.Feed != nil && !equalFeeds(a.Feed, b.Feed)) ||
		!equalSchedulePtr(a.Schedule, b.Schedule) || !equalScheduleLists(a.Schedules, b.Schedules) || !equalQueuePtr(a.Queue, b.Queue) {
		return false
	}
	for i := range a.Records {
		if !equalRecords(a.Records[i], b.Records[i]) {
			return false
		}
	}
	for i := range a.Leases {
		if !equalLeases(a.Leases[i], b.Leases[i]) {
			return false
		}
	}
	for i := range a.Batch {
		if !equalResults(a.Batch[i], b.Batch[i]) {
			return false
		}
	}
	return true
}

func equalFeeds(a, b *execstore.ChangesPage) bool {
	if a.Next != b.Next || a.Last != b.Last || len(a.Changes) != len(b.Changes) {
		return false
	}
	for i, c := range a.Changes {
		d := b.Changes[i]
		if c.Position != d.Position || c.ExecutionID != d.ExecutionID || c.Status != d.Status || !c.At.Equal(d.At) {
			return false
		}
	}
	return true
}

func equalBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func equalLeases(a, b execstore.Lease) bool {
	return a.ExecutionID == b.ExecutionID && a.Token == b.Token && a.ExpiresAt.Equal(b.ExpiresAt)
}

func equalLeasePtr(a, b *execstore.Lease) bool {
	return (a == nil) == (b == nil) && (a == nil || equalLeases(*a, *b))
}

func equalRecords(a, b execstore.Record) bool {
	return a.ExecutionID == b.ExecutionID && a.WorkflowID == b.WorkflowID &&
		equalBytes(a.Params, b.Params) &&
		(a.Context == nil) == (b.Context == nil) && maps.Equal(a.Context, b.Context) &&
		a.Status == b.Status && equalOutcomes(a.Outcome, b.Outcome) &&
		(a.Parent == nil) == (b.Parent == nil) && (a.Parent == nil || *a.Parent == *b.Parent) &&
		a.AdmittedAt.Equal(b.AdmittedAt) && a.UpdatedAt.Equal(b.UpdatedAt) && a.DueAt.Equal(b.DueAt) &&
		equalLeasePtr(a.Lease, b.Lease) && a.Attempts == b.Attempts
}

func equalOutcomes(a, b *execstore.Outcome) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && equalBytes(a.Result, b.Result) && equalErrors(a.Error, b.Error)
}

func equalErrors(a, b *execstore.WorkflowError) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.Message == b.Message && a.Code == b.Code && equalErrors(a.Cause, b.Cause)
}
