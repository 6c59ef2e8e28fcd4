package fsm

import (
	"strconv"
	"testing"
)

// BenchmarkApplyClaimAcknowledge measures the state machine alone: claim 64
// of 100,000 pending executions, acknowledge each (completed), refill.
// ns/op is per execution.
func BenchmarkApplyClaimAcknowledge(b *testing.B) {
	s := New()
	now := int64(1_000)
	admitted := 0
	admit := func(n int) {
		for i := 0; i < n; i++ {
			id := "01KDZ98CG031KHGDK8P" + strconv.Itoa(10_000_000+admitted)
			s.Apply(&Command{Kind: KindAdmit, Now: now, ExecutionID: id, WorkflowID: "charge-order", Params: `{"order":42}`, HasParams: true})
			admitted++
		}
	}
	admit(100_000)
	ack := Command{Kind: KindAcknowledge, Outcome: Outcome{Status: StatusCompleted}}
	claim := Command{Kind: KindClaim, Limit: 64, Duration: 60e9}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		now++
		claim.Now = now
		claim.Limit = min(64, b.N-done)
		r := s.Apply(&claim)
		for _, l := range r.Leases {
			ack.Now, ack.ExecutionID, ack.Token = now, l.ExecutionID, l.Token
			s.Apply(&ack)
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
