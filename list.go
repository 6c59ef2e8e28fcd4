package execstore

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"hash/fnv"
	"time"

	"github.com/execstore/execstore/fsm"
)

// Order is the order of a listing: by admission, oldest or newest first.
type Order string

const (
	OldestFirst Order = "oldest" // the default
	NewestFirst Order = "newest"
)

// ListQuery selects executions for List. Every filter is optional; those
// given must all hold.
type ListQuery struct {
	Status         Status    // "": any status
	WorkflowID     string    // "": any workflow
	ParentID       string    // "": any parent, or none; otherwise the children of this execution
	AdmittedAfter  time.Time // admitted at or after this time; zero: no bound
	AdmittedBefore time.Time // admitted before this time; zero: no bound
	Order          Order     // "": OldestFirst
	Limit          int       // the most records of a page; 0: Limits.ListPageDefault
	Cursor         string    // "": the first page; otherwise ListPage.Cursor of the page before
}

// ListPage is one page of a listing.
type ListPage struct {
	Records []Record
	// Cursor continues the listing after this page; "" when it is
	// complete. It is opaque, and only valid with the same query.
	Cursor string
}

// listScanMax bounds the index entries one page examines when a listing
// filters by status and by a workflow or a parent, or by a workflow and a
// parent: one index serves one of the filters and the page skips what fails
// the other. A page that reaches the bound ends early, with a cursor.
const listScanMax = 10_000

// List returns a page of the executions the query selects, in admission
// order (ties of admission time in the order they were admitted), through
// the state machine's secondary indexes: a page costs O(log n + page)
// whatever the number of records, except that a query filtering by status
// and a workflow or parent (or by a workflow and a parent) examines at
// most 10,000 entries per page and may end a page early, with a cursor.
// Retired executions are not listed (Get still answers for them). A listing
// is not a snapshot: records admitted or changed between pages appear where
// the order puts them. Errors: ErrInvalidArgument for a bad status, order,
// limit or cursor.
func (s *Store) List(ctx context.Context, q ListQuery) (ListPage, error) {
	fq, err := s.listQuery(&q)
	if err != nil {
		return ListPage{}, err
	}
	var page ListPage
	var next fsm.ListPos
	var more bool
	err = s.read(ctx, func(st *fsm.State) {
		next, more = st.List(fq, func(e *fsm.Execution) {
			r := recordFromFSM(e)
			r.Priority, r.Deadline, r.ConcurrencyKey = st.PriorityOf(e.ID), timeFromNanos(st.DeadlineOf(e.ID)), st.ConcurrencyKeyOf(e.ID)
			page.Records = append(page.Records, r)
		})
	})
	if err != nil {
		return ListPage{}, err
	}
	if more {
		page.Cursor = encodeCursor(&q, next)
	}
	return page, nil
}

// listQuery checks a query and turns it into the state machine's.
func (s *Store) listQuery(q *ListQuery) (*fsm.ListQuery, error) {
	fq := &fsm.ListQuery{Workflow: q.WorkflowID, Parent: q.ParentID, ScanMax: listScanMax}
	if q.Status != "" {
		st, ok := statusToFSM(q.Status)
		if !ok {
			return nil, invalidArg("list: unknown status %q", q.Status)
		}
		fq.Status = st
	}
	switch q.Order {
	case "", OldestFirst:
	case NewestFirst:
		fq.Newest = true
	default:
		return nil, invalidArg("list: unknown order %q (want %q or %q)", q.Order, OldestFirst, NewestFirst)
	}
	switch limit := q.Limit; {
	case limit == 0:
		fq.Limit = s.limits.ListPageDefault
	case limit < 0 || limit > s.limits.ListPageMax:
		if limit > s.limits.ListPageMax {
			return nil, overLimit(ErrInvalidArgument, "list: limit %d outside 1 to %d", limit, s.limits.ListPageMax)
		}
		return nil, invalidArg("list: limit %d outside 1 to %d", limit, s.limits.ListPageMax)
	default:
		fq.Limit = limit
	}
	if !q.AdmittedAfter.IsZero() {
		fq.From, _ = nanosFromTime(q.AdmittedAfter)
		if q.AdmittedAfter.After(latestNanos) {
			fq.From = maxNanos
		}
	}
	if !q.AdmittedBefore.IsZero() {
		fq.To, _ = nanosFromTime(q.AdmittedBefore)
		if q.AdmittedBefore.After(latestNanos) {
			fq.To = maxNanos
		}
	}
	if q.Cursor != "" {
		pos, ok := decodeCursor(q)
		if !ok {
			return nil, invalidArg("list: the cursor is not one this query's pages gave")
		}
		fq.After = pos
	}
	return fq, nil
}

// A cursor is base64url (no padding) of: version 1, the position (the
// admission number of the last record the page examined, a uvarint), and the
// first 8 bytes of an FNV-1a hash of the query's filters and order, so that
// a cursor of another query is refused rather than misread.
const cursorVersion = 1

func queryHash(q *ListQuery) []byte {
	h := fnv.New64a()
	for _, f := range []string{string(q.Status), q.WorkflowID, q.ParentID, q.AdmittedAfter.UTC().Format(time.RFC3339Nano),
		q.AdmittedBefore.UTC().Format(time.RFC3339Nano), string(q.Order)} {
		h.Write(binary.AppendUvarint(nil, uint64(len(f))))
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

func encodeCursor(q *ListQuery, p fsm.ListPos) string {
	b := []byte{cursorVersion}
	b = binary.AppendUvarint(b, p.No)
	b = append(b, queryHash(q)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(q *ListQuery) (fsm.ListPos, bool) {
	b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	if err != nil || len(b) < 1 || b[0] != cursorVersion {
		return fsm.ListPos{}, false
	}
	b = b[1:]
	no, n := binary.Uvarint(b)
	if n <= 0 || no == 0 {
		return fsm.ListPos{}, false
	}
	b = b[n:]
	if string(b) != string(queryHash(q)) {
		return fsm.ListPos{}, false
	}
	return fsm.ListPos{No: no}, true
}

// statusToFSM maps a public status to the state machine's.
func statusToFSM(st Status) (fsm.Status, bool) {
	for _, s := range fsm.AllStatuses {
		if statusFromFSM(s) == st {
			return s, true
		}
	}
	return 0, false
}

// ---- The change feed ---------------------------------------------------------

// Change is one change of an execution's status: at Position of the feed,
// execution ExecutionID changed to Status at time At (the store's time of
// the command). Admission is a change, to StatusAdmitted.
type Change struct {
	Position    uint64
	ExecutionID string
	Status      Status
	At          time.Time
}

// ChangesPage is what Changes returns.
type ChangesPage struct {
	Changes []Change // in position order
	// Next is the position to pass as after to read on: the last change's
	// position, or after itself when there is none.
	Next uint64
	// Last is the latest position the store has numbered (the feed's head);
	// Last - Next is how far a consumer is behind, at most.
	Last uint64
}

// Changes returns the changes after position after, in order, at most limit
// of them (0: Limits.ListPageDefault; more than Limits.ListPageMax is
// ErrInvalidArgument). Positions start at 1 and only grow, across restarts
// and snapshots too, so a consumer that stores the Next of a page and reads
// on from it misses no execution: it sees every change after its position
// of each execution that is not retired. The feed keeps only each
// execution's latest change: one whose status changed twice since the
// consumer's position is seen once, with its latest status and position
// (compaction). Retirement removes an execution's change (retirement is not
// a change), so a consumer behind by more than Options.Retention misses the
// terminal change of what was retired meanwhile.
//
// A change is visible only once its command is applied, which is after it
// is logged and fsynced: a consumer never sees a change a crash could undo
// (with Options.NoSync, after it is written; then a machine crash may
// undo a change a consumer saw, and its position is numbered again).
//
// If there is no change after after, Changes waits for the next one (the
// writer signals each applied batch that changed a status; nothing polls)
// until ctx is done, and then returns an empty page and ctx's error. It
// answers at once, whatever ctx, when there are changes to return.
func (s *Store) Changes(ctx context.Context, after uint64, limit int) (ChangesPage, error) {
	switch {
	case limit == 0:
		limit = s.limits.ListPageDefault
	case limit < 0 || limit > s.limits.ListPageMax:
		if limit > s.limits.ListPageMax {
			return ChangesPage{}, overLimit(ErrInvalidArgument, "changes: limit %d outside 1 to %d", limit, s.limits.ListPageMax)
		}
		return ChangesPage{}, invalidArg("changes: limit %d outside 1 to %d", limit, s.limits.ListPageMax)
	}
	for {
		wake := s.changed.channel() // before reading, so no change is missed in between
		page, err := s.changesAfter(ctx, after, limit)
		if err != nil || len(page.Changes) > 0 {
			return page, err
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return page, ctx.Err()
		case <-s.awaits.closed:
			return page, ErrClosed
		}
	}
}

// changesAfter reads one page of the feed without waiting. The feed keeps
// superseded entries until the writer sweeps them; a read skips them,
// examining at most changesScanMax entries under the read lock at a time,
// and goes on until it has a change or reaches the feed's head.
func (s *Store) changesAfter(ctx context.Context, after uint64, limit int) (ChangesPage, error) {
	page := ChangesPage{Next: after}
	// On one node a read never waits: changes already there are returned
	// even to a caller whose context ended. On a replica a linearizable read
	// may wait for the leader (a partition), and stops with ctx.
	readCtx := ctx
	if !s.commit.readsWait() {
		readCtx = context.Background()
	}
	for {
		from := page.Next
		err := s.read(readCtx, func(st *fsm.State) {
			page.Last = st.Meta().ChangeSeq
			page.Next = st.Changes(from, limit, changesScanMax, func(c fsm.Change) {
				page.Changes = append(page.Changes, Change{
					Position: c.Seq, ExecutionID: c.ID, Status: statusFromFSM(c.Status), At: timeFromNanos(c.At),
				})
			})
		})
		if err != nil || len(page.Changes) > 0 || page.Next == from || page.Next >= page.Last {
			page.Next = after // nothing returned: read on from where the caller is
			if n := len(page.Changes); n > 0 {
				page.Next = page.Changes[n-1].Position
			}
			return page, err
		}
	}
}

// changesScanMax bounds the feed entries one read examines under the read
// lock (the writer waits for it).
const changesScanMax = 10_000
