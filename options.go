package execstore

import (
	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"
	"io"
	"log/slog"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/vfs"
)

// Options configure a Store. The zero value is a durable store on the real
// clock with default limits.
type Options struct {
	// Now is the store's clock. Nil means time.Now (Clock's Now when Clock is
	// set). The store never lets its own time go backwards: each command is
	// stamped with max(previous, Now()), across restarts too. Store.Now reads
	// the store's time; a Now() reading earlier than it is counted in Stats
	// (ClockBehindStamps) and logged. With Now set and Clock nil, the
	// writer's timers are the operating system's, each set for as long as
	// Now reads its deadline away.
	Now func() time.Time
	// Clock is the store's time and the timers its writer waits on: the next
	// schedule occurrence's (ScheduleCheck) and the retention check's
	// (RetentionCheck). Nil (the default) means the system clock: Now for
	// the time and the operating system's timers. Set Clock or Now, not both:
	// the time the store stamps and the time its timers fire at come from one
	// clock, and Open refuses both with ErrInvalidArgument. On a manual clock
	// (dispatchertest.Clock) time moves only when a test moves it, and the
	// writer's timers fire when it is moved past them; give the same clock to
	// the dispatchers (dispatcher.Options.Clock). On a clock whose timers
	// never fire, the writer retires and reaches occurrences only in the
	// rounds that take requests, before their batch: what it does then
	// depends on the requests alone (the crash simulator runs so).
	Clock Clock
	// NoSync skips fsync. Default false: a write that returned nil is on disk.
	NoSync bool
	// GroupWait bounds how long the writer waits, before it writes a batch,
	// for the callers its latest batch answered to send again, so that one
	// fsync carries them all: callers that each wait for their answer
	// before sending the next command (claimers in a loop, goroutines
	// admitting one execution after another) otherwise take turns, each
	// fsync carrying half of them. The writer waits only when the log
	// syncs, something is queued and fewer calls than it expects, and it
	// waits less often after waits that ended at this bound. Zero (the
	// default): half the latest fsync's time, at most 500 µs. Negative:
	// never wait; each batch takes what has queued. A replicated store
	// (OpenReplicated) does not wait: raft batches its writes. At most GroupWaitMax
	// (Open refuses more): the writer spins while it waits, yielding its
	// core to the callers.
	GroupWait time.Duration
	// Logger receives structured logs. Nil discards them.
	Logger *slog.Logger
	// Metrics receives measurements as they happen: commands by kind and
	// result, log batches and fsync times, claim and acknowledgement
	// latencies, lost leases, snapshots (see Metrics; the metrics package
	// adapts it to Prometheus). Nil (the default) measures nothing.
	Metrics Metrics

	// Limits bound every size and count the store accepts. Zero fields take
	// their defaults (see Limits).
	Limits Limits
	// MaxBatch is the most commands written as one WAL batch (one fsync).
	// Default 4096; at most wal.MaxBatchEntries (Open refuses more).
	MaxBatch int
	// MaxBatchBytes is the most bytes of encoded commands written as one WAL
	// batch: the writer cuts batches by bytes as well as by count, so that
	// many large commands queued at once never make a batch the log refuses.
	// It also bounds one command: Open refuses Limits under which some
	// command could encode to more than MaxBatchBytes (or than one WAL entry
	// holds, wal.MaxPayloadBytes). Default 64 MiB; at most wal.MaxBatchBytes.
	MaxBatchBytes int
	// SegmentSize is the WAL's target segment file size in bytes. Default
	// 16 MiB.
	SegmentSize int
	// SnapshotEntries: the store snapshots on its own after this many logged
	// commands, or an eighth as many as it has records if that is more (a
	// snapshot costs time in proportion to the state, so it is taken in
	// proportion to the state too). Default 100,000 (DefaultSnapshotEntries).
	SnapshotEntries int
	// SnapshotWALBytes: the store snapshots on its own after this many bytes
	// of logged commands, or half the last snapshot's size if that is more.
	// Default 64 MiB (DefaultSnapshotWALBytes).
	SnapshotWALBytes int
	// Retention: a terminal execution last updated longer ago than this
	// drops its params, context, saved steps and the record of the children
	// it started; its ID, workflow, status, outcome, parent link, timestamps
	// and delivery count (Attempts) stay, so the ID is still never reused,
	// Get and Await still answer, and a parent still awaits a retired child.
	// Zero (the default) keeps everything forever, and keeps no index for
	// retirement. Retirement is a logged command stamped with the store's
	// time: before every batch it takes, the writer retires all that is due
	// at the batch's time, so a write that follows a retention's deadline
	// answers after the retirement; while no request comes, it checks every
	// RetentionCheck.
	Retention time.Duration
	// RetentionCheck is how often, in the clock's time, the writer checks
	// whether a terminal execution has passed the retention while no
	// request comes: a timer of the Clock's. Default 1 second; Open refuses
	// a negative one (ErrInvalidArgument). Between checks, a read may still
	// see a record the retention has passed; on a Clock whose timers never
	// fire, until the next request.
	RetentionCheck time.Duration
	// Archive: retired executions leave memory for an archive on disk in
	// the directory's archive/ (a Pebble database), so that memory,
	// snapshots and restarts grow with the live set (executions not yet
	// terminal, and terminal ones within Retention), not with every
	// execution ever admitted. Everything Retention promises holds as it
	// does in memory: an archived ID still conflicts on admission, Get,
	// Await, Detail and a parent's Await of a child still answer (with
	// Record.Archived set), and Stats still counts it. Once a directory has
	// an archive, Open opens it whatever this says. Off by default; not
	// for a replicated store yet (OpenReplicated refuses it).
	Archive bool
	// ArchiveCacheBytes is the archive's block cache, outside the Go heap:
	// where its index and filter blocks stay, so that admission's check of
	// an ID reads no disk. Default 64 MiB (archive.DefaultCacheBytes).
	ArchiveCacheBytes int64
	// ForgetAfter: an archived execution last updated longer ago than this
	// is forgotten, as if it had never been admitted, and its record is
	// deleted from the archive, so that disk is bounded too. Its ID may
	// then be admitted again as a new execution, Get and Await answer
	// ErrNotFound, a parent's Await of it answers ErrNotFound, and Stats
	// no longer counts it. Forgetting is a logged command with the cutoff
	// and the counts it forgets in it, made by the writer when it checks
	// retention; the archive deletes the records once no snapshot the store
	// may recover from still holds them. Zero (the default) forgets
	// nothing. It needs Archive, and must exceed Retention (Open refuses
	// otherwise, with ErrInvalidArgument).
	ForgetAfter time.Duration

	// ScheduleGrace is how late the store may reach a schedule's occurrence
	// and still count it on time; one reached later was missed (the store was
	// down, or its clock jumped), and the schedule's catch-up policy decides
	// whether it is admitted. Default 1 minute.
	ScheduleGrace time.Duration
	// ScheduleCheck bounds how long, in the clock's time, the writer waits,
	// while a schedule exists, before it reads the clock to see whether an
	// occurrence has come. Its timer (the Clock's) is set for the next
	// occurrence, or ScheduleCheck from now if that is sooner, so an
	// occurrence is normally admitted when it comes, and this only matters
	// after the clock jumps. Before every batch it takes, the writer also
	// admits the occurrences that have come (up to 256 at once; the timer,
	// set for a time that has come, brings the writer back for the rest), so
	// a write stamped at or after an occurrence answers after its admission.
	// Default 1 second; Open
	// refuses a negative one (ErrInvalidArgument). On a Clock whose timers
	// never fire, occurrences are reached only at requests.
	ScheduleCheck time.Duration

	// FS is the filesystem the store's directory is on: every file of its
	// write-ahead log and its snapshots, and the directory's lock, are
	// created, written, synced, renamed and removed through it. Nil means
	// vfs.Default, the operating system's. Wrapped with vfs.WithFaults, it
	// shows a test each of those operations, and can fail any of them. On any
	// FS but vfs.Default the log prepares its next segment's file in the
	// writer rather than in the background (see package wal).
	FS vfs.FS
	// IDRand supplies the random bits of generated execution IDs. Nil means
	// crypto/rand. It is read in the callers' goroutines: it must be safe for
	// the concurrent calls the store gets. For tests and the crash simulator
	// only (a seeded source makes the log reproducible byte for byte); nil in
	// production.
	IDRand io.Reader

	// sizes cut the store's states into pieces (fsm.Sizes); zero: the
	// defaults. No option sets them: the crash simulator does, through
	// internal/tune (sizes.go).
	sizes fsm.Sizes
	// archiveFS holds the archive's files instead of the operating
	// system's: set by the crash simulator through internal/tune.
	archiveFS pebblevfs.FS
}

// Limits is the one place every size and count limit is defined. A zero field
// means its default. Exceeding a limit is an error that changes nothing:
// ErrInvalidExecutionEvent for an admission or child start, ErrInvalidArgument
// otherwise, and in both cases it matches ErrLimitExceeded too (the
// per-execution counts are ErrLimitExceeded alone).
//
// Every limit is checked in the caller's goroutine, before the command is
// queued, so one caller's oversized request is that caller's error alone.
// Together they bound every command's encoded size; Open refuses Limits under
// which a command could be larger than one WAL batch (Options.MaxBatchBytes)
// or entry (wal.MaxPayloadBytes) holds.
type Limits struct {
	// EventBytes bounds an admission's params and context together (the
	// lengths of params plus every context key and value). Default 1 MiB.
	EventBytes int
	// ValueBytes bounds a completed result, a step value and a key-value store
	// value. Default 1 MiB.
	ValueBytes int
	// KeyBytes bounds step keys and key-value store keys. Default 1024.
	KeyBytes int
	// ContextEntries bounds the number of context entries. Default 1024.
	ContextEntries int
	// WritesPerCommit bounds the writes of one Commit. Default 1024.
	WritesPerCommit int
	// CommitBytes bounds one Commit as a whole: the lengths of its keys and
	// values together. Default 8 MiB.
	CommitBytes int
	// KeysPerWatch bounds the keys of one Watch. Default 64.
	KeysPerWatch int
	// ClaimLimit bounds ClaimDue's limit and the acknowledgements of one
	// AcknowledgeBatch. Default 10,000.
	ClaimLimit int
	// AcknowledgeBatchBytes bounds one AcknowledgeBatch as a whole: the
	// encoded size of all its acknowledgements (IDs, results, recorded
	// errors) together. Default 64 MiB.
	AcknowledgeBatchBytes int
	// LeaseDuration bounds the lease duration of ClaimDue and Renew.
	// Default 24 hours.
	LeaseDuration time.Duration
	// RetryAfter bounds Release's retry delay. Default 365 days.
	RetryAfter time.Duration
	// ErrorMessageBytes bounds a failed outcome's recorded error message and
	// each cause's; longer messages are truncated (a failure must always be
	// recordable). Default 16 KiB.
	ErrorMessageBytes int
	// ErrorCauseDepth bounds how many wrapped causes of a failed outcome's
	// error are recorded; deeper ones are dropped. Default 8, at most 15.
	ErrorCauseDepth int

	// ListPageDefault is the page size of List and Changes when the call
	// leaves it 0. Default 100.
	ListPageDefault int
	// ListPageMax bounds the page size of List and Changes. Default 1000.
	ListPageMax int
	// CancelReasonBytes bounds the reason given to Cancel, which the
	// cancelled outcome keeps. Default 4096.
	CancelReasonBytes int

	// Schedules bounds the number of schedules. Default 10,000.
	Schedules int
	// ScheduleInterval is the shortest interval of an interval schedule.
	// Default 1 second.
	ScheduleInterval time.Duration
	// ScheduleCatchUp bounds the missed occurrences of one schedule that
	// CatchUpAll admits in a row; the rest of those missed are skipped.
	// Default 1,000.
	ScheduleCatchUp int
}

// IDBytes is the longest execution or workflow ID, in bytes. Fixed by the
// public contract.
const IDBytes = 200

// Per-execution counts. They are part of the state machine (they decide
// results, so a replay must see the same ones) and cannot be configured.
const (
	MaxStepsPerExecution   = fsm.MaxStepsPerExecution
	MaxWatchesPerExecution = fsm.MaxWatchesPerExecution
)

// DefaultLimits are the limits a zero Limits field takes.
var DefaultLimits = Limits{
	EventBytes:            1 << 20,
	ValueBytes:            1 << 20,
	KeyBytes:              1024,
	ContextEntries:        1024,
	WritesPerCommit:       1024,
	CommitBytes:           8 << 20,
	KeysPerWatch:          64,
	ClaimLimit:            10_000,
	AcknowledgeBatchBytes: 64 << 20,
	LeaseDuration:         24 * time.Hour,
	RetryAfter:            365 * 24 * time.Hour,
	ErrorMessageBytes:     16 << 10,
	ErrorCauseDepth:       8,
	ListPageDefault:       100,
	ListPageMax:           1000,
	CancelReasonBytes:     4096,

	Schedules:        10_000,
	ScheduleInterval: time.Second,
	ScheduleCatchUp:  1000,
}

// Limits returns the limits the store enforces: Options.Limits with every
// zero field at its default. A server in front of the store derives its own
// bounds from them (the HTTP server's body and page sizes), so that it never
// refuses for its size a request the store would take.
func (s *Store) Limits() Limits { return s.limits }

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	pick := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&l.EventBytes, d.EventBytes)
	pick(&l.ValueBytes, d.ValueBytes)
	pick(&l.KeyBytes, d.KeyBytes)
	pick(&l.ContextEntries, d.ContextEntries)
	pick(&l.WritesPerCommit, d.WritesPerCommit)
	pick(&l.CommitBytes, d.CommitBytes)
	pick(&l.AcknowledgeBatchBytes, d.AcknowledgeBatchBytes)
	pick(&l.KeysPerWatch, d.KeysPerWatch)
	pick(&l.ClaimLimit, d.ClaimLimit)
	pick(&l.ErrorMessageBytes, d.ErrorMessageBytes)
	pick(&l.ErrorCauseDepth, d.ErrorCauseDepth)
	pick(&l.ListPageMax, d.ListPageMax)
	pick(&l.ListPageDefault, min(d.ListPageDefault, l.ListPageMax))
	l.ListPageDefault = min(l.ListPageDefault, l.ListPageMax)
	pick(&l.CancelReasonBytes, d.CancelReasonBytes)
	if l.ErrorCauseDepth > fsm.MaxErrorDepth-1 {
		l.ErrorCauseDepth = fsm.MaxErrorDepth - 1
	}
	if l.LeaseDuration <= 0 {
		l.LeaseDuration = d.LeaseDuration
	}
	if l.RetryAfter <= 0 {
		l.RetryAfter = d.RetryAfter
	}
	pick(&l.Schedules, d.Schedules)
	pick(&l.ScheduleCatchUp, d.ScheduleCatchUp)
	if l.ScheduleInterval <= 0 {
		l.ScheduleInterval = d.ScheduleInterval
	}
	return l
}
