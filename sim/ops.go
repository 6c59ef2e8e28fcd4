package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/execstore/execstore"
)

// opKind names an operation of the workload.
type opKind string

const (
	opAdmit    opKind = "admit"
	opWake     opKind = "wake"
	opClaim    opKind = "claim"
	opRenew    opKind = "renew"
	opRelease  opKind = "release"
	opAck      opKind = "ack"
	opAckBatch opKind = "ack-batch"
	opSaveStep opKind = "save-step"
	opStep     opKind = "step"
	opStart    opKind = "start"
	opCommit   opKind = "commit"
	opRead     opKind = "read"
	opWatch    opKind = "watch"
	opGet      opKind = "get"
	opAwait    opKind = "await"
	opList     opKind = "list"
	opChanges  opKind = "changes"
	opCancel   opKind = "cancel"

	opPutQueue       opKind = "put-queue"
	opDeleteQueue    opKind = "delete-queue"
	opPutSchedule    opKind = "put-schedule"
	opDeleteSchedule opKind = "delete-schedule"
	opGetSchedule    opKind = "get-schedule"
	opListSchedules  opKind = "list-schedules"
)

// op is one call of the store's API with its arguments.
type op struct {
	kind   opKind
	admit  admitArgs
	id     string // wake, step, watch, get, await
	at     time.Time
	limit  int
	dur    time.Duration // claim, renew: lease duration; release: retry delay
	lease  execstore.Lease
	out    outcome
	key    string // save-step, step, start: the step key; claim: the request key
	val    value
	wf     string
	params params
	writes []write
	queue  execstore.QueueSettings // put-queue
	queues []string                // claim: the queues it serves; none: every queue
	keys   []string
	acks   []ackArg
	cancel bool // await: the model says the execution is running
	list   listQuery
	after  uint64 // changes

	reason string          // cancel
	cause  *workflowFailed // release: the error that ended the delivery; nil: none
	sched  schedArg
}

type ackArg struct {
	lease execstore.Lease
	out   outcome
}

// generates reports whether the store draws a new ID for the call.
func (o *op) generates() bool {
	return (o.kind == opAdmit && o.admit.id == "") || o.kind == opStart
}

// reads reports whether the operation only reads: it never reaches the
// store's writer.
func (o *op) reads() bool {
	switch o.kind {
	case opStep, opRead, opGet, opAwait, opList, opChanges, opGetSchedule, opListSchedules:
		return true
	}
	return false
}

// call runs the operation against the store.
func (o *op) call(s *execstore.Store) result {
	ctx := context.Background()
	switch o.kind {
	case opAdmit:
		id, err := s.Admit(ctx, o.admit.api())
		return withCode(result{ID: id}, err)
	case opWake:
		w, err := s.RequestWake(ctx, o.id, o.at)
		return withCode(result{Wake: w}, err)
	case opClaim:
		if o.key != "" || len(o.queues) > 0 {
			leases, err := s.Claim(ctx, execstore.ClaimRequest{Limit: o.limit, LeaseDuration: o.dur, RequestKey: o.key, Queues: o.queues})
			return withCode(result{Leases: leases}, err)
		}
		leases, err := s.ClaimDue(ctx, o.limit, o.dur)
		return withCode(result{Leases: leases}, err)
	case opRenew:
		l, err := s.Renew(ctx, o.lease, o.dur)
		if err != nil {
			return withCode(result{}, err)
		}
		return result{Lease: &l}
	case opRelease:
		if o.cause != nil {
			return withCode(result{}, s.ReleaseWithCause(ctx, o.lease, o.dur, o.cause))
		}
		return withCode(result{}, s.Release(ctx, o.lease, o.dur))
	case opCancel:
		rec, err := s.Cancel(ctx, o.id, o.reason)
		return recordResult(rec, err)
	case opAck:
		rec, err := s.Acknowledge(ctx, o.lease, o.out.run())
		return recordResult(rec, err)
	case opAckBatch:
		acks := make([]execstore.Ack, len(o.acks))
		for i, a := range o.acks {
			acks[i] = execstore.Ack{Lease: a.lease, Outcome: a.out.run()}
		}
		res, err := s.AcknowledgeBatch(ctx, acks)
		if err != nil {
			return withCode(result{}, err)
		}
		out := result{Batch: make([]result, len(res))}
		for i, r := range res {
			out.Batch[i] = recordResult(r.Record, r.Err)
			out.Batch[i].Applied, out.Batch[i].Replayed = r.Applied, r.Replayed
		}
		return out
	case opSaveStep:
		return withCode(result{}, s.SaveStep(ctx, o.lease, o.key, slices.Clone(o.val.data)))
	case opStep:
		v, found, err := s.Step(ctx, o.id, o.key)
		return withCode(result{Value: v, Found: found}, err)
	case opStart:
		id, err := s.Start(ctx, o.lease, o.key, o.wf, o.params.bytes())
		return withCode(result{ID: id}, err)
	case opCommit:
		writes := make([]execstore.Write, len(o.writes))
		for i, w := range o.writes {
			writes[i] = w.api()
		}
		return withCode(result{}, s.Commit(ctx, writes...))
	case opRead:
		v, found, err := s.Read(ctx, o.key)
		return withCode(result{Value: v, Found: found}, err)
	case opWatch:
		w, err := s.Watch(ctx, o.id, slices.Clone(o.keys)...)
		return withCode(result{Wake: w}, err)
	case opGet:
		rec, err := s.Get(ctx, o.id)
		return recordResult(rec, err)
	case opAwait:
		return o.await(s)
	case opList:
		return listAll(s, o.list)
	case opChanges:
		return changesOf(s, o.after, o.limit)
	case opPutSchedule, opDeleteSchedule, opGetSchedule, opListSchedules:
		return o.callSchedule(s) // schedules.go
	case opPutQueue, opDeleteQueue:
		return o.callQueue(s) // queue_settings.go
	}
	panic("sim: unknown operation " + string(o.kind))
}

// await awaits a terminal (or unknown) execution with a live context and a
// running one with a cancelled context, as the model expects; the timeout
// only keeps a wrong answer from hanging the run.
func (o *op) await(s *execstore.Store) result {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if o.cancel {
		cancel()
	}
	rec, err := s.Await(ctx, o.id)
	return recordResult(rec, err)
}

// apply runs the operation against the model. generated is the ID the store
// chose, for an admission without an ID or a child start.
func (o *op) apply(m *model, clock int64, generated string) result {
	if o.reads() {
		m.quiet = true // a read writes nothing
	}
	switch o.kind {
	case opAdmit:
		return m.admit(o.admit, clock, generated)
	case opWake:
		return m.wake(o.id, o.at, clock)
	case opClaim:
		return m.claim(o.limit, o.dur, o.key, o.queues, clock)
	case opRenew:
		return m.renew(o.lease, o.dur, clock)
	case opRelease:
		return m.release(o.lease, o.dur, o.cause, clock)
	case opCancel:
		return m.cancel(o.id, o.reason, clock)
	case opAck:
		r := m.acknowledge(o.lease, o.out, clock)
		r.Applied, r.Replayed = false, false // Acknowledge answers the record alone
		return r
	case opAckBatch:
		// The batch writes nothing when none of its acknowledgements does.
		out, quiet := result{Batch: make([]result, len(o.acks))}, true
		for i, a := range o.acks {
			m.quiet = false
			out.Batch[i] = m.acknowledge(a.lease, a.out, clock)
			quiet = quiet && m.quiet
		}
		m.quiet = quiet
		return out
	case opSaveStep:
		return m.saveStep(o.lease, o.key, o.val, clock)
	case opStep:
		return m.step(o.id, o.key)
	case opStart:
		return m.start(o.lease, o.key, o.wf, o.params, clock, generated)
	case opCommit:
		return m.commit(o.writes, clock)
	case opRead:
		return m.read(o.key)
	case opWatch:
		return m.watch(o.id, o.keys, clock)
	case opGet:
		return m.get(o.id)
	case opAwait:
		return m.await(o.id)
	case opList:
		return m.list(o.list)
	case opChanges:
		return m.changes(o.after, o.limit)
	case opPutSchedule, opDeleteSchedule, opGetSchedule, opListSchedules:
		return o.applySchedule(m, clock) // schedules.go
	case opPutQueue, opDeleteQueue:
		return o.applyQueue(m, clock) // queue_settings.go
	}
	panic("sim: unknown operation " + string(o.kind))
}

func withCode(r result, err error) result {
	if err == nil {
		return r
	}
	switch {
	case errors.Is(err, context.Canceled):
		return result{Code: codeCanceled}
	case execstore.ErrorCode(err) == "":
		return result{Code: "ERROR: " + err.Error()}
	}
	return result{Code: execstore.ErrorCode(err)}
}

func recordResult(rec execstore.Record, err error) result {
	if err != nil {
		return withCode(result{}, err)
	}
	normalize(&rec)
	return result{Record: &rec}
}

// normalize blanks what API.md leaves to the implementation: the name and
// message of the error recorded for a completed result that cannot be stored
// (API.md fixes only its code), and of the error of exhausted attempts (its
// code and its cause are fixed: the release's error, or a lease-expired
// error, whose name is fixed and message free).
func normalize(rec *execstore.Record) {
	o := rec.Outcome
	if o == nil || o.Error == nil {
		return
	}
	switch o.Error.Code {
	case execstore.CodeInvalidStepValue:
		o.Error.Name, o.Error.Message = "", ""
	case "ATTEMPTS_EXHAUSTED":
		o.Error.Name, o.Error.Message = "", ""
		if c := o.Error.Cause; c != nil && c.Name == "LeaseExpiredError" {
			c.Message = ""
		}
	}
}

// ---- Trace lines -----------------------------------------------------------

// describe is the operation's trace line, with generated IDs aliased and
// times as offsets from the simulation's epoch.
func (o *op) describe(t *trace) string {
	var b strings.Builder
	b.WriteString(string(o.kind))
	switch o.kind {
	case opAdmit:
		id := o.admit.id
		if id == "" {
			id = "(generated)"
		}
		fmt.Fprintf(&b, " %s wf=%s params=%s ctx=%s", shortID(id), shortID(o.admit.workflow), o.admit.params.name, o.admit.context.name)
		if o.admit.maxAttempts != 0 {
			fmt.Fprintf(&b, " max-attempts=%d", o.admit.maxAttempts)
		}
		if o.admit.queue != "" {
			fmt.Fprintf(&b, " queue=%s", shortID(o.admit.queue))
		}
		if o.admit.priority != 0 {
			fmt.Fprintf(&b, " priority=%d", o.admit.priority)
		}
		if o.admit.deadline != 0 {
			fmt.Fprintf(&b, " deadline=%s", simTime(timeOf(o.admit.deadline)))
		}
	case opWake:
		fmt.Fprintf(&b, " %s at=%s", t.alias(o.id), simTime(o.at))
	case opClaim:
		fmt.Fprintf(&b, " limit=%d lease=%v", o.limit, o.dur)
		if o.key != "" {
			fmt.Fprintf(&b, " key=%s", o.key)
		}
		if len(o.queues) > 0 {
			fmt.Fprintf(&b, " queues=%s", shortID(strings.Join(o.queues, ",")))
		}
	case opRenew, opRelease:
		fmt.Fprintf(&b, " %s d=%v", leaseString(t, o.lease), o.dur)
		if o.cause != nil {
			fmt.Fprintf(&b, " cause=%s", o.cause.code)
		}
	case opCancel:
		fmt.Fprintf(&b, " %s reason=%s", t.alias(o.id), shortID(o.reason))
	case opAck:
		fmt.Fprintf(&b, " %s %s", leaseString(t, o.lease), o.out.name)
	case opAckBatch:
		for _, a := range o.acks {
			fmt.Fprintf(&b, " [%s %s]", leaseString(t, a.lease), a.out.name)
		}
	case opSaveStep:
		fmt.Fprintf(&b, " %s key=%s value=%s", leaseString(t, o.lease), shortID(o.key), o.val.name)
	case opStep:
		fmt.Fprintf(&b, " %s key=%s", t.alias(o.id), o.key)
	case opStart:
		fmt.Fprintf(&b, " %s key=%s wf=%s params=%s", leaseString(t, o.lease), shortID(o.key), shortID(o.wf), o.params.name)
	case opCommit:
		for _, w := range o.writes {
			if w.del {
				fmt.Fprintf(&b, " del(%s)", shortID(w.key))
			} else {
				fmt.Fprintf(&b, " %s=%s", shortID(w.key), w.value.name)
			}
		}
	case opRead:
		fmt.Fprintf(&b, " %s", o.key)
	case opWatch:
		fmt.Fprintf(&b, " %s keys=%s", t.alias(o.id), strings.Join(o.keys, ","))
	case opGet, opAwait:
		fmt.Fprintf(&b, " %s", t.alias(o.id))
	case opList:
		q := o.list.q
		fmt.Fprintf(&b, " status=%s wf=%s parent=%s after=%s before=%s order=%s limit=%d", q.Status, q.WorkflowID,
			t.alias(q.ParentID), simTime(q.AdmittedAfter), simTime(q.AdmittedBefore), q.Order, o.list.limit)
	case opChanges:
		fmt.Fprintf(&b, " after=%d limit=%d", o.after, o.limit)
	case opPutSchedule:
		fmt.Fprintf(&b, " %s %s start=%s", shortID(o.sched.sc.ID), o.sched.name, simTime(o.sched.sc.Start))
	case opDeleteSchedule, opGetSchedule:
		fmt.Fprintf(&b, " %s", shortID(o.id))
	case opPutQueue, opDeleteQueue:
		b.WriteString(o.describeQueue())
	}
	return b.String()
}

// shortID keeps trace lines short and printable for the deliberately odd IDs.
func shortID(s string) string {
	if len(s) > 24 {
		return fmt.Sprintf("%q...(%d bytes)", s[:12], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func leaseString(t *trace, l execstore.Lease) string {
	return fmt.Sprintf("%s#%d", t.alias(l.ExecutionID), l.Token)
}

// describe is a result's trace line.
func (r result) describe(t *trace) string {
	var b strings.Builder
	if r.Code != "" {
		b.WriteString(r.Code)
	} else {
		b.WriteString("ok")
	}
	if r.ID != "" {
		fmt.Fprintf(&b, " id=%s", t.alias(r.ID))
	}
	if r.Wake != "" {
		fmt.Fprintf(&b, " %s", r.Wake)
	}
	for _, l := range r.Leases {
		fmt.Fprintf(&b, " %s@%s", leaseString(t, l), simTime(l.ExpiresAt))
	}
	if r.Lease != nil {
		fmt.Fprintf(&b, " %s@%s", leaseString(t, *r.Lease), simTime(r.Lease.ExpiresAt))
	}
	if r.Record != nil {
		fmt.Fprintf(&b, " %s %s due=%s", t.alias(r.Record.ExecutionID), r.Record.Status, simTime(r.Record.DueAt))
	}
	if r.Found {
		fmt.Fprintf(&b, " %s", r.Value)
	}
	if r.Replayed {
		b.WriteString(" replayed")
	}
	for _, e := range r.Batch {
		fmt.Fprintf(&b, " [%s]", e.describe(t))
	}
	for _, rec := range r.Records {
		fmt.Fprintf(&b, " %s", t.alias(rec.ExecutionID))
	}
	if f := r.Feed; f != nil {
		for _, c := range f.Changes {
			fmt.Fprintf(&b, " %d:%s:%s", c.Position, t.alias(c.ExecutionID), c.Status)
		}
		fmt.Fprintf(&b, " next=%d last=%d", f.Next, f.Last)
	}
	if r.Schedule != nil {
		fmt.Fprintf(&b, " %s", describeSchedule(r.Schedule))
	}
	for i := range r.Schedules {
		fmt.Fprintf(&b, " [%s]", describeSchedule(&r.Schedules[i]))
	}
	return b.String()
}

// simEpoch is where the simulated clock starts.
var simEpoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func simTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(simEpoch).String()
}
