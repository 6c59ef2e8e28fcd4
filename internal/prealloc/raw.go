package prealloc

import (
	tidwall "github.com/execstore/execstore/internal/tidwall/wal"
	"github.com/execstore/execstore/vfs"
)

// RawLog is tidwall/wal alone, written as the store's log writes it (segments over files
// prepared here, synced with fdatasync) but without its framing, checks or hooks: the floor
// the benchmarks compare the store's write path with.
type RawLog struct {
	*tidwall.Log
	pre     *Preparer
	segment int
}

// OpenRaw opens a new raw log in dir, an empty directory. Its first segment is prepared
// before it returns, as a log that has run for a while has its tail segment prepared.
func OpenRaw(dir string, segmentSize int) (*RawLog, error) {
	size := segmentSize + Slack(segmentSize)
	first := New(vfs.Default, dir, size, true, nil)
	first.Request()
	r := &RawLog{pre: New(vfs.Default, dir, size, false, nil), segment: segmentSize}
	newSegment := func(path string) (vfs.File, error) {
		take := r.pre.Take
		if first != nil {
			take = first.Take
			defer func() { first.Close(); first = nil }()
		}
		f, _, err := take(path)
		return f, err
	}
	tw, err := tidwall.Open(dir, &tidwall.Options{NoSync: true, SegmentSize: segmentSize,
		LogFormat: tidwall.Binary, AllowEmpty: true, SegmentCacheSize: 2,
		Padded: true, NewSegment: newSegment})
	if err != nil {
		first.Close()
		r.pre.Close()
		return nil, err
	}
	r.Log = tw
	return r, nil
}

// WriteSync writes the batch and syncs it, then asks for the next segment's file once the
// tail holds a quarter of a segment, as the store's log does.
func (r *RawLog) WriteSync(b *tidwall.Batch) error {
	if err := r.WriteBatch(b); err != nil {
		return err
	}
	if err := r.Sync(); err != nil {
		return err
	}
	if tail, err := r.TailSize(); err == nil && tail >= r.segment/4 {
		r.pre.Request()
	}
	return nil
}

// Close closes the log and removes a prepared file.
func (r *RawLog) Close() error {
	err := r.Log.Close()
	r.pre.Close()
	return err
}
