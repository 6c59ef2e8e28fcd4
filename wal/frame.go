package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/execstore/execstore/internal/mutant"
)

// The frame layout is part of the wire format: changing any constant below makes existing logs
// unreadable. See doc.go for the diagram.
const (
	frameHeaderSize = 28 // bytes before the payload
	frameVersion    = 1  // the only version this package writes or reads
	kindCommand     = 1  // the only kind: one command of the store

	offCRC      = 0
	offVersion  = 4
	offKind     = 5
	offReserved = 6
	offIndex    = 8
	offBatchPos = 16
	offBatchLen = 20
	offLength   = 24
)

// Limits on what one Write may carry. They bound the memory a reader must trust a length field
// for, so a corrupted length can never make Open allocate or scan without bound.
const (
	// MaxPayloadBytes is the largest payload one entry may carry (64 MiB).
	MaxPayloadBytes = 64 << 20
	// MaxBatchEntries is the most entries one Write may append (65536).
	MaxBatchEntries = 1 << 16
	// MaxBatchBytes is the most payload bytes one Write may append (256 MiB).
	MaxBatchBytes = 256 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameHeader holds the fields of a frame that are not derived from the payload.
type frameHeader struct {
	index    uint64 // this entry's log index
	batchPos uint32 // index - first index of its Write batch
	batchLen uint32 // entries in that batch
}

// batchFirst is the index of the first entry of the batch the frame was written in.
func (h frameHeader) batchFirst() uint64 {
	return h.index - uint64(h.batchPos)
}

// headerReason checks the fields an encoder controls; "" means valid.
func headerReason(h frameHeader) string {
	switch {
	case h.index == 0:
		return "index is zero"
	case h.batchLen == 0 || h.batchLen > MaxBatchEntries:
		return fmt.Sprintf("batch length %d outside [1, %d]", h.batchLen, MaxBatchEntries)
	case h.batchPos >= h.batchLen:
		return fmt.Sprintf("batch position %d not below batch length %d", h.batchPos, h.batchLen)
	case uint64(h.batchPos) >= h.index:
		return fmt.Sprintf("batch position %d puts the batch start before index 1", h.batchPos)
	}
	return ""
}

// appendFrame appends the frame of one entry to dst. The caller has validated the payload size
// and the header; a violation here is a bug in this package, so it panics.
func appendFrame(dst []byte, h frameHeader, payload []byte) []byte {
	assert(headerReason(h) == "", "wal: appendFrame: invalid header")
	assert(len(payload) >= 1 && len(payload) <= MaxPayloadBytes, "wal: appendFrame: payload size out of range")
	start := len(dst)
	dst = append(dst, make([]byte, frameHeaderSize)...)
	hdr := dst[start:]
	hdr[offVersion] = frameVersion
	hdr[offKind] = kindCommand
	binary.LittleEndian.PutUint64(hdr[offIndex:], h.index)
	binary.LittleEndian.PutUint32(hdr[offBatchPos:], h.batchPos)
	binary.LittleEndian.PutUint32(hdr[offBatchLen:], h.batchLen)
	binary.LittleEndian.PutUint32(hdr[offLength:], uint32(len(payload)))
	dst = append(dst, payload...)
	crc := crc32.Checksum(dst[start+offVersion:], castagnoli)
	binary.LittleEndian.PutUint32(dst[start+offCRC:], crc)
	return dst
}

// decodeFrame validates one frame and returns its header and payload (aliasing frame). reason
// is "" for a valid frame, otherwise it says what is wrong. The cheap field checks run before
// the checksum because Open runs this at every byte offset of a damaged tail.
func decodeFrame(frame []byte) (h frameHeader, payload []byte, reason string) {
	if len(frame) == 0 {
		return h, nil, "zero-length entry"
	}
	if len(frame) < frameHeaderSize {
		return h, nil, fmt.Sprintf("entry of %d bytes is shorter than the %d-byte header", len(frame), frameHeaderSize)
	}
	if v := frame[offVersion]; v != frameVersion {
		return h, nil, fmt.Sprintf("format version %d, want %d", v, frameVersion)
	}
	if k := frame[offKind]; k != kindCommand {
		return h, nil, fmt.Sprintf("unknown kind %d", k)
	}
	if frame[offReserved] != 0 || frame[offReserved+1] != 0 {
		return h, nil, "reserved bytes are not zero"
	}
	h = frameHeader{
		index:    binary.LittleEndian.Uint64(frame[offIndex:]),
		batchPos: binary.LittleEndian.Uint32(frame[offBatchPos:]),
		batchLen: binary.LittleEndian.Uint32(frame[offBatchLen:]),
	}
	if r := headerReason(h); r != "" {
		return h, nil, r
	}
	n := binary.LittleEndian.Uint32(frame[offLength:])
	if int64(n) != int64(len(frame)-frameHeaderSize) {
		return h, nil, fmt.Sprintf("payload length field %d, entry holds %d", n, len(frame)-frameHeaderSize)
	}
	if n == 0 || n > MaxPayloadBytes {
		return h, nil, fmt.Sprintf("payload length %d outside [1, %d]", n, MaxPayloadBytes)
	}
	want := binary.LittleEndian.Uint32(frame[offCRC:])
	if got := crc32.Checksum(frame[offVersion:], castagnoli); got != want && !mutant.SkipCRC {
		return h, nil, fmt.Sprintf("checksum %#08x, want %#08x", got, want)
	}
	return h, frame[frameHeaderSize:], ""
}

// nextEntry splits one tidwall binary entry (uvarint length, then the data) off the front of b
// and returns the data and the entry's total size. reason is "" on success.
func nextEntry(b []byte) (data []byte, size int, reason string) {
	n, k := binary.Uvarint(b)
	switch {
	case k == 0:
		return nil, 0, "entry length truncated"
	case k < 0:
		return nil, 0, "entry length overflows 64 bits"
	case n == 0:
		// tidwall, reading a padded log, takes a zero here for the start of the padding.
		return nil, 0, "a zero byte where an entry starts"
	case n > uint64(len(b)-k):
		return nil, 0, fmt.Sprintf("entry of %d bytes runs past the end of the segment", n)
	}
	return b[k : k+int(n)], k + int(n), ""
}

// uvarintLen is the number of bytes binary.PutUvarint uses for x, which tidwall writes before
// every entry and counts in its segment size.
func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// assert panics on a broken invariant of this package. Operating errors are returned instead.
func assert(cond bool, msg string) {
	if !cond {
		panic(msg)
	}
}
