package execstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/wal"
)

// jsonString returns a JSON string value of exactly n bytes.
func jsonString(n int) json.RawMessage {
	return json.RawMessage(`"` + strings.Repeat("a", n-2) + `"`)
}

// A Commit whose writes are each within their limit but together larger than
// one WAL entry holds is that caller's error alone: nothing is written and
// the store goes on accepting writes.
func TestOversizedCommitIsRefusedAndTheStoreGoesOn(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	value := jsonString(1_000_000)
	writes := make([]Write, 90)
	for i := range writes {
		writes[i] = Write{Key: fmt.Sprint("k", i), Value: value}
	}
	before, _ := s.Stats(ctx)
	if err := s.Commit(ctx, writes...); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Commit of 90 MB: err = %v, want ErrInvalidArgument", err)
	}
	after, _ := s.Stats(ctx)
	if after.Failed != nil || after.WALLastIndex != before.WALLastIndex {
		t.Fatalf("after the refused commit: failed %v, WAL %d -> %d entries", after.Failed, before.WALLastIndex, after.WALLastIndex)
	}
	if _, ok, _ := s.Read(ctx, "k0"); ok {
		t.Fatal("a write of the refused commit is visible")
	}
	// Up to the limit, a commit goes through; the store still writes.
	if err := s.Commit(ctx, writes[:8]...); err != nil {
		t.Fatalf("Commit of 8 MB: %v", err)
	}
	if _, err := s.Admit(ctx, AdmitRequest{ExecutionID: "after", WorkflowID: "w"}); err != nil {
		t.Fatalf("Admit after the refused commit: %v", err)
	}
}

// Many large admissions queued at once are cut into several batches by
// bytes: each caller gets its own answer and the store never fails. The
// first case is more than one WAL batch holds at all (wal.MaxBatchBytes);
// the second, more than Options.MaxBatchBytes.
func TestLargeConcurrentAdmissionsAreCutIntoBatchesByBytes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n          int
		batchBytes int
		minBatches uint64
	}{
		{"270 MB, default budget", 300, 0, 5},
		{"36 MB, 4 MiB budget", 40, 4 << 20, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if raceEnabled && tc.batchBytes == 0 {
				// The race detector checks every byte copied: minutes, not
				// seconds. CI runs this case without it.
				t.Skip("run without -race")
			}
			g := openGated(t, t.TempDir(), Options{NoSync: true, MaxBatchBytes: tc.batchBytes,
				SnapshotEntries: 1 << 30, SnapshotWALBytes: 1 << 40, Limits: Limits{CommitBytes: 2 << 20}})
			s := g.s
			ctx := context.Background()
			params := json.RawMessage(`{"p":` + string(jsonString(900_000)) + `}`)
			g.hold("blocker")
			before, _ := s.Stats(ctx)
			errs := make([]error, tc.n)
			var wg sync.WaitGroup
			for i := range tc.n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = s.Admit(ctx, AdmitRequest{ExecutionID: fmt.Sprint("big-", i), WorkflowID: "w", Params: params})
				}()
			}
			g.waitQueued(tc.n)
			g.let()
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("admission %d: %v", i, err)
				}
			}
			after, _ := s.Stats(ctx)
			if after.Failed != nil {
				t.Fatalf("store failed: %v", after.Failed)
			}
			if got := after.WALLastIndex - before.WALLastIndex; got != uint64(tc.n)+1 {
				t.Fatalf("%d entries logged, want %d and the blocker's", got, tc.n)
			}
			// The blocker's batch, then the admissions cut by bytes.
			if got := after.WALBatches - before.WALBatches; got < 1+tc.minBatches {
				t.Fatalf("%d batches, want at least %d after the blocker's", got, tc.minBatches)
			}
			if err := s.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			// The writer's buffers did not keep the burst's memory. (Every
			// request was answered, so the writer's last writes to them
			// happened before.)
			lc := s.commit.(*logCommitter)
			batchCap := reflect.ValueOf(&lc.batch).Elem().FieldByName("data").Cap()
			if cap(lc.encoded) > reusedBytesMax || batchCap > reusedBytesMax || cap(s.w.planner.p.logged) > queueCapMax {
				t.Fatalf("after the burst the writer keeps %d encoded and %d batch bytes", cap(lc.encoded), batchCap)
			}
		})
	}
}

// Open refuses options under which a batch or a command could be more than
// the write-ahead log accepts, or past their own limits, naming the problem.
func TestOpenRefusesOptionsTheLogCannotHold(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"MaxBatch", Options{MaxBatch: wal.MaxBatchEntries + 1}, "Options.MaxBatch"},
		{"MaxBatchBytes", Options{MaxBatchBytes: wal.MaxBatchBytes + 1}, "Options.MaxBatchBytes"},
		{"ValueBytes", Options{Limits: Limits{ValueBytes: 100 << 20}}, "save-step command"},
		{"CommitBytes past MaxBatchBytes", Options{MaxBatchBytes: 4 << 20, Limits: Limits{CommitBytes: 5 << 20}}, "commit command"},
		{"EventBytes", Options{Limits: Limits{EventBytes: 70 << 20}}, "command can encode"},
		{"GroupWait", Options{GroupWait: GroupWaitMax + 1}, "Options.GroupWait"},
		{"ArchiveCacheBytes", Options{Archive: true, ArchiveCacheBytes: -1}, "Options.ArchiveCacheBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.NoSync = true
			s, err := Open(t.TempDir(), tc.opts)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want ErrInvalidArgument mentioning %q", err, tc.want)
			}
		})
	}
}

// commandBound holds for the largest command of each kind the limits let
// through, under the default limits and under others.
func TestCommandBoundHoldsForTheLargestCommands(t *testing.T) {
	for _, l := range []Limits{DefaultLimits, {EventBytes: 100, ValueBytes: 10, KeyBytes: 3, ContextEntries: 7,
		WritesPerCommit: 5, CommitBytes: 50, KeysPerWatch: 2, ErrorMessageBytes: 1, ErrorCauseDepth: 15}} {
		l = l.withDefaults()
		id := strings.Repeat("i", IDBytes)
		token := uint64(1 << 63)
		ctx := make([]fsm.KV, l.ContextEntries)
		for i := range ctx {
			ctx[i] = fsm.KV{Key: fmt.Sprintf("%0*d", max(1, l.EventBytes/(4*l.ContextEntries)), i)}
		}
		ctxBytes := 0
		for _, kv := range ctx {
			ctxBytes += len(kv.Key)
		}
		params := strings.Repeat("p", l.EventBytes-ctxBytes)
		var errInfo *fsm.ErrorInfo
		for range l.ErrorCauseDepth + 1 {
			errInfo = &fsm.ErrorInfo{Name: id, Message: clean(strings.Repeat("m", l.ErrorMessageBytes+50), l.ErrorMessageBytes), Code: id, Cause: errInfo}
		}
		writes := make([]fsm.Write, l.WritesPerCommit)
		for i := range writes {
			writes[i] = fsm.Write{Key: "k", Value: strings.Repeat("v", l.CommitBytes/l.WritesPerCommit-1), HasValue: true}
		}
		keys := make([]string, l.KeysPerWatch)
		for i := range keys {
			keys[i] = strings.Repeat("k", l.KeyBytes)
		}
		key := strings.Repeat("k", l.KeyBytes)
		value := strings.Repeat("v", l.ValueBytes)
		acks := make([]fsm.Ack, 0, fsm.MaxAcksPerCommand)
		for i := range fsm.MaxAcksPerCommand {
			result := value[:min(len(value), 1+i*7919%300_000)]
			acks = append(acks, fsm.Ack{ExecutionID: id, Token: token, Outcome: fsm.Outcome{Status: fsm.StatusCompleted, Result: result, HasRes: true}})
		}
		acks = acks[:ackRunLen(len(acks), func(i int) (string, *fsm.Outcome) { return acks[i].ExecutionID, &acks[i].Outcome })]
		schedule := &fsm.ScheduleDef{ID: id[:ScheduleIDBytes], WorkflowID: id, Params: strings.Repeat("p", l.EventBytes), HasParams: true,
			Cron: strings.Repeat("c", fsm.MaxCronBytes), Offset: -86399, Start: 1 << 62, End: 1<<63 - 1, CatchUp: fsm.CatchUpNone}
		fires := make([]fsm.Fire, fsm.MaxFiresPerCommand)
		for i := range fires {
			fires[i] = fsm.Fire{ScheduleID: id[:ScheduleIDBytes], At: 1<<63 - 2, Next: 1<<63 - 1, Admit: true, Missed: true}
		}
		for _, c := range []fsm.Command{
			{Kind: fsm.KindAdmit, ExecutionID: id, WorkflowID: id, Params: params, HasParams: true, Context: &ctx, MaxAttempts: MaxAttemptsLimit},
			{Kind: fsm.KindRelease, ExecutionID: id, Token: token, Duration: int64(l.RetryAfter), Cause: errInfo},
			{Kind: fsm.KindCancel, ExecutionID: id, Reason: strings.Repeat("r", l.CancelReasonBytes)},
			{Kind: fsm.KindPutSchedule, Schedule: schedule, At: 1<<63 - 1, Limit: 1<<63 - 1},
			{Kind: fsm.KindDeleteSchedule, ScheduleID: id},
			{Kind: fsm.KindFireSchedules, Fires: fires},
			{Kind: fsm.KindAdmit, ExecutionID: id, WorkflowID: id, Params: params, HasParams: true, Context: &ctx},
			{Kind: fsm.KindStart, ExecutionID: id, Token: token, Key: key, WorkflowID: id, Params: params + strings.Repeat("p", ctxBytes), HasParams: true, ChildID: id},
			{Kind: fsm.KindSaveStep, ExecutionID: id, Token: token, Key: key, Value: value},
			{Kind: fsm.KindAcknowledge, ExecutionID: id, Token: token, Outcome: fsm.Outcome{Status: fsm.StatusCompleted, Result: value, HasRes: true}},
			{Kind: fsm.KindAcknowledge, ExecutionID: id, Token: token, Outcome: fsm.Outcome{Status: fsm.StatusFailed, Error: errInfo}},
			{Kind: fsm.KindAcknowledgeBatch, Acks: acks},
			{Kind: fsm.KindCommit, Writes: writes},
			{Kind: fsm.KindWatch, ExecutionID: id, Keys: keys},
		} {
			if got, bound := fsm.EncodedLen(&c), commandBound(&l, c.Kind); got > bound {
				t.Errorf("limits %+v: a %s command of %d bytes, more than its bound %d", l, c.Kind, got, bound)
			}
		}
	}
}

// An AcknowledgeBatch larger in all than Limits.AcknowledgeBatchBytes is
// refused as a whole, and nothing is written.
func TestOversizedAcknowledgeBatchIsRefusedWhole(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true, Limits: Limits{AcknowledgeBatchBytes: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Admit(ctx, AdmitRequest{ExecutionID: fmt.Sprint("e", i), WorkflowID: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	leases, err := s.ClaimDue(ctx, 3, time.Minute)
	if err != nil || len(leases) != 3 {
		t.Fatalf("ClaimDue: %v, %v", leases, err)
	}
	acks := make([]Ack, len(leases))
	for i, l := range leases {
		acks[i] = Ack{Lease: l, Outcome: Completed(jsonString(400_000))}
	}
	before, _ := s.Stats(ctx)
	if _, err := s.AcknowledgeBatch(ctx, acks); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("AcknowledgeBatch of 1.2 MB: err = %v, want ErrInvalidArgument", err)
	}
	after, _ := s.Stats(ctx)
	if after.WALLastIndex != before.WALLastIndex || after.Terminal != 0 {
		t.Fatalf("the refused batch wrote %d entries, %d terminal", after.WALLastIndex-before.WALLastIndex, after.Terminal)
	}
	res, err := s.AcknowledgeBatch(ctx, acks[:2])
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("AcknowledgeBatch within the limit: %v, %+v", err, res)
	}
}

// A batch the log refuses before writing anything (the budget should make
// this impossible) fails only its own requests: the store is not stopped.
func TestALogRefusalIsNotAStorageFailure(t *testing.T) {
	s, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Admit(ctx, AdmitRequest{ExecutionID: "e", WorkflowID: "w"}); err != nil {
		t.Fatal(err)
	}
	leases, err := s.ClaimDue(ctx, 1, time.Minute)
	if err != nil || len(leases) != 1 {
		t.Fatalf("ClaimDue: %v, %v", leases, err)
	}
	// Bypass the budget: a step value larger than one WAL entry holds.
	r := newRequest()
	r.cmd = fsm.Command{Kind: fsm.KindSaveStep, ExecutionID: "e", Token: leases[0].Token, Key: "k",
		Value: strings.Repeat("v", wal.MaxPayloadBytes)}
	if err := s.in.push([]*request{r}, s.failed); err != nil {
		t.Fatal(err)
	}
	<-r.done
	if !errors.Is(r.err, ErrInvalidArgument) || errors.Is(r.err, ErrStorageFailed) {
		t.Fatalf("refused batch: err = %v, want ErrInvalidArgument and not ErrStorageFailed", r.err)
	}
	r.free()
	if st, _ := s.Stats(ctx); st.Failed != nil {
		t.Fatalf("store failed: %v", st.Failed)
	}
	if err := s.SaveStep(ctx, leases[0], "k", json.RawMessage(`1`)); err != nil {
		t.Fatalf("SaveStep after the refusal: %v", err)
	}
}
