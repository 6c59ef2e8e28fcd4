package fsm

import (
	"encoding/binary"

	"github.com/execstore/execstore/fsm/internal/record"
)

// The archive. A state given an Archive (SetArchive) keeps no retired record:
// a retire command removes each record it retires from the state and hands it
// out in its result (Result.Retired), and the store writes it to the archive
// before it applies the next command. Every later decision that depends on
// whether an ID was ever admitted (an admission's conflict, a generated ID's
// free form, a schedule's occurrence already taken, a fenced write to an
// ended execution) asks the archive after the state: so the state machine
// decides exactly as it did when it kept the retired records, and its memory
// holds the live set alone.
//
// Determinism holds if the archive holds exactly the executions the applied
// log retired, no more and no fewer, whenever a command is applied: the store
// writes each retire command's records before the next command, and before a
// replay it removes what the archive holds of retirements after the snapshot
// it starts from (they are retired again by the replay). Precheck asks the
// same archive, so a conflicting admission is refused before it is logged.

// Archive is the state machine's view of the executions retired out of it.
// Retired is called by the applying goroutine (Apply, Precheck); an
// implementation that fails to read must not answer false for an ID it may
// hold: it answers true with a nil record and keeps the error, and its store
// stops before the command's effects are answered or logged.
type Archive interface {
	// Retired returns the record archived under id, if any.
	Retired(id string) (*Retired, bool)
}

// ArchivedRecord is a record a retire command removed from the state, for
// the archive: its ID and its compact record.
type ArchivedRecord struct {
	ID string
	Retired
}

// SetArchive makes the state retire into a (see above); MoveRetired then
// hands out the retired records an older state kept. It panics on a copy.
func (s *State) SetArchive(a Archive) {
	if s.origin != nil {
		panic("fsm: SetArchive on a copy")
	}
	s.archive = a
}

// MoveRetired removes the records an older state kept in memory as retired
// (a snapshot written before the archive existed) and returns them, for the
// archive; they count as archived from now on. The caller must write every
// one of them to the state's archive before it applies a command.
func (s *State) MoveRetired() []ArchivedRecord {
	if s.retired.Len() == 0 {
		return nil
	}
	out := make([]ArchivedRecord, 0, s.retired.Len())
	s.retired.Scan(func(it retiredItem) bool {
		out = append(out, ArchivedRecord{ID: it.ID, Retired: *it.r})
		return true
	})
	s.retired.Clear()
	s.meta.Archived += s.meta.Retired
	s.meta.Retired = 0
	return out
}

// Execution expands an archived record into the record reads return.
func (r *Retired) Execution(id string) Execution { return *r.execution(id) }

// archivedRecord returns what the archive holds under id, as a stored record
// for the applying goroutine's decisions, or nil.
func (s *State) archivedRecord(id string) *stored {
	if s.archive == nil {
		return nil
	}
	r, ok := s.archive.Retired(id)
	if !ok || (r != nil && s.forgotten(r)) {
		return nil
	}
	if r == nil {
		// The archive failed: the ID counts as taken, so that nothing is
		// admitted under it, and the store stops before answering.
		r = &failedRead
	}
	return record.New(r.execution(id), 0)
}

// failedRead stands for a record the archive could not read: terminal, so
// that no command changes it.
var failedRead = Retired{Outcome: &Outcome{Status: StatusFailed, Error: &ErrorInfo{Name: "ArchiveReadError", Message: "the archive could not be read"}}}

// ArchiveVersion is the version of an archived record's encoding, its first
// byte. Part of the archive's format: a reader refuses versions it does not
// know.
const ArchiveVersion = 1

// AppendArchived appends the archive's encoding of a retired record, retired
// by the command at log index index (the ID is the archive's key, not part
// of the value):
//
//	version:1B workflow:str outcome admitted:uv updated:uv deliveries:uv
//	parent:(0 | 1 caller:str key:str) index:uv
//
// with strings, varints and the outcome as in the command codec.
func AppendArchived(dst []byte, r *Retired, index uint64) []byte {
	dst = append(dst, ArchiveVersion)
	dst = appendStr(dst, r.WorkflowID)
	dst = appendOutcome(dst, r.Outcome)
	dst = binary.AppendUvarint(dst, uint64(r.AdmittedAt))
	dst = binary.AppendUvarint(dst, uint64(r.UpdatedAt))
	dst = binary.AppendUvarint(dst, r.Deliveries)
	dst = appendParent(dst, r.Parent)
	return binary.AppendUvarint(dst, index)
}

// DecodeArchived reads a value AppendArchived wrote, and checks it: a value
// that does not decode to a terminal record, whole, is an error matching
// ErrDecode, never a miss.
func DecodeArchived(b []byte) (r Retired, index uint64, err error) {
	r, index, rest, err := DecodeArchivedNext(b)
	if err == nil && len(rest) != 0 {
		return Retired{}, 0, decodeErr("archive: trailing bytes after a record")
	}
	return r, index, err
}

// DecodeArchivedNext reads one record AppendArchived wrote at the start of
// b, checks it as DecodeArchived does, and returns the bytes after it: an
// archive may keep several records of one ID in a value, one after the
// other (an ID forgotten and admitted again; package archive).
func DecodeArchivedNext(b []byte) (r Retired, index uint64, rest []byte, err error) {
	d := NewDecoder(b)
	if v := d.Byte(); d.err == nil && v != ArchiveVersion {
		return Retired{}, 0, nil, decodeErr("archive: unknown record version " + itoa(uint64(v)))
	}
	r.WorkflowID = d.Str()
	var o Outcome
	readOutcome(d, &o)
	r.AdmittedAt, r.UpdatedAt = d.Int(), d.Int()
	r.Deliveries = d.Uvarint()
	if d.Bool() {
		r.Parent = &Parent{ExecutionID: d.Str(), StepKey: d.Str()}
	}
	index = d.Uvarint()
	switch {
	case d.err != nil:
		return Retired{}, 0, nil, d.err
	case r.WorkflowID == "":
		return Retired{}, 0, nil, decodeErr("archive: record without a workflow")
	}
	if msg := checkOutcome(&o); msg != "" {
		return Retired{}, 0, nil, decodeErr("archive: record: " + msg)
	}
	r.Outcome = internOutcome(&o)
	return r, index, b[len(b)-d.Remaining():], nil
}

// archivedCounts are the archived executions' shares of the counts by status
// and by workflow, as a state's encoding holds them: the archived records are
// not in memory to count again when the state is decoded.
type archivedCounts struct {
	byStatus   [statusCap]int
	byWorkflow []workflowN // in workflow order
}

type workflowN struct {
	name string
	n    int
}

// archivedStatuses are the statuses an archived execution can have, in the
// encoding's order.
var archivedStatuses = [...]Status{StatusCompleted, StatusFailed, StatusCancelled}

// encodeArchived writes the archived executions' counts: each count of the
// listing indexes less what the records and the retired records hold.
func (s *State) encodeArchived(e *encoder) {
	e.uv(uint64(s.meta.Archived))
	if s.meta.Archived == 0 || e.err != nil {
		return
	}
	var byStatus [statusCap]int
	byWorkflow := map[string]int{}
	s.execs.Scan(func(it execItem) bool {
		r := s.rec(it)
		byStatus[r.Status()]++
		byWorkflow[r.WorkflowID()]++
		return true
	})
	s.retired.Scan(func(it retiredItem) bool {
		byStatus[it.r.Outcome.Status]++
		byWorkflow[it.r.WorkflowID]++
		return true
	})
	for _, st := range archivedStatuses {
		e.uv(uint64(s.list.counts[st] - byStatus[st]))
	}
	var ws []workflowN
	s.list.workflows.Scan(func(w workflowCount) bool {
		if n := w.p.Total() - byWorkflow[w.Name]; n > 0 {
			ws = append(ws, workflowN{w.Name, n})
		}
		return true
	})
	e.uv(uint64(len(ws)))
	for _, w := range ws {
		e.buf = appendStr(e.buf, w.name)
		e.uv(uint64(w.n))
		e.flush(false)
	}
}

// decodeArchived reads what encodeArchived wrote, for the listing indexes
// (newListBuilder), and checks that both breakdowns add up to the count.
func (s *State) decodeArchived(d *streamDecoder) error {
	s.meta.Archived = int(d.int())
	if d.err != nil || s.meta.Archived == 0 {
		return d.err
	}
	if s.meta.Archived > s.meta.Terminal-s.meta.Retired {
		return decodeErr("state: more archived executions than terminal ones")
	}
	a := &archivedCounts{}
	total := 0
	for _, st := range archivedStatuses {
		n := int(d.int())
		a.byStatus[st] = n
		total += n
	}
	if d.err == nil && total != s.meta.Archived {
		return decodeErr("state: the archived executions' counts by status disagree with their count")
	}
	total = 0
	for i, n := 0, d.count(maxCount); i < n && d.err == nil; i++ {
		w := workflowN{name: d.Str(), n: int(d.int())}
		if d.err == nil && (w.n <= 0 || (i > 0 && a.byWorkflow[i-1].name >= w.name)) {
			return decodeErr("state: archived counts by workflow out of order or empty")
		}
		a.byWorkflow = append(a.byWorkflow, w)
		total += w.n
	}
	if d.err == nil && total != s.meta.Archived {
		return decodeErr("state: the archived executions' counts by workflow disagree with their count")
	}
	s.archivedCounts = a
	return d.err
}

// archived checks what encodeArchived wrote, as decodeArchived does.
func (c *checker) archived(sum *StateSummary, version uint64) error {
	if version < 6 {
		return nil
	}
	sum.Meta.Archived = int(c.int())
	if c.err != nil || sum.Meta.Archived == 0 {
		return c.err
	}
	if sum.Meta.Archived > sum.Meta.Terminal-sum.Meta.Retired {
		return decodeErr("state: more archived executions than terminal ones")
	}
	total := 0
	for range archivedStatuses {
		total += int(c.int())
	}
	if c.err == nil && total != sum.Meta.Archived {
		return decodeErr("state: the archived executions' counts by status disagree with their count")
	}
	total = 0
	for i, n := 0, c.count(maxCount); i < n && c.err == nil; i++ {
		name := c.str(&c.key[0])
		k := int(c.int())
		if c.err == nil && (k <= 0 || !c.after(i == 0, name, nil)) {
			return decodeErr("state: archived counts by workflow out of order or empty")
		}
		total += k
	}
	if c.err == nil && total != sum.Meta.Archived {
		return decodeErr("state: the archived executions' counts by workflow disagree with their count")
	}
	sum.Records += sum.Meta.Archived
	return c.err
}
