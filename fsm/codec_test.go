package fsm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sampleCommands() []Command {
	ctx := []KV{{Key: "a", Value: "1"}, {Key: "tenant", Value: "t-1"}}
	empty := []KV{}
	return []Command{
		{Kind: KindAdmit, Now: 1, ExecutionID: "order-42", WorkflowID: "charge-order", Params: `{"order":42}`, HasParams: true, Context: &ctx},
		{Kind: KindAdmit, Now: 2, ExecutionID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Generated: true, WorkflowID: "w", Context: &empty},
		{Kind: KindAdmit, Now: 2, ExecutionID: "x", WorkflowID: "w", Params: "", HasParams: true},
		{Kind: KindWake, Now: 3, ExecutionID: "e", At: 1 << 60},
		{Kind: KindClaim, Now: 4, Limit: 64, Duration: 30e9},
		{Kind: KindClaim, Now: 4, Limit: 64, Duration: 30e9, RequestKey: "worker-7/round-12"},
		{Kind: KindClaim, Now: 4, Limit: 8, Duration: 30e9, Queues: []string{"charge-order", "emails"}},
		{Kind: KindAdmit, Now: 4, ExecutionID: "mail-1", WorkflowID: "send-email", Queue: "bulk"},
		{Kind: KindPutQueue, Now: 4, QueueSettings: &QueueSettings{Name: "charge-order", Concurrency: 16}, Limit: MaxQueueSettings},
		{Kind: KindPutQueue, Now: 4, QueueSettings: &QueueSettings{Name: "bulk", Paused: true}, Limit: MaxQueueSettings},
		{Kind: KindPutQueue, Now: 4, QueueSettings: &QueueSettings{Name: "api", Concurrency: 8, Rate: 100, Period: MinRatePeriod * 1000}, Limit: MaxQueueSettings},
		{Kind: KindPutQueue, Now: 4, QueueSettings: &QueueSettings{Name: "charge-order", Concurrency: 32, KeyLimit: 1, KeyLive: true}, Limit: MaxQueueSettings},
		{Kind: KindAdmit, Now: 4, ExecutionID: "order-43", WorkflowID: "charge-order", ConcurrencyKey: "customer-7", Priority: 2},
		{Kind: KindExpireDeadlines, Now: 5, Limit: 1024},
		{Kind: KindDeleteQueue, Now: 4, Queue: "bulk"},
		{Kind: KindRenew, Now: 5, ExecutionID: "e", Token: 7, Duration: 1},
		{Kind: KindRelease, Now: 6, ExecutionID: "e", Token: 7},
		{Kind: KindAcknowledge, Now: 7, ExecutionID: "e", Token: 1, Outcome: Outcome{Status: StatusSuspended}},
		{Kind: KindAcknowledge, Now: 7, ExecutionID: "e", Token: 1, Outcome: Outcome{Status: StatusCompleted}},
		{Kind: KindAcknowledge, Now: 7, ExecutionID: "e", Token: 1, Outcome: Outcome{Status: StatusCompleted, Result: `null`, HasRes: true}},
		{Kind: KindAcknowledge, Now: 7, ExecutionID: "e", Token: 1, Outcome: Outcome{Status: StatusFailed,
			Error: &ErrorInfo{Name: "PaymentError", Message: "declined", Code: "DECLINED", Cause: &ErrorInfo{Message: "expired"}}}},
		{Kind: KindSaveStep, Now: 8, ExecutionID: "e", Token: 1, Key: "charge", Value: `{"r":1}`},
		{Kind: KindStart, Now: 9, ExecutionID: "e", Token: 1, Key: "s", WorkflowID: "w", Params: `{}`, HasParams: true, ChildID: "c"},
		{Kind: KindCommit, Now: 10, Writes: []Write{{Key: "k", Value: `1`, HasValue: true}, {Key: "gone"}}},
		{Kind: KindCommit, Now: 10},
		{Kind: KindWatch, Now: 11, ExecutionID: "e", Keys: []string{"a", "b"}},
		{Kind: KindRetire, Now: 12, At: 5, Limit: 1024},
		{Kind: KindAdmit, Now: 14, ExecutionID: "bounded", WorkflowID: "w", MaxAttempts: MaxAttempts},
		{Kind: KindRelease, Now: 15, ExecutionID: "e", Token: 7, Duration: 9, Cause: &ErrorInfo{Name: "E", Message: "m", Code: "C", Cause: &ErrorInfo{Message: "root"}}},
		{Kind: KindCancel, Now: 16, ExecutionID: "order-42", Reason: "the customer cancelled"},
		{Kind: KindCancel, Now: 16, ExecutionID: "e"},
		{Kind: KindForget, Now: 17, At: 9},
		{Kind: KindForget, Now: 17, At: 1 << 62, Forgotten: []ForgetCount{
			{WorkflowID: "charge-order", Status: StatusCompleted, N: 41},
			{WorkflowID: "charge-order", Status: StatusCancelled, N: 1},
			{WorkflowID: "w", Status: StatusFailed, N: 1 << 20},
		}},
		{Kind: KindAcknowledgeBatch, Now: 13, Acks: []Ack{
			{ExecutionID: "a", Token: 1, Outcome: Outcome{Status: StatusCompleted}},
			{ExecutionID: "b", Token: 300, Outcome: Outcome{Status: StatusSuspended}},
			{ExecutionID: "a", Token: 2, Outcome: Outcome{Status: StatusFailed, Error: &ErrorInfo{Name: "E"}}},
		}},
		{Kind: KindPutSchedule, Now: 14, At: 1e9, Limit: 10_000, Schedule: &ScheduleDef{ID: "nightly", WorkflowID: "settle",
			Params: `{"shop":1}`, HasParams: true, Cron: "0 2 * * *", Offset: -5 * 3600, Start: 1, End: 1 << 61, CatchUp: CatchUpAll}},
		{Kind: KindPutSchedule, Now: 14, Limit: 1, Schedule: &ScheduleDef{ID: "s", WorkflowID: "w", Every: 60e9, Start: 99, CatchUp: CatchUpNone}},
		{Kind: KindDeleteSchedule, Now: 15, ScheduleID: "nightly"},
		{Kind: KindFireSchedules, Now: 16, Fires: []Fire{
			{ScheduleID: "s", At: 5, Next: 6},
			{ScheduleID: "s", At: 6, Next: 7, Admit: true, Missed: true},
			{ScheduleID: "nightly", At: 16, Admit: true},
		}},
	}
}

func TestCodecRoundTripsEveryKind(t *testing.T) {
	sampled := map[Kind]bool{}
	for _, c := range sampleCommands() {
		sampled[c.Kind] = true
	}
	for _, k := range Kinds() {
		if !sampled[k] {
			t.Errorf("no sample command of kind %s: add one to sampleCommands", k)
		}
	}
	for _, c := range sampleCommands() {
		b := AppendEncode(nil, &c)
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%v: %v", c.Kind, err)
		}
		if diff := cmp.Diff(c, *got); diff != "" {
			t.Fatalf("%v round trip (-want +got):\n%s", c.Kind, diff)
		}
		// Every strict prefix is refused, never misread.
		for n := 0; n < len(b); n++ {
			if _, err := Decode(b[:n]); err == nil {
				t.Fatalf("%v: prefix of %d/%d bytes decoded", c.Kind, n, len(b))
			}
		}
		if _, err := Decode(append(b, 0)); err == nil {
			t.Fatalf("%v: trailing byte accepted", c.Kind)
		}
	}
}

// A command written by codec version 1 decodes with the defaults of the
// fields version 2 added (no attempt bound, no release cause), version 3
// (no request key), version 5 (the default queue, a claim of every
// queue), versions 8 to 10 (the default priority, no deadline, no
// concurrency key), and encodes back in version 1 to the same bytes.
func TestVersion1CommandsDecodeWithTheNewFieldsAtTheirDefaults(t *testing.T) {
	for _, c := range sampleCommands() {
		if kindOf(c.Kind).since > 1 {
			continue // refused in version 1: TestCodecRefusesKindsBeforeTheirVersion
		}
		c.MaxAttempts, c.Cause, c.RequestKey, c.Queue, c.Queues = 0, nil, "", "", nil
		c.Priority, c.Deadline, c.ConcurrencyKey = 0, 0, "" // versions 8, 9 and 10
		b := appendEncode(nil, &c, 1)
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%v in version 1: %v", c.Kind, err)
		}
		if diff := cmp.Diff(c, *got); diff != "" {
			t.Fatalf("%v in version 1 (-want +got):\n%s", c.Kind, diff)
		}
	}
}

func TestDecodeRefusesMalformedCommands(t *testing.T) {
	valid := AppendEncode(nil, &Command{Kind: KindWake, Now: 3, ExecutionID: "e", At: 5})
	cases := map[string][]byte{
		"empty":                {},
		"version 0":            append([]byte{0}, valid[1:]...),
		"version 4":            append([]byte{CodecVersion + 1}, valid[1:]...),
		"request key in v2":    append(appendEncode(nil, &Command{Kind: KindClaim, Now: 1, Limit: 1, Duration: 1}, 2), 1, 'k'),
		"long request key":     AppendEncode(nil, &Command{Kind: KindClaim, Now: 1, Limit: 1, Duration: 1, RequestKey: strings.Repeat("k", MaxRequestKeyLen+1)}),
		"cancel in v1":         append([]byte{1}, AppendEncode(nil, &Command{Kind: KindCancel, Now: 1, ExecutionID: "e"})[1:]...),
		"attempts bound":       AppendEncode(nil, &Command{Kind: KindAdmit, Now: 1, ExecutionID: "e", WorkflowID: "w", MaxAttempts: MaxAttempts + 1}),
		"cancel no id":         {CodecVersion, byte(KindCancel), 1, 0, 0},
		"kind 0":               {CodecVersion, 0, 1},
		"kind 200":             {CodecVersion, 200, 1},
		"zero time":            {CodecVersion, byte(KindClaim), 0, 1, 1},
		"zero limit":           {CodecVersion, byte(KindClaim), 1, 0, 1},
		"huge count":           {CodecVersion, byte(KindCommit), 1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bad bool":             append(AppendEncode(nil, &Command{Kind: KindAdmit, Now: 1, ExecutionID: "e", WorkflowID: "w"})[:5], 7),
		"unsorted watch":       AppendEncode(nil, &Command{Kind: KindWatch, Now: 1, ExecutionID: "e", Keys: []string{"b", "a"}}),
		"bad status":           {CodecVersion, byte(KindAcknowledge), 1, 1, 'e', 1, 9},
		"no acks":              {CodecVersion, byte(KindAcknowledgeBatch), 1, 0},
		"too many acks":        {CodecVersion, byte(KindAcknowledgeBatch), 1, 0x81, 0x20}, // 4097
		"bad batch ack":        {CodecVersion, byte(KindAcknowledgeBatch), 1, 2, 1, 'e', 1, byte(StatusSuspended), 0, 1, byte(StatusSuspended)},
		"no fires":             {CodecVersion, byte(KindFireSchedules), 1, 0},
		"missed, not admitted": {CodecVersion, byte(KindFireSchedules), 9, 1, 1, 's', 5, 6, fireMissed},
		"unknown fire flag":    {CodecVersion, byte(KindFireSchedules), 9, 1, 1, 's', 5, 6, 4},
		"next before the fire": {CodecVersion, byte(KindFireSchedules), 9, 1, 1, 's', 5, 5, fireAdmit},
		"first occurrence not after the put": AppendEncode(nil, &Command{Kind: KindPutSchedule, Now: 5, At: 5, Limit: 1,
			Schedule: &ScheduleDef{ID: "s", WorkflowID: "w", Every: 1, Start: 1, CatchUp: CatchUpAll}}),
		"interval and cron": AppendEncode(nil, &Command{Kind: KindPutSchedule, Now: 5, Limit: 1,
			Schedule: &ScheduleDef{ID: "s", WorkflowID: "w", Every: 1, Cron: "* * * * *", Start: 1, CatchUp: CatchUpAll}}),
		"no catch-up policy": AppendEncode(nil, &Command{Kind: KindPutSchedule, Now: 5, Limit: 1,
			Schedule: &ScheduleDef{ID: "s", WorkflowID: "w", Every: 1, Start: 1}}),
		"empty delete": {CodecVersion, byte(KindDeleteSchedule), 1, 0},
	}
	for name, b := range cases {
		if _, err := Decode(b); !errors.Is(err, ErrDecode) {
			t.Errorf("%s: err = %v, want ErrDecode", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, c := range sampleCommands() {
		f.Add(AppendEncode(nil, &c))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	g := &gen{rng: rng, now: 1000}
	for i := 0; i < 50; i++ {
		c := g.next()
		f.Add(AppendEncode(nil, &c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error does not wrap ErrDecode: %v", err)
			}
			return
		}
		// What decodes is exactly what the encoder writes, in the version it
		// was written in.
		again := appendEncode(nil, c, b[0])
		if !bytes.Equal(again, b) {
			t.Fatalf("decode→encode differs:\n in  %x\n out %x", b, again)
		}
		// And applying it never panics or breaks the invariants.
		s := New()
		s.Apply(&Command{Kind: KindAdmit, Now: 1, ExecutionID: c.ExecutionID + "x", WorkflowID: "w"})
		s.Apply(c)
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}

// A command of a kind that a codec version did not know yet is refused when
// it is decoded in that version: an older log never holds one, so a log
// that does is damaged.
func TestCodecRefusesKindsBeforeTheirVersion(t *testing.T) {
	refused := 0
	for _, c := range sampleCommands() {
		since := kindOf(c.Kind).since
		if since == 1 {
			continue
		}
		if _, err := Decode(appendEncode(nil, &c, since-1)); !errors.Is(err, ErrDecode) {
			t.Errorf("%v in version %d: err %v, want ErrDecode", c.Kind, since-1, err)
		}
		if _, err := Decode(appendEncode(nil, &c, since)); err != nil {
			t.Errorf("%v in version %d: %v", c.Kind, since, err)
		}
		refused++
	}
	if refused == 0 {
		t.Fatal("no sample command of a kind newer than version 1")
	}
}
