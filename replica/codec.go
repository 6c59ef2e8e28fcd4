package replica

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// entryVersion is the first byte of every log entry's payload. Part of the log format: a
// reader refuses versions it does not know.
const entryVersion = 1

// flagAppendedAt marks a payload that carries AppendedAt. Part of the log format.
const flagAppendedAt = 1

// A raft log entry is stored as the payload of one wal entry whose index is the entry's
// index; the wal's frame checks the index and checksums the payload. The payload:
//
//	+---------+------+-------+------+-----------------+-----------+------+-----------+------------+
//	| version | type | flags | term | appended at     | data len  | data | ext len   | extensions |
//	| 1 B = 1 | 1 B  | 1 B   | uv   | varint, if flag | uv        |      | uv        |            |
//	+---------+------+-------+------+-----------------+-----------+------+-----------+------------+
//
// type is raft.LogType; flags bit 0 says AppendedAt is present, as nanoseconds since the
// Unix epoch (raft leaves it zero on logs from older versions). Every other flag bit must be
// zero, varints are minimal, and the payload ends with the extensions: a log has one
// encoding, and any other bytes are an error.

// appendEntry appends the payload of l to dst.
func appendEntry(dst []byte, l *raft.Log) []byte {
	var flags byte
	if !l.AppendedAt.IsZero() {
		flags |= flagAppendedAt
	}
	dst = append(dst, entryVersion, byte(l.Type), flags)
	dst = binary.AppendUvarint(dst, l.Term)
	if flags&flagAppendedAt != 0 {
		dst = binary.AppendVarint(dst, l.AppendedAt.UnixNano())
	}
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	return append(dst, l.Extensions...)
}

// entryLen is len(appendEntry(nil, l)).
func entryLen(l *raft.Log) int {
	n := 3 + uvarintLen(l.Term)
	if !l.AppendedAt.IsZero() {
		var b [binary.MaxVarintLen64]byte
		n += binary.PutVarint(b[:], l.AppendedAt.UnixNano())
	}
	n += uvarintLen(uint64(len(l.Data))) + len(l.Data)
	return n + uvarintLen(uint64(len(l.Extensions))) + len(l.Extensions)
}

// decodeEntry fills l from the payload b of the wal entry at index. Data and Extensions are
// copied out of b (nil when empty). A payload that does not decode gives an error wrapping
// ErrCorruptEntry and leaves l zeroed but for its Index.
func decodeEntry(index uint64, b []byte, l *raft.Log) error {
	*l = raft.Log{Index: index}
	d := entryDecoder{b: b}
	version, typ, flags := d.u8(), d.u8(), d.u8()
	switch {
	case d.err != "":
	case version != entryVersion:
		d.fail(fmt.Sprintf("unknown version %d", version))
	case flags&^flagAppendedAt != 0:
		d.fail(fmt.Sprintf("unknown flags %#x", flags))
	}
	term := d.uvarint()
	var appended int64
	if flags&flagAppendedAt != 0 {
		appended = d.varint()
	}
	data := d.bytes()
	ext := d.bytes()
	if d.err == "" && d.off != len(b) {
		d.fail(fmt.Sprintf("%d bytes after the extensions", len(b)-d.off))
	}
	if d.err != "" {
		return fmt.Errorf("%w: index %d: %s", ErrCorruptEntry, index, d.err)
	}
	l.Term, l.Type, l.Data, l.Extensions = term, raft.LogType(typ), data, ext
	if flags&flagAppendedAt != 0 {
		l.AppendedAt = time.Unix(0, appended)
	}
	return nil
}

// entryDecoder reads a payload; the first failure sticks and later reads return zeros.
type entryDecoder struct {
	b   []byte
	off int
	err string
}

func (d *entryDecoder) fail(msg string) {
	if d.err == "" {
		d.err = msg
	}
}

func (d *entryDecoder) u8() byte {
	if d.err != "" || d.off >= len(d.b) {
		d.fail("payload ends early")
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *entryDecoder) uvarint() uint64 {
	if d.err != "" {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 || n != len(binary.AppendUvarint(nil, v)) {
		d.fail("bad uvarint")
		return 0
	}
	d.off += n
	return v
}

func (d *entryDecoder) varint() int64 {
	if d.err != "" {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 || n != len(binary.AppendVarint(nil, v)) {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

// bytes reads a length and that many bytes, copied; nil when the length is zero.
func (d *entryDecoder) bytes() []byte {
	n := d.uvarint()
	if d.err != "" {
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail(fmt.Sprintf("length %d runs past the payload", n))
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]byte, n)
	copy(out, d.b[d.off:])
	d.off += int(n)
	return out
}
