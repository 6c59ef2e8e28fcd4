package execstore

import (
	"context"
	"testing"
	"time"
)

// The index of terminal records awaiting retirement is kept only by a store
// with retention on; without it, ending an execution adds nothing to it.
func TestTheRetirementIndexExistsOnlyWithRetention(t *testing.T) {
	for _, retention := range []time.Duration{0, time.Hour} {
		dir := t.TempDir()
		for range 2 { // and again after reopening
			s, err := Open(dir, Options{NoSync: true, Retention: retention})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := s.Admit(ctx, AdmitRequest{WorkflowID: "w"}); err != nil {
				t.Fatal(err)
			}
			leases, _ := s.ClaimDue(ctx, 10, time.Minute)
			for _, l := range leases {
				if _, err := s.Acknowledge(ctx, l, Completed(nil)); err != nil {
					t.Fatal(err)
				}
			}
			if got := s.state.RetirementTracked(); got != (retention > 0) {
				t.Fatalf("retention %v: index kept = %v", retention, got)
			}
			if err := s.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
	}
}
