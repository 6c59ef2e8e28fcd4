package wal

import (
	"errors"
	"log/slog"

	tidwall "github.com/execstore/execstore/internal/tidwall/wal"
	"github.com/execstore/execstore/vfs"
)

// DefaultSegmentSize is the segment size used when Options.SegmentSize is zero (16 MiB).
const DefaultSegmentSize = 16 << 20

// Options configures Open. The zero value is the production configuration.
type Options struct {
	// NoSync skips every fsync this package issues: the segment file after a Write, the
	// directory after a segment is created, removed or truncated, and the side file of a torn
	// tail; and Open does not rewrite the last segment after an unclean stop. An explicit Sync
	// still syncs. tidwall/wal itself still fsyncs a segment it closes and the temporary file
	// of a truncation inside a segment. Default false.
	//
	// With NoSync an operating-system crash may lose any suffix of the page cache in any
	// order, so Open may later refuse the log as corrupt; use it for tests and benchmarks.
	NoSync bool

	// SegmentSize is the size in bytes at which the tail segment is closed and a new one
	// started; a segment can exceed it by up to one batch. Default DefaultSegmentSize (16 MiB).
	SegmentSize int

	// Logger receives the torn-tail repair report and fail-stop errors. Default: discard.
	Logger *slog.Logger

	// FS holds the log's files: every file the log creates, opens, writes, syncs, renames or
	// removes is the FS's. Default vfs.Default, the operating system's. On any other FS the
	// next segment's file is prepared in the goroutine of the Write that asks for it, not in
	// the background (see "Preallocated segments" in the package documentation).
	FS vfs.FS

	// Faults injects storage errors for tests and the crash simulator. Default nil (none).
	Faults *Faults
}

// Faults lets tests and the crash simulator inject storage errors. Each func, when non-nil, is
// called before the corresponding operation; a non-nil return makes that operation fail with
// it. BeforeWrite precedes every write this package makes to the log directory: a Write's
// append, each segment file CompactTo (or TruncateFront at a segment start) removes, a
// TruncateFront inside a segment, each segment file TruncateBack or Reset removes, their cut
// of a segment and Reset's rename of the tail, the side file and truncation of a torn-tail
// repair in Open, and the rewrite of the last segment in Open. BeforeSync precedes every
// fsync this package issues (file or directory), not the ones tidwall/wal issues on its own.
//
// AfterSync follows every fsync this package issues that succeeded, with the path of the file
// or directory synced: the tail segment after a Write or Sync, the log directory, a torn-tail
// side file, a repaired segment, a segment TruncateBack or Reset cut, the temporary copy of
// the last segment that Open rewrites. Its bytes are durable by then. A non-nil return makes
// the operation fail with it as if the fsync had failed (a Write, Sync, CompactTo,
// TruncateFront, TruncateBack or Reset fail-stops the Log; Open returns
// the error). The crash simulator uses it to learn what is durable at each fsync, and to stop
// the log right after one: what was synced is on disk, but the caller never hears so.
//
// CompactTo calls them from its own goroutine, without the Log's lock, while a Write may be
// calling them from another: they must be safe for concurrent use when both run.
//
// The preparation of the next segment's file (see "Preallocated segments" in the package
// documentation) calls none of them: that file holds none of the log's data, a failure to
// write it only costs speed, and Open removes one a crash left.
type Faults struct {
	BeforeWrite func() error
	BeforeSync  func() error
	AfterSync   func(path string) error

	// PrepareInline makes the log prepare its next segment's file in the goroutine that
	// writes, right after the Write that asks for it, instead of on a goroutine of its own,
	// so that what the log directory holds after each Write does not depend on timing, as
	// the crash simulator needs. Any FS but vfs.Default does that too.
	PrepareInline bool
}

func (f *Faults) beforeWrite() error {
	if f == nil || f.BeforeWrite == nil {
		return nil
	}
	return f.BeforeWrite()
}

func (f *Faults) beforeSync() error {
	if f == nil || f.BeforeSync == nil {
		return nil
	}
	return f.BeforeSync()
}

func (f *Faults) afterSync(path string) error {
	if f == nil || f.AfterSync == nil {
		return nil
	}
	return f.AfterSync(path)
}

// withDefaults fills the zero fields and rejects impossible values.
func (o Options) withDefaults() (Options, error) {
	if o.SegmentSize < 0 {
		return o, errors.New("wal: negative SegmentSize")
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	return o, nil
}

// tidwallOptions are the options every tidwall.Open in this package uses. tidwall never syncs
// on its own after a write: this package issues that fsync so that NoSync and Faults control
// it. AllowEmpty lets TruncateFront empty the log. Padded reads the zeros after the tail
// segment's entries as padding; newSegment, when not nil, creates each new segment's file
// (the preallocator's take). Its files are the log's FS's.
func tidwallOptions(o Options, newSegment func(path string) (vfs.File, error)) *tidwall.Options {
	return &tidwall.Options{
		NoSync:           true,
		SegmentSize:      o.SegmentSize,
		LogFormat:        tidwall.Binary,
		SegmentCacheSize: 2,
		AllowEmpty:       true,
		DirPerms:         0o750,
		FilePerms:        0o640,
		Padded:           true,
		NewSegment:       newSegment,
		FS:               o.FS,
	}
}
