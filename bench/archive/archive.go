package archive

import "fmt"

// Archive is what the store's writer and its reads need of an archive of
// retired executions. An implementation is used by one writer at a time;
// reads may run beside it.
type Archive interface {
	// Put writes the records and their index entries as one batch, and
	// syncs it: when Put returns nil every record survives a crash, and
	// when it fails none or all of them do. Each ID is new to the archive
	// (the state machine archives an execution once).
	Put(recs []Record) error
	// Get returns the record archived under id, and false if there is none.
	Get(id string) (Record, bool, error)
	// Has reports whether id is archived, without decoding its record:
	// admission's precheck, whose answer is almost always false.
	Has(id string) (bool, error)
	// List returns up to q.Limit records in (updatedAt, ID) order, from
	// the index q names.
	List(q Query) ([]Record, error)
	// Settle does what the engine does on its own given time, now: Pebble
	// flushes its memtable and compacts every level; bbolt has nothing to do.
	Settle() error
	// Busy reports whether the engine is working in the background:
	// Pebble's flushes and compactions; bbolt never is.
	Busy() bool
	// Close closes the archive; closing it again does nothing.
	Close() error
}

// Query is a page of a listing: records with q.FromNanos <= updatedAt <
// q.ToNanos, of one workflow (or of all with WorkflowID empty), after the
// cursor if there is one.
type Query struct {
	WorkflowID string
	FromNanos  int64
	ToNanos    int64
	After      *Cursor // the last record of the previous page
	Limit      int
}

// Cursor is where a page ended: its last record's updatedAt and ID.
type Cursor struct {
	UpdatedAtNanos int64
	ID             string
}

// CursorOf is the cursor after r.
func CursorOf(r Record) *Cursor { return &Cursor{UpdatedAtNanos: r.UpdatedAtNanos, ID: r.ID} }

// bounds returns the query's index key range [lower, upper) and the length
// of its keys' prefix before the ID.
func (q Query) bounds() (lower, upper []byte, prefixBytes int) {
	key := func(at int64, id string) []byte {
		if q.WorkflowID == "" {
			return appendTimeKey(nil, at, id)
		}
		return appendWorkflowKey(nil, q.WorkflowID, at, id)
	}
	lower = key(q.FromNanos, "")
	if q.After != nil {
		if after := append(key(q.After.UpdatedAtNanos, q.After.ID), 0); string(after) > string(lower) {
			lower = after // the least key greater than the cursor's
		}
	}
	upper = key(q.ToNanos, "")
	prefixBytes = 8
	if q.WorkflowID != "" {
		prefixBytes = workflowPrefixBytes(q.WorkflowID)
	}
	return lower, upper, prefixBytes
}

// Engine opens an archive in a directory of its own.
type Engine struct {
	Name string
	Open func(dir string) (Archive, error)
}

// Engines are the contenders, in the order the evaluation interleaves them:
// Pebble with its default 8 MiB block cache and with 64 MiB, bbolt with
// the operating system's page cache (its file is mapped into memory).
var Engines = []Engine{
	{"pebble-zstd", func(dir string) (Archive, error) { return OpenPebble(dir, PebbleOptions{Compression: CompressionZstd}) }},
	{"pebble-snappy", func(dir string) (Archive, error) {
		return OpenPebble(dir, PebbleOptions{Compression: CompressionSnappy})
	}},
	{"pebble-zstd-64m", func(dir string) (Archive, error) {
		return OpenPebble(dir, PebbleOptions{Compression: CompressionZstd, CacheBytes: 64 << 20})
	}},
	{"bbolt", OpenBolt},
}

// EngineNamed returns the engine called name.
func EngineNamed(name string) (Engine, error) {
	for _, e := range Engines {
		if e.Name == name {
			return e, nil
		}
	}
	return Engine{}, fmt.Errorf("archive: no engine %q", name)
}
