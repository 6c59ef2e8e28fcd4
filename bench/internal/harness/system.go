package harness

import (
	"context"
	"strconv"
	"strings"
	"time"
)

// System is one contender: a durable queue of executions named by ID.
type System interface {
	// Name is the contender's row label, e.g. "execstore" or "SQLite, one row per execution".
	Name() string
	// Open creates a fresh, empty store in dir (or a fresh schema for a server).
	Open(ctx context.Context, dir string) error
	// Close releases everything Open took; the data may be discarded.
	Close() error
	// Admit triggers one execution with the given ID and returns once the
	// trigger is durable. dup reports that the system refused it as a repeat
	// of an ID it already has.
	Admit(ctx context.Context, id string) (dup bool, err error)
	// Fill makes the executions ids(from..from+n-1) pending as fast as the
	// system allows. It is setup, never timed.
	Fill(ctx context.Context, prefix string, from, n int) error
	// ClaimComplete claims up to limit due executions with the system's own
	// claim statement and records each as completed with its own completion
	// statement, returning how many it completed.
	ClaimComplete(ctx context.Context, limit int) (int, error)
	// Work starts the system's own worker loop with conc concurrent
	// deliveries. onRun is called each time the no-op body runs, onDone once
	// the completion is durable. stop ends the loop and waits for it.
	Work(ctx context.Context, conc int, onRun, onDone func(id string)) (stop func(), err error)
}

// Chainer is a System whose claimers can run as a worker loop does:
// complete the batch they ran and claim the next in one call. Workload (b)
// runs its chained rows through it; a System without it runs only the rows
// that claim, then complete (ClaimComplete).
type Chainer interface {
	// Chain returns a new chain for one claimer goroutine.
	Chain() ClaimChain
}

// ClaimChain is one claimer's state in the chained mode: the batch it claimed
// last and has not completed yet. It is used by one goroutine at a time.
type ClaimChain interface {
	// Next completes the batch the previous call claimed and claims up to
	// limit more, in one call (execstore: one AcknowledgeAndClaim, one WAL
	// batch; SQL: one transaction). With nothing held (the first call) it
	// only claims. It returns how many it completed and how many it claimed.
	Next(ctx context.Context, limit int) (completed, claimed int, err error)
	// Finish completes what the chain still holds and returns how many.
	Finish(ctx context.Context) (completed int, err error)
}

// BatchAdmitter is a System that can admit many executions in one call.
type BatchAdmitter interface {
	// AdmitBatch admits ids together (one transaction, one insert call) and
	// returns how many of them were refused as repeats.
	AdmitBatch(ctx context.Context, ids []string) (dups int, err error)
}

// Sizer reports what a System keeps per record, for the scale curve.
type Sizer interface {
	// Size returns the bytes the system holds for its records (heap for an
	// in-process store, files or relations for a database) and what they
	// are ("heap", "file", "relation").
	Size(ctx context.Context) (int64, string, error)
}

// Reopener is a System whose reopen (recovery) time means something.
type Reopener interface {
	// Reopen closes the store and opens it again, and returns how long the
	// open took.
	Reopen(ctx context.Context) (time.Duration, error)
}

// id names the i-th execution of a run.
func id(prefix string, i int) string { return prefix + strconv.Itoa(i) }

// idIndex parses what id made; -1 if s is not one of prefix's.
func idIndex(prefix, s string) int {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil {
		return -1
	}
	return n
}
