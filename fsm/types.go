package fsm

import "github.com/execstore/execstore/fsm/internal/record"

// The record and its parts are defined in fsm/internal/record, which alone
// can change a stored record (record.Stored); these are their names here.
type (
	Status    = record.Status
	ErrorInfo = record.ErrorInfo
	Outcome   = record.Outcome
	KV        = record.KV
	Parent    = record.Parent
	Execution = record.Execution
)

// The statuses. The numeric values are part of the WAL and snapshot
// formats: never renumber them.
const (
	StatusAdmitted  = record.StatusAdmitted
	StatusSuspended = record.StatusSuspended
	StatusCompleted = record.StatusCompleted
	StatusFailed    = record.StatusFailed
	StatusCancelled = record.StatusCancelled
)

// completedNoResult is the outcome most acknowledgements record; records share
// it instead of each holding a copy (outcomes are never changed).
var completedNoResult = &Outcome{Status: StatusCompleted}

// internOutcome returns a pointer to an outcome equal to *o that a record may
// keep.
func internOutcome(o *Outcome) *Outcome {
	if *o == *completedNoResult {
		return completedNoResult
	}
	out := *o
	return &out
}

// Lease is a claim on one execution, fenced by its token.
type Lease struct {
	ExecutionID string
	Token       uint64
	ExpiresAt   int64
}

// Write is one change to the key-value store. A nil value (HasValue false)
// deletes the key.
type Write struct {
	Key      string
	Value    string
	HasValue bool
}

// minNonZero returns the smaller of two times where 0 means "none".
func minNonZero(a, b int64) int64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	case a < b:
		return a
	}
	return b
}

// addSaturating returns a+d, clamped to the largest time instead of overflowing.
func addSaturating(a, d int64) int64 {
	if d > 0 && a > maxTime-d {
		return maxTime
	}
	return a + d
}

const maxTime = int64(^uint64(0) >> 1)
