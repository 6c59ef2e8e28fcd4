package archive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/execstore/execstore/fsm"
)

// The key spaces (see the package's documentation). Part of the format.
const (
	spaceRecord   = 'r'
	spaceWorkflow = 'w'
	spaceTime     = 't'
	spaceIndex    = 'x'
)

// bloomBitsPerKey sizes the bloom filters: about a 1 % false-positive rate.
const bloomBitsPerKey = 10

// recordFilter is Pebble's bloom filter over the records' keys alone: only
// a record is looked up by its key (an ID's check, a read); the index
// entries are only scanned, and filtering them would make the filters, which
// the block cache must hold for the ID checks to read no disk, four times
// as large. Its filters are the bloom filter's, under its name: a table
// written before, which filters every key, reads the same. So nothing may
// look up an index entry by its key (Get, SeekPrefixGE): its filter would
// answer that it is absent.
type recordFilter struct{ bloom.FilterPolicy }

func (f recordFilter) NewWriter(ftype pebble.FilterType) pebble.FilterWriter {
	return recordFilterWriter{f.FilterPolicy.NewWriter(ftype)}
}

type recordFilterWriter struct{ pebble.FilterWriter }

func (w recordFilterWriter) AddKey(key []byte) {
	if len(key) > 0 && key[0] == spaceRecord {
		w.FilterWriter.AddKey(key)
	}
}

// DefaultCacheBytes is the block cache when Options.CacheBytes is zero: with
// Pebble's own default (8 MiB) the filter and index blocks of a large archive
// do not stay cached, and an absent ID's check reads the disk.
const DefaultCacheBytes = 64 << 20

// ErrCorrupt matches every error that reports damaged archive contents.
var ErrCorrupt = errors.New("archive: corrupt")

// ErrClosed is returned by every method of a closed archive.
var ErrClosed = errors.New("archive: closed")

// Options configure an archive.
type Options struct {
	// CacheBytes is the block cache's size (outside the Go heap);
	// DefaultCacheBytes if zero.
	CacheBytes int64
	// Logger receives the engine's errors; slog.Default() if nil.
	Logger *slog.Logger
	// FS holds the archive's files; the operating system's if nil. The
	// crash simulator gives each store an in-memory one that it clones as
	// a crash would leave it (Pebble's vfs.NewCrashableMem).
	FS vfs.FS
}

// Archive is an open archive. Put, TrimAfter and Flush are the store's
// writer's; Get, Has and List may run in any goroutine beside them.
type Archive struct {
	db    *pebble.DB
	cache *pebble.Cache

	mu     sync.RWMutex // held to read while open; Close takes it to close
	closed bool
	// wmu orders the writes that read a record before they rewrite it
	// (PutMerging, TrimAfter, Forget): the writer's and Forget's goroutine.
	wmu sync.Mutex

	key, val []byte // Put's scratch (the writer's)
}

// Open opens the archive in dir, creating it if needed.
func Open(dir string, o Options) (*Archive, error) {
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.CacheBytes < 0 {
		return nil, fmt.Errorf("archive: negative cache size %d", o.CacheBytes)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	cache := pebble.NewCache(o.CacheBytes)
	opts := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		Cache:              cache,
		DisableWAL:         true,
		FS:                 o.FS,
		Logger:             logger{o.Logger},
		// Damaged data is reported by the read that met it, as an error;
		// Pebble's default would end the process.
		EventListener: &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
			o.Logger.Error("archive: damaged data", "path", info.Path, "err", info.Details)
		}},
	}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = recordFilter{bloom.FilterPolicy(bloomBitsPerKey)}
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.ZstdCompression }
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("archive: open %s: %w", dir, err)
	}
	// Pebble syncs its own directory, not its entry in the parent: a new
	// archive's directory could vanish in a crash, with everything in it.
	if err := syncDir(fsOf(o.FS), filepath.Dir(dir)); err != nil {
		db.Close()
		cache.Unref()
		return nil, fmt.Errorf("archive: open %s: %w", dir, err)
	}
	return &Archive{db: db, cache: cache}, nil
}

// Put writes records a retire command at log index index removed from the
// state, with their index entries, in one batch. It does not sync: see Flush.
// Putting a record again (a replay) writes the same keys and values.
func (a *Archive) Put(recs []fsm.ArchivedRecord, index uint64) error {
	return a.put(recs, index, false)
}

// PutMerging is Put for a store that forgets (fsm.KindForget): an ID it
// forgot may be admitted again, and its new record is put where the older
// one still is, until Forget deletes that. The new record goes first in
// the value, the older ones after it, each with its own index entries, so
// that TrimAfter can take the new one back out.
func (a *Archive) PutMerging(recs []fsm.ArchivedRecord, index uint64) error {
	return a.put(recs, index, true)
}

func (a *Archive) put(recs []fsm.ArchivedRecord, index uint64, merge bool) error {
	if len(recs) == 0 {
		return nil
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return ErrClosed
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	b := a.db.NewBatch()
	defer b.Close()
	var sk *seeker
	if merge {
		var err error
		if sk, err = a.newSeeker(); err != nil {
			return err
		}
		defer sk.close()
	}
	for i := range recs {
		r := &recs[i]
		if r.ID == "" || r.Outcome == nil || !r.Outcome.Status.Terminal() {
			return fmt.Errorf("archive: put of an invalid record %q", r.ID)
		}
		a.val = fsm.AppendArchived(a.val[:0], &r.Retired, index)
		if merge {
			older, err := sk.incarnations(r.ID)
			if err != nil {
				return err
			}
			for _, o := range older {
				if o.index < index { // one at index is this record, put again
					a.val = append(a.val, o.raw...)
				}
			}
		}
		a.key = recordKey(a.key[:0], r.ID)
		if err := b.Set(a.key, a.val, nil); err != nil {
			return err
		}
		if err := setEntries(b, &a.key, r.ID, &r.Retired, index); err != nil {
			return err
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("archive: write: %w", err)
	}
	return nil
}

// setEntries sets a record's three index entries; key is scratch (Set
// copies the key, so one buffer serves the three). The time index entry's
// value is the record's status and workflow (timeValue), which counting
// reads without the record.
func setEntries(b *pebble.Batch, key *[]byte, id string, r *fsm.Retired, index uint64) error {
	*key = workflowKey((*key)[:0], r.WorkflowID, r.UpdatedAt, id)
	err := b.Set(*key, nil, nil)
	*key = timeKey((*key)[:0], r.UpdatedAt, id)
	err = errors.Join(err, b.Set(*key, timeValue(r), nil))
	*key = indexKey((*key)[:0], index, id)
	return errors.Join(err, b.Set(*key, nil, nil))
}

// timeValue is a time index entry's value: status:1B workflow (an archive
// written before it has empty values there, which read as unknown).
func timeValue(r *fsm.Retired) []byte {
	return append([]byte{byte(r.Outcome.Status)}, r.WorkflowID...)
}

// deleteEntries deletes a record's three index entries.
func deleteEntries(b *pebble.Batch, id string, r *fsm.Retired, index uint64) error {
	return errors.Join(
		b.Delete(workflowKey(nil, r.WorkflowID, r.UpdatedAt, id), nil),
		b.Delete(timeKey(nil, r.UpdatedAt, id), nil),
		b.Delete(indexKey(nil, index, id), nil))
}

// incarnation is one record of a value: an ID's newest record, or an older
// one of an ID forgotten and admitted again (PutMerging).
type incarnation struct {
	r     fsm.Retired
	index uint64
	raw   []byte // its encoding, a slice of the value
}

// decodeValue splits a record's value into its records, newest first.
func decodeValue(id string, v []byte) ([]incarnation, error) {
	var out []incarnation
	for len(v) > 0 {
		r, index, rest, err := fsm.DecodeArchivedNext(v)
		if err != nil {
			return nil, fmt.Errorf("%w: record %q: %v", ErrCorrupt, id, err)
		}
		out = append(out, incarnation{r: r, index: index, raw: v[:len(v)-len(rest)]})
		v = rest
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: record %q: empty value", ErrCorrupt, id)
	}
	return out, nil
}

// seeker reads records with one iterator, as Reader does (making an
// iterator costs more than a seek): for the writes that read a record before
// they rewrite it. It sees the archive as it was when it was made.
type seeker struct {
	it  *pebble.Iterator
	key []byte
}

func (a *Archive) newSeeker() (*seeker, error) {
	it, err := a.db.NewIter(&pebble.IterOptions{UseL6Filters: true})
	if err != nil {
		return nil, fmt.Errorf("archive: read: %w", err)
	}
	return &seeker{it: it}, nil
}

func (sk *seeker) close() error { return sk.it.Close() }

// incarnations returns the records the archive holds under id (none if it
// holds none), their raw bytes copied.
func (sk *seeker) incarnations(id string) ([]incarnation, error) {
	sk.key = recordKey(sk.key[:0], id)
	if !sk.it.SeekPrefixGE(sk.key) || !bytes.Equal(sk.it.Key(), sk.key) {
		if err := sk.it.Error(); err != nil {
			return nil, fmt.Errorf("archive: read %q: %w", id, err)
		}
		return nil, nil
	}
	v, err := sk.it.ValueAndErr()
	if err != nil {
		return nil, fmt.Errorf("archive: read %q: %w", id, err)
	}
	return decodeValue(id, bytes.Clone(v))
}

// incarnations is seeker.incarnations with an iterator of its own.
func (a *Archive) incarnations(id string) ([]incarnation, error) {
	sk, err := a.newSeeker()
	if err != nil {
		return nil, err
	}
	recs, err := sk.incarnations(id)
	return recs, errors.Join(err, sk.close())
}

// keepOnly rewrites id's value to the records keep accepts, deleting the
// index entries of the others (the whole value if it accepts none), and
// returns the records it dropped.
func (a *Archive) keepOnly(b *pebble.Batch, sk *seeker, id string, keep func(*incarnation) bool) ([]incarnation, error) {
	recs, err := sk.incarnations(id)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	var val []byte
	var dropped []incarnation
	for i := range recs {
		if keep(&recs[i]) {
			val = append(val, recs[i].raw...)
			continue
		}
		dropped = append(dropped, recs[i])
		if err := deleteEntries(b, id, &recs[i].r, recs[i].index); err != nil {
			return nil, err
		}
	}
	switch {
	case len(dropped) == 0:
		return nil, nil
	case len(val) == 0:
		err = b.Delete(recordKey(nil, id), nil)
	default:
		err = b.Set(recordKey(nil, id), val, nil)
	}
	return dropped, err
}

// Flush makes every record put so far durable: Pebble writes its memtables
// to synced tables (its own log is off).
func (a *Archive) Flush() error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return ErrClosed
	}
	if err := a.db.Flush(); err != nil {
		return fmt.Errorf("archive: flush: %w", err)
	}
	return nil
}

// TrimAfter removes every record retired by a command after log index
// index, and returns how many it removed: what a replay from a snapshot at
// index retires again. An older record of the same ID (PutMerging) stays.
func (a *Archive) TrimAfter(index uint64) (int, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return 0, ErrClosed
	}
	if index == ^uint64(0) {
		return 0, nil
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	lower := indexKey(nil, index+1, "")
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{spaceIndex + 1}})
	if err != nil {
		return 0, err
	}
	sk, err := a.newSeeker() // one batch, committed at the end: what it reads stays current
	if err != nil {
		it.Close()
		return 0, err
	}
	defer sk.close()
	b := a.db.NewBatch()
	defer b.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) <= 9 {
			it.Close()
			return 0, fmt.Errorf("%w: retire index key of %d bytes", ErrCorrupt, len(k))
		}
		// Each entry of the ID's records after index computes the same
		// value from the one committed: repeated, the writes agree.
		if _, err := a.keepOnly(b, sk, string(k[9:]), func(r *incarnation) bool { return r.index <= index }); err != nil {
			it.Close()
			return 0, err
		}
		if err := b.Delete(bytes.Clone(k), nil); err != nil {
			it.Close()
			return 0, err
		}
		n++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, fmt.Errorf("archive: trim: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return 0, fmt.Errorf("archive: trim: %w", err)
	}
	return n, nil
}

// CountUpdated counts the records last updated from from up to before to,
// by workflow and status, in the order fsm.KindForget wants them: what a
// forget command with cutoff to forgets when from is the store's cutoff.
// It stops early, at a time boundary, once counting the next time's records
// would exceed maxPairs workflow and status pairs or maxScan records; then
// it returns the counts of the records updated before the returned cutoff,
// which is less than to (from, if even the first time's records exceed
// them: nothing is counted).
func (a *Archive) CountUpdated(from, to int64, maxPairs, maxScan int) (counts []fsm.ForgetCount, before int64, err error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return nil, 0, ErrClosed
	}
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: timeKey(nil, from, ""), UpperBound: timeKey(nil, to, "")})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	type pair struct {
		workflow string
		status   fsm.Status
	}
	var sk *seeker          // made if an entry lacks its value
	done := map[pair]int{}  // counted, through the time before at
	group := map[pair]int{} // the records of time at
	at, scanned := from, 0
	merge := func() bool {
		n := len(done)
		for p := range group {
			if _, ok := done[p]; !ok {
				n++
			}
		}
		if n > maxPairs || (scanned > maxScan && len(done) > 0) {
			return false
		}
		for p, k := range group {
			done[p] += k
		}
		clear(group)
		return true
	}
	result := func(before int64) ([]fsm.ForgetCount, int64, error) {
		for p, n := range done {
			counts = append(counts, fsm.ForgetCount{WorkflowID: p.workflow, Status: p.status, N: n})
		}
		slices.SortFunc(counts, func(x, y fsm.ForgetCount) int {
			if c := strings.Compare(x.WorkflowID, y.WorkflowID); c != 0 {
				return c
			}
			return int(x.Status) - int(y.Status)
		})
		return counts, before, nil
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) <= 9 {
			return nil, 0, fmt.Errorf("%w: time index key of %d bytes", ErrCorrupt, len(k))
		}
		t := int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63))
		if t != at {
			if !merge() {
				return result(at)
			}
			at = t
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, 0, fmt.Errorf("archive: count: %w", err)
		}
		var p pair
		if len(v) > 1 {
			p = pair{string(v[1:]), fsm.Status(v[0])}
		} else { // an entry written before its value held these: read the record
			id := string(k[9:])
			if sk == nil {
				if sk, err = a.newSeeker(); err != nil {
					return nil, 0, err
				}
				defer sk.close()
			}
			recs, err := sk.incarnations(id)
			if err != nil {
				return nil, 0, err
			}
			i := slices.IndexFunc(recs, func(r incarnation) bool { return r.r.UpdatedAt == t })
			if i < 0 {
				return nil, 0, fmt.Errorf("%w: index entry for %q, which has no record", ErrCorrupt, id)
			}
			p = pair{recs[i].r.WorkflowID, recs[i].r.Outcome.Status}
		}
		if !p.status.Terminal() {
			return nil, 0, fmt.Errorf("%w: time index entry of %q with status %d", ErrCorrupt, k[9:], p.status)
		}
		group[p]++
		scanned++
	}
	if err := it.Error(); err != nil {
		return nil, 0, fmt.Errorf("archive: count: %w", err)
	}
	if !merge() {
		return result(at)
	}
	return result(to)
}

// FirstUpdated returns the last-update time of the record with the earliest
// one at or after from, if the archive holds any: nothing before it can be
// forgotten by a cutoff up to it.
func (a *Archive) FirstUpdated(from int64) (at int64, ok bool, err error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return 0, false, ErrClosed
	}
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: timeKey(nil, from, ""), UpperBound: []byte{spaceTime + 1}})
	if err != nil {
		return 0, false, err
	}
	if it.First() {
		if k := it.Key(); len(k) > 9 {
			at, ok = int64(binary.BigEndian.Uint64(k[1:9])^(1<<63)), true
		} else {
			err = fmt.Errorf("%w: time index key of %d bytes", ErrCorrupt, len(k))
		}
	}
	return at, ok, errors.Join(err, it.Error(), it.Close())
}

// forgetChunk is how many index entries Forget handles per batch, holding
// the writer's Puts off for that long at most.
const forgetChunk = 1024

// Forget deletes every record last updated before the cutoff, with its
// index entries, and returns how many it deleted: the records of the
// executions a store forgot (fsm.KindForget), once no snapshot the store
// may recover from still holds them as archived. It does not sync: a
// deletion lost in a crash is made again by the next Forget.
func (a *Archive) Forget(before int64) (int, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return 0, ErrClosed
	}
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: []byte{spaceTime}, UpperBound: timeKey(nil, before, "")})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	ok := it.First()
	for ok {
		a.wmu.Lock()
		b := a.db.NewBatch()
		var sk *seeker
		sk, err = a.newSeeker() // after the chunks before: it reads what they wrote
		for i := 0; err == nil && ok && i < forgetChunk; i, ok = i+1, it.Next() {
			k := it.Key()
			if len(k) <= 9 {
				err = fmt.Errorf("%w: time index key of %d bytes", ErrCorrupt, len(k))
				break
			}
			// Each entry is of one record updated before the cutoff: an
			// ID's two records forgotten together are found by two
			// entries, the second finding its record gone already.
			if _, err = a.keepOnly(b, sk, string(k[9:]), func(r *incarnation) bool { return r.r.UpdatedAt >= before }); err != nil {
				break
			}
			n++
		}
		if sk != nil {
			err = errors.Join(err, sk.close())
		}
		if err == nil {
			err = b.Commit(pebble.NoSync)
		}
		b.Close()
		a.wmu.Unlock()
		if err != nil {
			return n, fmt.Errorf("archive: forget: %w", err)
		}
	}
	if err := it.Error(); err != nil {
		return n, fmt.Errorf("archive: forget: %w", err)
	}
	return n, nil
}

// Get returns the record archived under id and the log index of the retire
// command that archived it.
func (a *Archive) Get(id string) (r fsm.Retired, index uint64, found bool, err error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return fsm.Retired{}, 0, false, ErrClosed
	}
	return a.get(id)
}

func (a *Archive) get(id string) (fsm.Retired, uint64, bool, error) {
	if !a.has(id) {
		return fsm.Retired{}, 0, false, nil
	}
	v, closer, err := a.db.Get(recordKey(nil, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return fsm.Retired{}, 0, false, nil
	}
	if err != nil {
		return fsm.Retired{}, 0, false, fmt.Errorf("archive: read %q: %w", id, err)
	}
	defer closer.Close()
	r, index, _, err := fsm.DecodeArchivedNext(v) // the newest; older ones are forgotten
	if err != nil {
		return fsm.Retired{}, 0, false, fmt.Errorf("%w: record %q: %v", ErrCorrupt, id, err)
	}
	return r, index, true, nil
}

// has reports whether id may be archived, from the bloom filters of every
// level (Pebble's Get skips those of the last level, where most of an
// archive lives): an absent ID, admission's usual case, reads no data block.
// A false positive goes on to Get.
func (a *Archive) has(id string) bool {
	it, err := a.db.NewIter(&pebble.IterOptions{UseL6Filters: true})
	if err != nil {
		return true // let Get find out
	}
	key := recordKey(nil, id)
	found := it.SeekPrefixGE(key) && bytes.Equal(it.Key(), key)
	if err := it.Close(); err != nil {
		return true
	}
	return found
}

// Reader answers Has and Get with one iterator, kept open from call to call:
// making a Pebble iterator costs more than the bloom filters' answer for an
// absent ID, admission's usual case. It sees the archive as it was at its
// first read after it was made or Closed: Close it after each Put (it stays
// usable). One goroutine's.
type Reader struct {
	a   *Archive
	it  *pebble.Iterator
	key []byte
}

// NewReader returns a Reader of the archive; Close it when done.
func (a *Archive) NewReader() *Reader { return &Reader{a: a} }

// Close releases the reader's iterator (and what it pins of the archive);
// the reader stays usable.
func (r *Reader) Close() {
	if r.it != nil {
		r.it.Close()
		r.it = nil
	}
}

// Get is Archive.Get through the reader's iterator.
func (r *Reader) Get(id string) (fsm.Retired, uint64, bool, error) {
	a := r.a
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		r.it = nil // closed with the database
		return fsm.Retired{}, 0, false, ErrClosed
	}
	if r.it == nil {
		it, err := a.db.NewIter(&pebble.IterOptions{UseL6Filters: true})
		if err != nil {
			return fsm.Retired{}, 0, false, fmt.Errorf("archive: read: %w", err)
		}
		r.it = it
	}
	key := recordKey(r.key[:0], id)
	r.key = key
	if !r.it.SeekPrefixGE(key) || !bytes.Equal(r.it.Key(), key) {
		if err := r.it.Error(); err != nil {
			r.Close()
			return fsm.Retired{}, 0, false, fmt.Errorf("archive: read %q: %w", id, err)
		}
		return fsm.Retired{}, 0, false, nil
	}
	v, err := r.it.ValueAndErr()
	if err != nil {
		r.Close()
		return fsm.Retired{}, 0, false, fmt.Errorf("archive: read %q: %w", id, err)
	}
	rec, index, _, err := fsm.DecodeArchivedNext(v) // the newest; older ones are forgotten
	if err != nil {
		return fsm.Retired{}, 0, false, fmt.Errorf("%w: record %q: %v", ErrCorrupt, id, err)
	}
	return rec, index, true, nil
}

// Query selects a page of a listing: records with From <= UpdatedAt < To
// (unix nanoseconds), of one workflow or of all with WorkflowID empty, after
// the cursor (the previous page's last record) if there is one, at most
// Limit of them, in (UpdatedAt, ID) order.
type Query struct {
	WorkflowID     string
	From, To       int64
	AfterUpdatedAt int64
	AfterID        string // empty: from the start
	Limit          int
	// Keep, if set, filters the records: those it refuses are examined but
	// not listed. ScanMax, if positive, bounds the records one page
	// examines: a page that reaches it ends early, and more is true.
	Keep    func(*Entry) bool
	ScanMax int
}

// Entry is a listed record.
type Entry struct {
	ID string
	fsm.Retired
}

// Scan returns a page of the listing q selects, whether more follow, and
// the last record it examined, after which the next page starts (with Keep,
// it may not be listed).
func (a *Archive) Scan(q Query) (out []Entry, more bool, last Entry, err error) {
	if q.Limit < 1 {
		return nil, false, Entry{}, fmt.Errorf("archive: list limit %d", q.Limit)
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return nil, false, Entry{}, ErrClosed
	}
	key := func(at int64, id string) []byte {
		if q.WorkflowID == "" {
			return timeKey(nil, at, id)
		}
		return workflowKey(nil, q.WorkflowID, at, id)
	}
	prefix := len(key(0, ""))
	lower := key(q.From, "")
	if q.AfterID != "" {
		if after := append(key(q.AfterUpdatedAt, q.AfterID), 0); bytes.Compare(after, lower) > 0 {
			lower = after
		}
	}
	it, err := a.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: key(q.To, "")})
	if err != nil {
		return nil, false, Entry{}, err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	scanned := 0
	for ok := it.First(); ok; ok = it.Next() {
		if len(out) == q.Limit || (q.ScanMax > 0 && scanned == q.ScanMax) {
			return out, true, last, nil
		}
		k := it.Key()
		if len(k) <= prefix {
			return nil, false, Entry{}, fmt.Errorf("%w: index key of %d bytes", ErrCorrupt, len(k))
		}
		id := string(k[prefix:])
		at := int64(binary.BigEndian.Uint64(k[prefix-8:prefix]) ^ (1 << 63))
		recs, err := a.incarnations(id)
		if err != nil {
			return nil, false, Entry{}, err
		}
		i := slices.IndexFunc(recs, func(r incarnation) bool {
			return r.r.UpdatedAt == at && (q.WorkflowID == "" || r.r.WorkflowID == q.WorkflowID)
		})
		if i < 0 {
			return nil, false, Entry{}, fmt.Errorf("%w: index entry for %q, which has no record", ErrCorrupt, id)
		}
		scanned++
		last = Entry{ID: id, Retired: recs[i].r}
		if q.Keep == nil || q.Keep(&last) {
			out = append(out, last)
		}
	}
	return out, false, last, it.Error()
}

// Stats describes an archive's files.
type Stats struct {
	DiskBytes uint64 // every file of the engine: tables, manifest and the rest
	Tables    int64  // tables on disk, every level
}

// Stats returns the archive's figures.
func (a *Archive) Stats() (Stats, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return Stats{}, ErrClosed
	}
	m := a.db.Metrics()
	return Stats{DiskBytes: m.DiskSpaceUsage(), Tables: m.Total().TablesCount}, nil
}

// Check reads every record and index entry, and reports the first that is
// damaged or that disagrees with another: the records' values decode, each
// index entry has its record, and each record has its three entries.
// It returns how many records it holds that were last updated at or after
// forgotBefore (the store's forget cutoff: those it has not forgotten).
func (a *Archive) Check(forgotBefore int64) (live int, err error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return 0, ErrClosed
	}
	it, err := a.db.NewIter(nil)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	ix, err := a.db.NewIter(nil) // the index entries', sought from the records
	if err != nil {
		return 0, err
	}
	defer ix.Close()
	records, entries := 0, 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		switch k[0] {
		case spaceRecord:
			v, err := it.ValueAndErr()
			if err != nil {
				return live, fmt.Errorf("archive: check: %w", err)
			}
			id := string(k[1:])
			recs, err := decodeValue(id, v)
			if err != nil {
				return live, err
			}
			for i, r := range recs {
				if i > 0 && (r.index >= recs[i-1].index || r.r.UpdatedAt >= recs[i-1].r.UpdatedAt) {
					return live, fmt.Errorf("%w: record %q: its older records out of order", ErrCorrupt, id)
				}
				for _, key := range [][]byte{workflowKey(nil, r.r.WorkflowID, r.r.UpdatedAt, id), timeKey(nil, r.r.UpdatedAt, id), indexKey(nil, r.index, id)} {
					// A seek, not a Get: the filters hold the records' keys alone.
					if !ix.SeekGE(key) || !bytes.Equal(ix.Key(), key) {
						return live, errors.Join(fmt.Errorf("%w: record %q lacks an index entry", ErrCorrupt, id), ix.Error())
					}
					v, err := ix.ValueAndErr()
					if err != nil {
						return live, fmt.Errorf("archive: check: %w", err)
					}
					if key[0] == spaceTime && len(v) > 0 && !bytes.Equal(v, timeValue(&r.r)) {
						return live, fmt.Errorf("%w: record %q: its time index entry names another status or workflow", ErrCorrupt, id)
					}
				}
				if r.r.UpdatedAt >= forgotBefore {
					live++
				}
				records++
			}
		case spaceWorkflow, spaceTime, spaceIndex:
			entries++
		default:
			return live, fmt.Errorf("%w: key in an unknown space %q", ErrCorrupt, k[0])
		}
	}
	if err := it.Error(); err != nil {
		return live, fmt.Errorf("archive: check: %w", err)
	}
	if entries != 3*records {
		return live, fmt.Errorf("%w: %d index entries for %d records", ErrCorrupt, entries, records)
	}
	return live, nil
}

// Close closes the archive; closing it again does nothing. What was put and
// not flushed is lost (the store's log holds it).
func (a *Archive) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	err := a.db.Close()
	a.cache.Unref()
	return err
}

func recordKey(dst []byte, id string) []byte { return append(append(dst, spaceRecord), id...) }

func appendTime(dst []byte, nanos int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(nanos)^(1<<63))
}

func workflowKey(dst []byte, workflow string, at int64, id string) []byte {
	dst = binary.AppendUvarint(append(dst, spaceWorkflow), uint64(len(workflow)))
	return append(appendTime(append(dst, workflow...), at), id...)
}

func timeKey(dst []byte, at int64, id string) []byte {
	return append(appendTime(append(dst, spaceTime), at), id...)
}

func indexKey(dst []byte, index uint64, id string) []byte {
	return append(binary.BigEndian.AppendUint64(append(dst, spaceIndex), index), id...)
}

// logger passes Pebble's errors to slog and drops its informational lines.
type logger struct{ l *slog.Logger }

func (logger) Infof(string, ...any) {}
func (l logger) Errorf(format string, args ...any) {
	l.l.Error("archive: " + fmt.Sprintf(format, args...))
}
func (l logger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("archive: "+format, args...))
}

func fsOf(fs vfs.FS) vfs.FS {
	if fs == nil {
		return vfs.Default
	}
	return fs
}

// syncDir makes the entries of a directory durable.
func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
