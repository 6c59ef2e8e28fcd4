package archive

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// Compression is Pebble's block compression for every level.
type Compression int

// The block compressions measured.
const (
	CompressionZstd Compression = iota
	CompressionSnappy
)

// The key spaces of the one Pebble keyspace: a record, and its two index
// entries. Part of the archive's format.
const (
	pebbleRecord   = 'r'
	pebbleWorkflow = 'w'
	pebbleTime     = 't'
)

// bloomBitsPerKey is the bloom filter's size: 10 bits a key, about a 1 %
// false-positive rate, on every level (L0 has none by default).
const bloomBitsPerKey = 10

type pebbleArchive struct {
	db     *pebble.DB
	closed bool
}

// PebbleOptions are the settings the evaluation varies.
type PebbleOptions struct {
	Compression Compression
	CacheBytes  int64 // the block cache; Pebble's default (8 MiB) if zero
}

// OpenPebble opens (or creates) a Pebble archive in dir: Pebble's defaults
// but bloom filters on every level, the given block compression and cache.
func OpenPebble(dir string, o PebbleOptions) (Archive, error) {
	profile := sstable.ZstdCompression
	if o.Compression == CompressionSnappy {
		profile = sstable.SnappyCompression
	}
	opts := &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: quietLogger{}, CacheSize: o.CacheBytes}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return profile }
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("archive: open pebble: %w", err)
	}
	return &pebbleArchive{db: db}, nil
}

func (a *pebbleArchive) Put(recs []Record) error {
	b := a.db.NewBatch()
	defer b.Close()
	var key, val, wf, tk []byte // Set copies, so each is reused
	for i := range recs {
		r := &recs[i]
		var err error
		if val, err = appendValue(val[:0], r); err != nil {
			return err
		}
		key = append(append(key[:0], pebbleRecord), r.ID...)
		wf = appendWorkflowKey(append(wf[:0], pebbleWorkflow), r.WorkflowID, r.UpdatedAtNanos, r.ID)
		tk = appendTimeKey(append(tk[:0], pebbleTime), r.UpdatedAtNanos, r.ID)
		if err := errors.Join(b.Set(key, val, nil), b.Set(wf, nil, nil), b.Set(tk, nil, nil)); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("archive: pebble commit: %w", err)
	}
	return nil
}

func pebbleRecordKey(id string) []byte { return append([]byte{pebbleRecord}, id...) }

func (a *pebbleArchive) Get(id string) (Record, bool, error) {
	v, closer, err := a.db.Get(pebbleRecordKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("archive: pebble get %q: %w", id, err)
	}
	defer closer.Close()
	r, err := decodeValue(id, v)
	return r, err == nil, err
}

// Has seeks an iterator that reads bloom filters on every level: Get skips
// the filters of L6, where most of an archive lives, and so reads (and
// decompresses) a data block for each absent ID.
func (a *pebbleArchive) Has(id string) (bool, error) {
	it, err := a.db.NewIter(&pebble.IterOptions{UseL6Filters: true})
	if err != nil {
		return false, err
	}
	key := pebbleRecordKey(id)
	found := it.SeekPrefixGE(key) && string(it.Key()) == string(key)
	if err := it.Close(); err != nil {
		return false, fmt.Errorf("archive: pebble has %q: %w", id, err)
	}
	return found, nil
}

// List walks the index with one iterator and reads the records with a
// second, seeking to each ID: a page's IDs are close together (admitted
// about when they ended), so each seek starts near the last.
func (a *pebbleArchive) List(q Query) (out []Record, err error) {
	lower, upper, prefixBytes := q.bounds()
	space := byte(pebbleTime)
	if q.WorkflowID != "" {
		space = pebbleWorkflow
	}
	idx, err := a.db.NewIter(&pebble.IterOptions{
		LowerBound: append([]byte{space}, lower...),
		UpperBound: append([]byte{space}, upper...),
	})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, idx.Close()) }()
	recs, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{pebbleRecord}, UpperBound: []byte{pebbleRecord + 1}})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, recs.Close()) }()
	var key []byte
	for ok := idx.First(); ok && len(out) < q.Limit; ok = idx.Next() {
		id, err := indexID(idx.Key(), 1+prefixBytes)
		if err != nil {
			return nil, err
		}
		key = append(append(key[:0], pebbleRecord), id...)
		if !recs.SeekGE(key) || string(recs.Key()) != string(key) {
			return nil, errors.Join(recs.Error(), fmt.Errorf("%w: index entry for %q, which has no record", ErrCorrupt, id))
		}
		v, err := recs.ValueAndErr()
		if err != nil {
			return nil, err
		}
		r, err := decodeValue(id, v)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, idx.Error()
}

func (a *pebbleArchive) Settle() error {
	if err := a.db.Flush(); err != nil {
		return err
	}
	return a.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true)
}

func (a *pebbleArchive) Busy() bool {
	m := a.db.Metrics()
	return m.Flush.NumInProgress > 0 || m.Compact.NumInProgress > 0
}

func (a *pebbleArchive) Close() error {
	if a.closed {
		return nil
	}
	a.closed = true
	return a.db.Close()
}

// quietLogger drops Pebble's informational messages and keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}
