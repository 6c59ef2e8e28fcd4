package execstore

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/execstore/execstore/archive"
	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/mutant"
)

// The archive (Options.Archive; package archive, docs/design/archive.md):
// retired executions leave the state for an archive on disk in dir/archive.
// The writer writes each retire command's records there before it applies
// the next command; reads that do not find an execution in the state look
// there; a snapshot is written only after the archive is flushed through
// its index; at open, the archive forgets what it holds of retirements
// after the snapshot the log is replayed from, which replays them again.

// archiveDir is where a store keeps its archive.
func archiveDir(dir string) string { return filepath.Join(dir, "archive") }

// storeArchive is a store's open archive and the state machine's view of it.
type storeArchive struct {
	a   *archive.Archive
	err atomic.Pointer[error] // the first error of a read the state machine made

	// r serves the state machine's reads (the writer's, and CheckInvariants'
	// under the store's lock), refreshed after each write and closed every
	// readerBatches batches so that it pins nothing for long. absent holds
	// the IDs it found absent since the last write: an admission is looked
	// up by its precheck and again when it is applied, moments later.
	// readErr is the first error a caller's read of the archive met.
	readErr atomic.Pointer[error]

	mu      sync.Mutex
	r       *archive.Reader
	absent  map[string]struct{}
	batches int

	// forgotBefore is the state's forget cutoff (fsm.KindForget), for the
	// reads that do not hold the state: an archived record updated before
	// it is forgotten. Set by the writer after each command.
	forgotBefore atomic.Int64
	// forgotKept is the forget cutoff of the older of the two snapshots the
	// store keeps, once this process wrote both: what no recovery may need
	// any more. The snapshot goroutine's.
	forgotKept int64

	lookups atomic.Uint64 // Stats.ArchiveLookups

	// The writer's view of what forgetting may find, so that it reads the
	// archive only when a forget command is due (forgetting): nothing is
	// forgettable before min(next, putMin), next being the earliest
	// last-update time the archive held at or after the state's cutoff
	// when the writer last looked (math.MaxInt64 if none; 0 if it never
	// looked), putMin the earliest of the records put since. Writer
	// goroutine only. forgetStopped: a forget command could not be made
	// (forgetting), and the writer makes no more until Open.
	next, putMin  int64
	forgetStopped bool
}

// readerBatches is how many batches the state machine's reader of the
// archive lasts at most.
const readerBatches = 1024

// absentMax bounds the IDs remembered absent: past it, they are forgotten.
const absentMax = 1 << 14

// openArchive opens the archive if the options ask for one or the
// directory has one: once a store has archived an execution, opening it
// without its archive would let that ID be admitted again.
func (s *Store) openArchive() error {
	dir := archiveDir(s.dir)
	if !s.opts.Archive {
		if _, err := s.opts.FS.Stat(dir); err != nil {
			return nil
		}
	}
	a, err := archive.Open(dir, archive.Options{CacheBytes: s.opts.ArchiveCacheBytes, Logger: s.logger, FS: s.opts.archiveFS})
	if err != nil {
		return fmt.Errorf("execstore: open %s: %w", s.dir, err)
	}
	s.archive = &storeArchive{a: a, r: a.NewReader(), absent: map[string]struct{}{}, putMin: math.MaxInt64}
	return nil
}

// Retired is the state machine's read (fsm.Archive): an error is kept, and
// answered as a record that exists, so that nothing is admitted under the
// ID; the writer stops the store before it answers or logs (check).
func (sa *storeArchive) Retired(id string) (*fsm.Retired, bool) {
	sa.lookups.Add(1)
	sa.mu.Lock()
	if _, ok := sa.absent[id]; ok {
		sa.mu.Unlock()
		return nil, false
	}
	r, _, found, err := sa.r.Get(id)
	if err == nil && !found {
		if len(sa.absent) == absentMax {
			clear(sa.absent)
		}
		sa.absent[id] = struct{}{}
	}
	sa.mu.Unlock()
	if err != nil {
		sa.err.CompareAndSwap(nil, &err)
		return nil, true
	}
	if !found {
		return nil, false
	}
	return &r, true
}

// check returns the first error of the state machine's reads, as the cause
// of a fail-stop: the state may have decided on it.
func (sa *storeArchive) check() error {
	if p := sa.err.Load(); p != nil {
		return fmt.Errorf("execstore: read the archive: %w", *p)
	}
	return nil
}

// put writes what a command at index retired; st is the state it was
// applied to.
func (sa *storeArchive) put(res *fsm.Result, index uint64, st *fsm.State) error {
	forgot := st.ForgotBefore()
	sa.forgotBefore.Store(forgot)
	if len(res.Retired) == 0 {
		return nil
	}
	for i := range res.Retired {
		sa.putMin = min(sa.putMin, res.Retired[i].UpdatedAt)
	}
	if mutant.ArchiveWriteDropped {
		res.Retired = nil
		return nil
	}
	var err error
	if forgot > 0 {
		// A forgotten ID admitted again: its old record may still be there.
		err = sa.a.PutMerging(res.Retired, index)
	} else {
		err = sa.a.Put(res.Retired, index)
	}
	res.Retired = nil // the archive has them; the answer need not hold them
	sa.release()
	if err != nil {
		return fmt.Errorf("execstore: write the archive: %w", err)
	}
	return nil
}

// readFailed keeps the first error of a caller's read (Stats.ArchiveErr)
// and returns it wrapped for the caller. A closed archive is the store's
// closing, not damage.
func (sa *storeArchive) readFailed(err error) error {
	if errors.Is(err, archive.ErrClosed) {
		return ErrClosed
	}
	err = fmt.Errorf("execstore: read the archive: %w", err)
	sa.readErr.CompareAndSwap(nil, &err)
	return err
}

// release closes the reader's iterator and forgets the absent IDs: the
// next read sees every write. After each write.
func (sa *storeArchive) release() {
	sa.mu.Lock()
	sa.r.Close()
	clear(sa.absent)
	sa.batches = 0
	sa.mu.Unlock()
}

// batchDone counts a batch of the writer's, and releases the reader every
// readerBatches of them.
func (sa *storeArchive) batchDone() {
	sa.mu.Lock()
	sa.batches++
	if sa.batches >= readerBatches {
		sa.r.Close()
		sa.batches = 0
	}
	sa.mu.Unlock()
}

// recover prepares the archive for a replay from a snapshot at index:
// it removes what the archive holds of later retirements, and moves there
// the retired records an older snapshot kept in memory.
func (sa *storeArchive) recover(st *fsm.State, index uint64) error {
	trimAt := index
	if mutant.ArchiveKeepsLaterRetirements {
		trimAt = ^uint64(0)
	}
	if _, err := sa.a.TrimAfter(trimAt); err != nil {
		return fmt.Errorf("execstore: recover the archive: %w", err)
	}
	st.SetArchive(sa)
	sa.forgotBefore.Store(st.ForgotBefore())
	if moved := st.MoveRetired(); len(moved) > 0 {
		// Retired at or before the snapshot: a replay from it never trims
		// them. The next snapshot, which no longer holds them, flushes them
		// first; until then the older snapshot still does.
		for len(moved) > 0 {
			n := min(len(moved), 1024)
			if err := sa.a.Put(moved[:n], index); err != nil {
				return fmt.Errorf("execstore: move retired records to the archive: %w", err)
			}
			moved = moved[n:]
		}
		sa.release()
	}
	return nil
}

// closeArchive closes the archive, if the store has one.
func (s *Store) closeArchive() error {
	if s.archive == nil {
		return nil
	}
	s.archive.release()
	// What was put is in the log too; what Forget deleted is in no log:
	// flushed, a clean close keeps it deleted.
	var err error
	if s.failed() == nil {
		err = s.archive.a.Flush()
	}
	return errors.Join(err, s.archive.a.Close())
}

// getRecord returns an execution's record from the state, or from the
// archive: archived says which. A failed read of the archive is an error,
// never a miss.
func (s *Store) getRecord(st *fsm.State, id string) (e fsm.Execution, archived, ok bool, err error) {
	if e, ok := st.Get(id); ok {
		return e, false, true, nil
	}
	if s.archive == nil {
		return fsm.Execution{}, false, false, nil
	}
	s.archive.lookups.Add(1)
	r, _, found, err := s.archive.a.Get(id)
	if err != nil {
		return fsm.Execution{}, false, false, s.archive.readFailed(err)
	}
	if !found || r.UpdatedAt < st.ForgotBefore() {
		return fsm.Execution{}, false, false, nil // never archived, or forgotten
	}
	return r.Execution(id), true, true, nil
}

// ArchiveQuery selects archived executions for ListArchived, by when they
// ended (their UpdatedAt) and optionally by workflow and status. Every filter
// is optional.
type ArchiveQuery struct {
	WorkflowID  string    // "": any workflow
	Status      Status    // "": any terminal status
	EndedAfter  time.Time // ended at or after this time; zero: no bound
	EndedBefore time.Time // ended before this time; zero: no bound
	Limit       int       // the most records of a page; 0: Limits.ListPageDefault
	Cursor      string    // "": the first page; otherwise ListPage.Cursor of the page before
}

// ListArchived returns a page of the archived executions the query selects
// (Options.Archive), in the order they ended (UpdatedAt), ties by ID, through
// the archive's own indexes by workflow and by time: a page costs
// O(log n + page). With a status, a page examines at most 10,000 records and
// may end early, with a cursor. Executions not yet archived are not listed
// (List lists them); a store without an archive lists nothing. Errors:
// ErrInvalidArgument for a bad status, limit or cursor.
func (s *Store) ListArchived(ctx context.Context, q ArchiveQuery) (ListPage, error) {
	aq := archive.Query{WorkflowID: q.WorkflowID, From: 0, To: maxNanos}
	if q.Status != "" {
		st, ok := statusToFSM(q.Status)
		if !ok || !q.Status.Terminal() {
			return ListPage{}, invalidArg("list archived: %q is not a terminal status", q.Status)
		}
		aq.Keep = func(e *archive.Entry) bool { return e.Outcome.Status == st }
		aq.ScanMax = listScanMax
	}
	switch limit := q.Limit; {
	case limit == 0:
		aq.Limit = s.limits.ListPageDefault
	case limit > s.limits.ListPageMax:
		return ListPage{}, overLimit(ErrInvalidArgument, "list archived: limit %d outside 1 to %d", limit, s.limits.ListPageMax)
	case limit < 0:
		return ListPage{}, invalidArg("list archived: limit %d outside 1 to %d", limit, s.limits.ListPageMax)
	default:
		aq.Limit = limit
	}
	if !q.EndedAfter.IsZero() {
		aq.From = clampNanos(q.EndedAfter)
	}
	if !q.EndedBefore.IsZero() {
		aq.To = clampNanos(q.EndedBefore)
	}
	if q.Cursor != "" {
		at, id, ok := decodeArchiveCursor(&q)
		if !ok {
			return ListPage{}, invalidArg("list archived: the cursor is not one this query's pages gave")
		}
		aq.AfterUpdatedAt, aq.AfterID = at, id
	}
	if err := ctx.Err(); err != nil {
		return ListPage{}, err
	}
	if s.isClosed.Load() {
		return ListPage{}, ErrClosed
	}
	if s.archive == nil {
		return ListPage{}, nil
	}
	// The forgotten executions: still on disk until the archive deletes
	// them, never listed.
	if aq.From = max(aq.From, s.archive.forgotBefore.Load()); aq.From >= aq.To {
		return ListPage{}, nil
	}
	entries, more, last, err := s.archive.a.Scan(aq)
	switch {
	case errors.Is(err, archive.ErrClosed):
		return ListPage{}, ErrClosed
	case err != nil:
		return ListPage{}, s.archive.readFailed(err)
	}
	page := ListPage{Records: make([]Record, len(entries))}
	for i := range entries {
		e := entries[i].Execution(entries[i].ID)
		page.Records[i] = recordFromFSM(&e)
		page.Records[i].Archived = true
	}
	if more {
		page.Cursor = encodeArchiveCursor(&q, last.UpdatedAt, last.ID)
	}
	return page, nil
}

// clampNanos is t in unix nanoseconds, within the representable range.
func clampNanos(t time.Time) int64 {
	switch {
	case t.After(latestNanos):
		return maxNanos
	case t.Before(time.Unix(0, 0)):
		return 0 // the store's times are never earlier
	}
	return t.UnixNano()
}

// An archive cursor is base64url (no padding) of: version 1, the last
// record examined (its UpdatedAt as a zigzag varint, its ID's length and
// bytes), and the first 8 bytes of an FNV-1a hash of the query's filters.
func archiveQueryHash(q *ArchiveQuery) []byte {
	h := fnv.New64a()
	for _, f := range []string{q.WorkflowID, string(q.Status), q.EndedAfter.UTC().Format(time.RFC3339Nano), q.EndedBefore.UTC().Format(time.RFC3339Nano)} {
		h.Write(binary.AppendUvarint(nil, uint64(len(f))))
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

func encodeArchiveCursor(q *ArchiveQuery, at int64, id string) string {
	b := binary.AppendVarint([]byte{cursorVersion}, at)
	b = binary.AppendUvarint(b, uint64(len(id)))
	b = append(append(b, id...), archiveQueryHash(q)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeArchiveCursor(q *ArchiveQuery) (int64, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	if err != nil || len(b) < 1 || b[0] != cursorVersion {
		return 0, "", false
	}
	b = b[1:]
	at, n := binary.Varint(b)
	if n <= 0 {
		return 0, "", false
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || l == 0 || l > uint64(len(b)-n) {
		return 0, "", false
	}
	id := string(b[n : n+int(l)])
	if string(b[n+int(l):]) != string(archiveQueryHash(q)) {
		return 0, "", false
	}
	return at, id, true
}

// forgetScanMax bounds the archived records one forget command counts, so
// that counting never holds the writer long: past it, the command's cutoff
// is the end time of the last record counted (all of that time's records
// are counted together), and the next command goes on from there.
const forgetScanMax = 1 << 16

// forgetting makes a forget command when archived executions have passed
// Options.ForgetAfter: its cutoff is the batch's time less ForgetAfter, but
// never past a terminal execution not yet archived (fsm.KindForget), and
// its counts are the archive's records updated from the state's cutoff to
// the new one, read at the batch's time from the archive, which holds
// exactly what the applied log retired.
func (w *writer) forgetting() (*request, func() bool) {
	s := w.s
	if s.opts.ForgetAfter <= 0 || s.archive == nil {
		return nil, nil
	}
	cutoff := func(now int64, st *fsm.State) int64 {
		at := now - int64(s.opts.ForgetAfter)
		if oldest, ok := st.NextRetirable(); ok {
			at = min(at, oldest)
		}
		return at
	}
	due := false
	clock, _ := nanosFromTime(s.opts.Now())
	sa := s.archive
	w.c.view(func(st *fsm.State) {
		at := cutoff(max(clock, w.last), st)
		due = !sa.forgetStopped && at > st.ForgotBefore() && at > min(sa.next, sa.putMin)
	})
	if !due {
		return nil, nil
	}
	r := newRequest()
	r.cmd = fsm.Command{Kind: fsm.KindForget}
	more := false
	// A failed read decides nothing: forgetting waits, the store goes on.
	readFailed := func(err error) bool {
		sa.readFailed(err)
		s.logger.Error("execstore: forgetting: read the archive", "err", err)
		return false
	}
	r.fill = func(c *fsm.Command, st *fsm.State) bool {
		from, to := st.ForgotBefore(), cutoff(c.Now, st)
		if to <= from {
			return false
		}
		counts, before, err := sa.a.CountUpdated(from, to, fsm.MaxForgetCounts, forgetScanMax)
		if err != nil {
			return readFailed(err)
		}
		if before == to {
			// Everything up to the cutoff is counted: nothing more is
			// forgettable until a cutoff reaches the next record.
			next, ok, err := sa.a.FirstUpdated(to)
			if err != nil {
				return readFailed(err)
			}
			if !ok {
				next = math.MaxInt64
			}
			sa.next, sa.putMin = next, math.MaxInt64
		}
		if len(counts) == 0 && before == to {
			// Nothing archived in the range: no command (the next looks
			// again from the same cutoff).
			return false
		}
		if before <= from {
			// Said once: forgetting stops until the store is opened again.
			sa.forgetStopped = true
			s.logger.Error("execstore: forgetting stops: more workflows ended at one time than one forget command counts",
				"at", timeFromNanos(from), "most", fsm.MaxForgetCounts)
			return false
		}
		c.At, c.Forgotten, more = before, counts, before < to
		return true
	}
	return r, func() bool { return r.err == nil && r.res.Code == fsm.CodeOK && more }
}

// forgetKept deletes from the archive the records no snapshot the store
// keeps counts as archived any more, after a snapshot with forget cutoff
// forgot was written: those the older of the two kept (the previous
// snapshot this process wrote) forgot. A replay from either never asks for
// them. A failed deletion is logged and made again after the next
// snapshot; nothing depends on it but disk space. Snapshot goroutine only.
func (sa *storeArchive) forgetKept(logger *slog.Logger, forgot int64) {
	kept := sa.forgotKept
	sa.forgotKept = forgot
	if kept <= 0 {
		return
	}
	start := time.Now()
	n, err := sa.a.Forget(kept)
	if err != nil {
		logger.Error("execstore: delete forgotten executions from the archive; the next snapshot retries", "err", err)
		return
	}
	if n > 0 {
		logger.Info("execstore: forgotten executions deleted from the archive", "records", n,
			"updated_before", timeFromNanos(kept), "took", time.Since(start))
	}
}
