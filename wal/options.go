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
// on its own after a write: this package issues that fsync so that NoSync controls it.
// AllowEmpty lets TruncateFront empty the log. Padded reads the zeros after the tail
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
