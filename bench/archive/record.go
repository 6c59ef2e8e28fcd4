package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Status is a terminal execution's status, numbered as the state machine
// numbers them (fsm.StatusCompleted and the two after it).
type Status uint8

// The terminal statuses: the only ones an archived record has.
const (
	StatusCompleted Status = 3
	StatusFailed    Status = 4
	StatusCancelled Status = 5
)

// Parent names the execution (and its step) that started a child.
type Parent struct {
	ExecutionID string
	StepKey     string
}

// Record is an archived execution: every field fsm.Retired keeps, with the
// outcome flattened into bytes (the result JSON of a completed execution,
// the recorded error of a failed or cancelled one).
type Record struct {
	ID              string
	WorkflowID      string
	Status          Status
	Outcome         string
	Parent          *Parent // nil unless another execution started this one
	AdmittedAtNanos int64
	UpdatedAtNanos  int64
	Deliveries      uint64
}

// recordVersion is the value's first byte: part of the archive's format.
const recordVersion = 1

// flagParent marks a value that holds a parent: part of the archive's format.
const flagParent = 1

// stringBytesMax bounds every string of a record, so that a damaged length
// is refused before anything is allocated for it.
const stringBytesMax = 1 << 20

// ErrCorrupt is wrapped by every error about a value or key the archive
// cannot decode: damage, never a miss.
var ErrCorrupt = errors.New("archive: corrupt")

// validate refuses a record the archive must never hold.
func (r *Record) validate() error {
	switch {
	case r.ID == "" || len(r.ID) > stringBytesMax:
		return fmt.Errorf("archive: record ID of %d bytes", len(r.ID))
	case r.WorkflowID == "" || len(r.WorkflowID) > stringBytesMax:
		return fmt.Errorf("archive: record %q: workflow ID of %d bytes", r.ID, len(r.WorkflowID))
	case r.Status < StatusCompleted || r.Status > StatusCancelled:
		return fmt.Errorf("archive: record %q: status %d is not terminal", r.ID, r.Status)
	case len(r.Outcome) > stringBytesMax:
		return fmt.Errorf("archive: record %q: outcome of %d bytes", r.ID, len(r.Outcome))
	case r.UpdatedAtNanos < r.AdmittedAtNanos:
		return fmt.Errorf("archive: record %q: updated before admitted", r.ID)
	case r.Parent != nil && (r.Parent.ExecutionID == "" || len(r.Parent.ExecutionID) > stringBytesMax ||
		len(r.Parent.StepKey) > stringBytesMax):
		return fmt.Errorf("archive: record %q: bad parent", r.ID)
	}
	return nil
}

// appendValue appends the record's value (see the package doc) to dst.
func appendValue(dst []byte, r *Record) ([]byte, error) {
	if err := r.validate(); err != nil {
		return dst, err
	}
	var flags byte
	if r.Parent != nil {
		flags |= flagParent
	}
	dst = append(dst, recordVersion, byte(r.Status), flags)
	dst = appendString(dst, r.WorkflowID)
	dst = binary.AppendVarint(dst, r.AdmittedAtNanos)
	dst = binary.AppendUvarint(dst, uint64(r.UpdatedAtNanos-r.AdmittedAtNanos))
	dst = binary.AppendUvarint(dst, r.Deliveries)
	dst = appendString(dst, r.Outcome)
	if r.Parent != nil {
		dst = appendString(dst, r.Parent.ExecutionID)
		dst = appendString(dst, r.Parent.StepKey)
	}
	return dst, nil
}

func appendString(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// decodeValue decodes the value archived under id, and validates the record.
func decodeValue(id string, v []byte) (Record, error) {
	d := decoder{b: v}
	r := Record{ID: id}
	if len(v) < 3 || v[0] != recordVersion || v[2]&^flagParent != 0 {
		return r, fmt.Errorf("%w: record %q: bad header", ErrCorrupt, id)
	}
	r.Status, d.b = Status(v[1]), v[3:]
	r.WorkflowID = d.string()
	r.AdmittedAtNanos = d.varint()
	elapsed := d.uvarint()
	if elapsed > math.MaxInt64 {
		d.err = true // and an admitted time plus elapsed that wraps fails validate
	}
	r.UpdatedAtNanos = r.AdmittedAtNanos + int64(elapsed)
	r.Deliveries = d.uvarint()
	r.Outcome = d.string()
	if v[2]&flagParent != 0 {
		r.Parent = &Parent{ExecutionID: d.string(), StepKey: d.string()}
	}
	if d.err || len(d.b) != 0 {
		return r, fmt.Errorf("%w: record %q: bad body", ErrCorrupt, id)
	}
	if err := r.validate(); err != nil {
		return r, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return r, nil
}

// decoder reads a value, remembering the first failure instead of
// returning it from every read.
type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) uvarint() uint64 {
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *decoder) varint() int64 {
	x, n := binary.Varint(d.b)
	if n <= 0 {
		d.err, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > stringBytesMax || n > uint64(len(d.b)) {
		d.err, d.b = true, nil
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// appendTime appends a time that sorts bytewise as the times sort.
func appendTime(dst []byte, nanos int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(nanos)^(1<<63))
}

// appendWorkflowKey appends the by-workflow index key of (workflow, at, id);
// id empty gives the first key of that time.
func appendWorkflowKey(dst []byte, workflow string, at int64, id string) []byte {
	return append(appendTime(appendString(dst, workflow), at), id...)
}

// appendTimeKey appends the by-time index key of (at, id).
func appendTimeKey(dst []byte, at int64, id string) []byte {
	return append(appendTime(dst, at), id...)
}

// indexID returns the ID at the end of an index key whose prefix (workflow
// and time, or time) is prefixBytes long.
func indexID(key []byte, prefixBytes int) (string, error) {
	if len(key) <= prefixBytes {
		return "", fmt.Errorf("%w: index key of %d bytes", ErrCorrupt, len(key))
	}
	return string(key[prefixBytes:]), nil
}

// workflowPrefixBytes is the length of a by-workflow key's prefix before the ID.
func workflowPrefixBytes(workflow string) int {
	return len(binary.AppendUvarint(nil, uint64(len(workflow)))) + len(workflow) + 8
}
