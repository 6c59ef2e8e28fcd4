package fsm

import (
	"bufio"
	"bytes"
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkApplyClaimAcknowledge measures the state machine alone: claim 64
// of 100,000 pending executions, acknowledge each (completed), refill.
// ns/op is per execution.
func BenchmarkApplyClaimAcknowledge(b *testing.B) { benchClaimAcknowledge(b, false) }

// BenchmarkApplyClaimAcknowledgeBatch is BenchmarkApplyClaimAcknowledge
// with the acknowledgements of each claim in one acknowledge-batch command,
// as a store's AcknowledgeBatch logs them, and with the records shared with
// a copy of the state, as they are after a snapshot's capture: each claim
// replaces the record it leases.
func BenchmarkApplyClaimAcknowledgeBatch(b *testing.B) { benchClaimAcknowledge(b, true) }

// benchClaimAcknowledge claims 64 at a time from about 100,000 pending and
// acknowledges each claim's executions: one command each, or (batched) one
// acknowledge-batch command per claim with the records shared with a copy.
func benchClaimAcknowledge(b *testing.B, batched bool) {
	s := New()
	now := int64(1_000)
	admitted := 0
	admit := func(n int) {
		for i := 0; i < n; i++ {
			id := "01KDZ98CG031KHGDK8P" + strconv.Itoa(10_000_000+admitted)
			s.Apply(&Command{Kind: KindAdmit, Now: now, ExecutionID: id, WorkflowID: "charge-order", Params: `{"order":42}`, HasParams: true})
			admitted++
		}
		if batched {
			s.Copy()
		}
	}
	admit(100_000)
	ack := Command{Kind: KindAcknowledge, Outcome: Outcome{Status: StatusCompleted}}
	acks := Command{Kind: KindAcknowledgeBatch}
	claim := Command{Kind: KindClaim, Limit: 64, Duration: 60e9}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		now++
		claim.Now = now
		claim.Limit = min(64, b.N-done)
		r := s.Apply(&claim)
		acks.Now, acks.Acks = now, acks.Acks[:0]
		for _, l := range r.Leases {
			if batched {
				acks.Acks = append(acks.Acks, Ack{ExecutionID: l.ExecutionID, Token: l.Token, Outcome: Outcome{Status: StatusCompleted}})
				continue
			}
			ack.Now, ack.ExecutionID, ack.Token = now, l.ExecutionID, l.Token
			s.Apply(&ack)
		}
		if batched {
			s.Apply(&acks)
		}
		done += len(r.Leases)
		if admitted-done < 99_000 {
			b.StopTimer()
			admit(1000)
			b.StartTimer()
		}
	}
}

func BenchmarkApplyAdmit(b *testing.B) {
	s := New()
	c := Command{Kind: KindAdmit, Now: 1, WorkflowID: "charge-order", Params: `{"order":42}`, HasParams: true}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.ExecutionID = "01KDZ98CG031KHGDK8P" + strconv.Itoa(10_000_000+i)
		s.Apply(&c)
	}
}

// heapPerRecord applies fn, then reports the heap growth per record.
func heapPerRecord(b *testing.B, n int, fn func()) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "heap-B/record")
}

// admitMany admits n executions with ULID-shaped IDs and no params.
func admitMany(s *State, n int) {
	for i := 0; i < n; i++ {
		id := "01KDZ98CG0" + strconv.Itoa(1_000_000_000_000_000+i)
		s.Apply(&Command{Kind: KindAdmit, Now: 1000, ExecutionID: id, WorkflowID: "charge-order"})
	}
}

// BenchmarkHeapPerIdleRecord: the state's heap per admitted, idle record
// (no params), 1,000,000 records. Goal: under 350 B.
func BenchmarkHeapPerIdleRecord(b *testing.B) {
	const n = 1_000_000
	for i := 0; i < b.N; i++ {
		var s *State
		heapPerRecord(b, n, func() { s = New(); admitMany(s, n) })
		runtime.KeepAlive(s)
	}
}

// BenchmarkHeapPerRetiredRecord: the state's heap per terminal record after
// retention (completed, no result), 1,000,000 records. Goal: under 150 B.
func BenchmarkHeapPerRetiredRecord(b *testing.B) {
	const n = 1_000_000
	for i := 0; i < b.N; i++ {
		var s *State
		heapPerRecord(b, n, func() {
			s = New()
			admitMany(s, n)
			for done := 0; done < n; {
				r := s.Apply(&Command{Kind: KindClaim, Now: 2000, Limit: 1000, Duration: 1e9})
				for _, l := range r.Leases {
					s.Apply(&Command{Kind: KindAcknowledge, Now: 2000, ExecutionID: l.ExecutionID, Token: l.Token,
						Outcome: Outcome{Status: StatusCompleted}})
				}
				done += len(r.Leases)
			}
			for s.Apply(&Command{Kind: KindRetire, Now: 3000, At: 3000, Limit: 100_000}).Count > 0 {
			}
		})
		runtime.KeepAlive(s)
	}
}

// BenchmarkListPage: one page of 100 records of a listing over 1,000,000
// records in four workflows, a quarter completed and an eighth failed (the
// oldest 3/8); ns/op is per page. The listings start in the middle (a
// cursor) or at an end. A page by status visits only the chunks of 256
// admissions with that status: the failed ones newest first pass over 5/8
// of the table, and the cancelled ones (there are none) all of it, in one
// tree search. A filter the indexes do not serve together (workflow and
// status) skips what fails it.
func BenchmarkListPage(b *testing.B) {
	const n = 1_000_000
	s := New()
	for i := 0; i < n; i++ {
		id := "01KDZ98CG0" + strconv.Itoa(1_000_000_000_000_000+i)
		s.Apply(&Command{Kind: KindAdmit, Now: int64(1000 + i/64), ExecutionID: id, WorkflowID: "wf-" + strconv.Itoa(i%4)})
	}
	for done := 0; done < n*3/8; {
		r := s.Apply(&Command{Kind: KindClaim, Now: int64(1000 + n), Limit: 1000, Duration: 1e9})
		for i, l := range r.Leases {
			o := Outcome{Status: StatusCompleted}
			if (done+i)%3 == 0 {
				o = Outcome{Status: StatusFailed, Error: &ErrorInfo{Name: "E", Message: "m"}}
			}
			s.Apply(&Command{Kind: KindAcknowledge, Now: int64(1000 + n), ExecutionID: l.ExecutionID, Token: l.Token, Outcome: o})
		}
		done += len(r.Leases)
	}
	mid := ListPos{No: n / 2}
	for _, c := range []struct {
		name string
		q    ListQuery
		want int
	}{
		{"status=failed/newest (passes over 5/8 of the table)", ListQuery{Status: StatusFailed, Newest: true}, 100},
		{"status=cancelled (none)", ListQuery{Status: StatusCancelled}, 0},
		{"all/oldest", ListQuery{}, 100},
		{"all/newest", ListQuery{Newest: true}, 100},
		{"all/from-the-middle", ListQuery{After: mid}, 100},
		{"status=failed", ListQuery{Status: StatusFailed}, 100},
		{"status=admitted/newest/from-the-middle", ListQuery{Status: StatusAdmitted, Newest: true, After: mid}, 100},
		{"workflow", ListQuery{Workflow: "wf-2"}, 100},
		{"workflow/time-range", ListQuery{Workflow: "wf-2", From: 1000 + n/256, To: 1000 + n/32}, 100},
		{"workflow+status=failed (skips)", ListQuery{Workflow: "wf-1", Status: StatusFailed}, 100},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := c.q
			q.Limit, q.ScanMax = 100, 10_000
			got := 0
			b.ReportAllocs()
			for b.Loop() {
				got = 0
				s.List(&q, func(*Execution) { got++ })
			}
			if got != c.want {
				b.Fatalf("a page of %d", got)
			}
		})
	}
}

// BenchmarkDecodeState: decoding a snapshot of 1,000,000 idle admitted
// records (the state machine's share of a reopen).
func BenchmarkDecodeState(b *testing.B) {
	const n = 1_000_000
	s := New()
	admitMany(s, n)
	var buf bytes.Buffer
	if err := s.Encode(&buf); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	for b.Loop() {
		if _, err := DecodeState(bufio.NewReader(bytes.NewReader(buf.Bytes()))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeState: encoding a state of 1,000,000 records, half of
// them claimed and acknowledged, whose IDs' order is not their admission
// order (a snapshot's share of the writer's neighbour core).
func BenchmarkEncodeState(b *testing.B) {
	const n = 1_000_000
	s := New()
	for i := range n {
		s.Apply(&Command{Kind: KindAdmit, Now: int64(1000 + i), ExecutionID: "e-" + strconv.Itoa(i), WorkflowID: "w"})
	}
	now := int64(2 * n)
	for done := 0; done < n/2; now++ {
		r := s.Apply(&Command{Kind: KindClaim, Now: now, Limit: 256, Duration: 60e9})
		acks := make([]Ack, len(r.Leases))
		for i, l := range r.Leases {
			acks[i] = Ack{ExecutionID: l.ExecutionID, Token: l.Token, Outcome: Outcome{Status: StatusCompleted}}
		}
		s.Apply(&Command{Kind: KindAcknowledgeBatch, Now: now, Acks: acks})
		done += len(acks)
	}
	for b.Loop() {
		if err := s.Encode(discard{}); err != nil {
			b.Fatal(err)
		}
	}
}

// discard is a Writer that keeps nothing.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
