package dispatcher

import (
	"testing"
	"time"
)

func TestRetryDelayDoublesFromTheBaseUpToTheCap(t *testing.T) {
	tests := []struct {
		attempts  int
		base, max time.Duration
		want      time.Duration
	}{
		{0, time.Second, time.Minute, time.Second},
		{1, time.Second, time.Minute, time.Second},
		{2, time.Second, time.Minute, 2 * time.Second},
		{3, time.Second, time.Minute, 4 * time.Second},
		{6, time.Second, time.Minute, 32 * time.Second},
		{7, time.Second, time.Minute, time.Minute},
		{1 << 30, time.Second, time.Minute, time.Minute},
		{100, time.Second, 1<<63 - 1, 1<<63 - 1}, // no overflow
		{5, 0, time.Minute, 0},
	}
	for _, tt := range tests {
		if got := retryDelay(tt.attempts, tt.base, tt.max); got != tt.want {
			t.Errorf("retryDelay(%d, %v, %v) = %v, want %v", tt.attempts, tt.base, tt.max, got, tt.want)
		}
	}
}

func TestRenewalsFallOnAGridFromTheClaim(t *testing.T) {
	start := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		now  time.Duration // after start
		want time.Duration
	}{
		{-time.Second, 10 * time.Second},
		{0, 10 * time.Second},
		{9 * time.Second, 10 * time.Second},
		{10 * time.Second, 20 * time.Second},
		{35 * time.Second, 40 * time.Second},
	}
	for _, tt := range tests {
		if got := nextTick(start, 10*time.Second, start.Add(tt.now)); !got.Equal(start.Add(tt.want)) {
			t.Errorf("nextTick(+%v) = +%v, want +%v", tt.now, got.Sub(start), tt.want)
		}
	}
}
