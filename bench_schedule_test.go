package execstore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

// BenchmarkScheduleDueToAdmission measures, on the real clock, the time from
// each occurrence's due time to when its execution can be read: the writer's
// timer firing, the fire-schedules command written (and synced) and applied.
// One occurrence every 20 ms; each iteration is one occurrence.
//
//	go test -run '^$' -bench ScheduleDueToAdmission -benchtime 200x .
func BenchmarkScheduleDueToAdmission(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", !noSync), func(b *testing.B) {
			s, err := execstore.Open(b.TempDir(), execstore.Options{NoSync: noSync,
				Limits: execstore.Limits{ScheduleInterval: 10 * time.Millisecond}})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			sc, err := s.PutSchedule(ctx, execstore.Schedule{ID: "s", WorkflowID: "w", Interval: 20 * time.Millisecond,
				Start: time.Now().Add(50 * time.Millisecond), CatchUp: execstore.CatchUpAll})
			if err != nil {
				b.Fatal(err)
			}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				at := sc.NextAt
				id := execstore.ScheduleOccurrenceID(sc.ID, at)
				for {
					changed := s.DueChanged()
					if _, err := s.Get(ctx, id); err == nil {
						break
					}
					<-changed
				}
				lat = append(lat, time.Since(at))
				if sc, err = s.GetSchedule(ctx, sc.ID); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(q(0.5), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
		})
	}
}
