package wal

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"path/filepath"
	"testing"
)

func validFrame() []byte {
	return appendFrame(nil, frameHeader{index: 9, batchPos: 2, batchLen: 4}, []byte("payload"))
}

// reseal recomputes the checksum so that a test reaches the check after it.
func reseal(f []byte) []byte {
	binary.LittleEndian.PutUint32(f, crc32.Checksum(f[offVersion:], castagnoli))
	return f
}

func TestDecodeFrameRejectsEveryInvalidField(t *testing.T) {
	tests := []struct {
		name   string
		mangle func(f []byte) []byte
	}{
		{"zero-length entry", func([]byte) []byte { return nil }},
		{"shorter than the header", func(f []byte) []byte { return f[:frameHeaderSize-1] }},
		{"header without payload", func(f []byte) []byte {
			f = f[:frameHeaderSize]
			binary.LittleEndian.PutUint32(f[offLength:], 0)
			return reseal(f)
		}},
		{"all zeros", func(f []byte) []byte { return make([]byte, len(f)) }},
		{"version 0", func(f []byte) []byte { f[offVersion] = 0; return reseal(f) }},
		{"version 2", func(f []byte) []byte { f[offVersion] = 2; return reseal(f) }},
		{"kind 0", func(f []byte) []byte { f[offKind] = 0; return reseal(f) }},
		{"kind 2", func(f []byte) []byte { f[offKind] = 2; return reseal(f) }},
		{"reserved set", func(f []byte) []byte { f[offReserved+1] = 1; return reseal(f) }},
		{"index zero", func(f []byte) []byte { binary.LittleEndian.PutUint64(f[offIndex:], 0); return reseal(f) }},
		{"batch length zero", func(f []byte) []byte { binary.LittleEndian.PutUint32(f[offBatchLen:], 0); return reseal(f) }},
		{"batch length over the limit", func(f []byte) []byte {
			binary.LittleEndian.PutUint32(f[offBatchLen:], MaxBatchEntries+1)
			return reseal(f)
		}},
		{"position not below length", func(f []byte) []byte { binary.LittleEndian.PutUint32(f[offBatchPos:], 4); return reseal(f) }},
		{"batch starting before index 1", func(f []byte) []byte {
			binary.LittleEndian.PutUint64(f[offIndex:], 2)
			return reseal(f)
		}},
		{"payload length too big", func(f []byte) []byte { binary.LittleEndian.PutUint32(f[offLength:], 8); return reseal(f) }},
		{"payload length too small", func(f []byte) []byte { binary.LittleEndian.PutUint32(f[offLength:], 6); return reseal(f) }},
		{"payload bit flipped", func(f []byte) []byte { f[len(f)-1] ^= 1; return f }},
		{"checksum bit flipped", func(f []byte) []byte { f[0] ^= 1; return f }},
		{"trailing byte", func(f []byte) []byte { return append(f, 0) }},
	}
	if _, _, reason := decodeFrame(validFrame()); reason != "" {
		t.Fatalf("the valid frame is rejected: %s", reason)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, reason := decodeFrame(tt.mangle(validFrame())); reason == "" {
				t.Fatal("decodeFrame accepted an invalid frame")
			}
		})
	}
}

func TestZeroLengthTidwallEntryIsNeverValid(t *testing.T) {
	// Upstream tidwall reads a zero byte as an entry of length zero; a padded log reads it as
	// the start of the padding. Either way it is never an entry of this package.
	if data, size, reason := nextEntry([]byte{0, 0, 0}); reason == "" {
		t.Fatalf("nextEntry(zeros) = %d bytes, size %d; want no entry", len(data), size)
	}
	if _, _, reason := decodeFrame(nil); reason == "" {
		t.Fatal("a zero-length entry decoded as a frame")
	}
	// Zeros to the end of the segment are padding; zeros with anything after them are not.
	if scan := scanSegment(make([]byte, 64), 1); scan.cut != 0 || scan.reason != "" {
		t.Fatalf("scanSegment(zeros) = %+v, want padding from offset 0", scan)
	}
	if scan := scanSegment(append(make([]byte, 64), 1), 1); scan.cut != 0 || scan.reason == "" {
		t.Fatalf("scanSegment(zeros, then 1) = %+v, want a bad entry at offset 0", scan)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	f.Add(validFrame())
	f.Add(appendFrame(nil, frameHeader{index: 1, batchPos: 0, batchLen: 1}, []byte{0}))
	f.Add(appendFrame(nil, frameHeader{index: 1 << 40, batchPos: 7, batchLen: 8}, bytes.Repeat([]byte("x"), 300)))
	f.Add([]byte{})
	f.Add(make([]byte, 40))
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Accept only what the encoder produces: a decoded frame re-encodes to the same bytes.
		if h, payload, reason := decodeFrame(data); reason == "" {
			if again := appendFrame(nil, h, payload); !bytes.Equal(again, data) {
				t.Fatalf("decoded frame re-encodes differently:\n got %x\nwant %x", again, data)
			}
		}
		// Round trip: any payload the encoder takes comes back unchanged.
		if len(data) == 0 || len(data) > MaxPayloadBytes {
			return
		}
		h := frameHeader{index: uint64(len(data)) + 5, batchPos: uint32(len(data) % 5), batchLen: 5}
		frame := appendFrame(nil, h, data)
		gotH, payload, reason := decodeFrame(frame)
		if reason != "" || gotH != h || !bytes.Equal(payload, data) {
			t.Fatalf("round trip: %+v %x %q; want %+v %x", gotH, payload, reason, h, data)
		}
	})
}

// FuzzOpenRepairsAnyTail appends arbitrary bytes to a clean log. Open must not panic and must
// never lose an entry of an earlier batch: it either cuts a torn tail or refuses with a
// *CorruptionError (fair when the bytes forge a valid entry of a later batch).
func FuzzOpenRepairsAnyTail(f *testing.F) {
	base, want := cleanLog(f, sizes(2, 20), sizes(3, 20))
	name := filepath.Base(lastSegment(f, base))
	clean := readFile(f, filepath.Join(base, name))
	next := func(index uint64, pos, n uint32) []byte {
		frame := appendFrame(nil, frameHeader{index: index, batchPos: pos, batchLen: n}, []byte("next"))
		return append(binary.AppendUvarint(nil, uint64(len(frame))), frame...)
	}
	f.Add([]byte{})
	f.Add(make([]byte, 100))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add(next(6, 0, 1))
	f.Add(append(next(6, 0, 2), 1, 2, 3))
	f.Add(append([]byte{40, 1, 1}, next(7, 1, 2)...))
	f.Add(append([]byte{40, 1, 1}, next(9, 0, 1)...))
	f.Fuzz(func(t *testing.T, tail []byte) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, name), append(bytes.Clone(clean), tail...))
		l, err := Open(dir, Options{NoSync: true})
		if err != nil {
			if !IsCorruption(err) {
				t.Fatalf("Open = %v, want success or a *CorruptionError", err)
			}
			if got := readFile(t, filepath.Join(dir, name)); !bytes.HasPrefix(got, clean) {
				t.Fatal("a refused open changed the clean entries")
			}
			return
		}
		defer l.Close()
		got := replayAll(t, l)
		if len(got) < len(want) {
			t.Fatalf("%d entries after repair, want at least %d", len(got), len(want))
		}
		for i, e := range want {
			if got[i].Index != e.Index || !bytes.Equal(got[i].Payload, e.Payload) {
				t.Fatalf("entry %d changed by the repair", e.Index)
			}
		}
	})
}
