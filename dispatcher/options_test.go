package dispatcher_test

import (
	"errors"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/dispatcher"
)

func TestNewRefusesOptionsOutOfRange(t *testing.T) {
	tests := []struct {
		name string
		opts dispatcher.Options
	}{
		{"negative concurrency", dispatcher.Options{Concurrency: -1}},
		{"negative lease duration", dispatcher.Options{LeaseDuration: -time.Second}},
		{"renew interval equal to the lease", dispatcher.Options{LeaseDuration: time.Minute, RenewInterval: time.Minute}},
		{"renew interval longer than the lease", dispatcher.Options{LeaseDuration: time.Minute, RenewInterval: 2 * time.Minute}},
		{"renew interval longer than the default lease", dispatcher.Options{RenewInterval: time.Minute}},
		{"negative renew interval", dispatcher.Options{RenewInterval: -time.Second}},
		{"negative abort grace period", dispatcher.Options{AbortGracePeriod: -time.Second}},
		{"negative poll interval", dispatcher.Options{PollInterval: -time.Second}},
		{"negative retry base delay", dispatcher.Options{RetryBaseDelay: -time.Second}},
		{"retry max delay below the base", dispatcher.Options{RetryBaseDelay: time.Minute, RetryMaxDelay: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := dispatcher.New(nil, nil, tt.opts)
			if !errors.Is(err, execstore.ErrInvalidArgument) || d != nil {
				t.Fatalf("New = %v, %v; want ErrInvalidArgument", d, err)
			}
		})
	}
}

func TestNewAcceptsOptionsInRange(t *testing.T) {
	tests := []struct {
		name string
		opts dispatcher.Options
	}{
		{"zero value: every default", dispatcher.Options{}},
		{"a short lease with the default renew interval", dispatcher.Options{LeaseDuration: 3 * time.Nanosecond}},
		{"a renew interval just shorter than the lease", dispatcher.Options{LeaseDuration: time.Minute, RenewInterval: time.Minute - 1}},
		{"a retry base above the default cap", dispatcher.Options{RetryBaseDelay: time.Hour}},
		{"concurrency one", dispatcher.Options{Concurrency: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := dispatcher.New(nil, nil, tt.opts); err != nil {
				t.Fatalf("New: %v", err)
			}
		})
	}
}
