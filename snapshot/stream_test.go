package snapshot

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"testing/iotest"
)

func TestEncodeWritesTheBytesOfASnapshotFile(t *testing.T) {
	st := sampleState(t, 200)
	h := Header{Index: 7, Clock: st.Meta().Now, Records: uint64(st.Len())}
	info, err := Write(t.TempDir(), st, h, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(info.Path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Encode(&b, st, h); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), file) {
		t.Fatalf("Encode wrote %d bytes that differ from the %d-byte file Write made", b.Len(), len(file))
	}
}

func TestDecodeReadsBackWhatEncodeWrote(t *testing.T) {
	st := sampleState(t, 300)
	h := Header{Index: 42, Clock: st.Meta().Now, Records: uint64(st.Len())}
	var b bytes.Buffer
	if err := Encode(&b, st, h); err != nil {
		t.Fatal(err)
	}
	readers := []struct {
		name string
		r    func([]byte) io.Reader
	}{
		{"whole", func(b []byte) io.Reader { return bytes.NewReader(b) }},
		{"one byte at a time", func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
		{"half reads", func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) }},
		{"EOF with the last data", func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) }},
	}
	for _, rd := range readers {
		t.Run(rd.name, func(t *testing.T) {
			got, gh, err := Decode(rd.r(b.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if gh != h {
				t.Fatalf("header = %+v, want %+v", gh, h)
			}
			if !bytes.Equal(encoded(t, st), encoded(t, got)) {
				t.Fatal("the state decoded differs from the state encoded")
			}
		})
	}
}

func TestDecodeRefusesEveryCorruption(t *testing.T) {
	st := sampleState(t, 50)
	var b bytes.Buffer
	if err := Encode(&b, st, Header{Index: 1, Clock: st.Meta().Now, Records: uint64(st.Len())}); err != nil {
		t.Fatal(err)
	}
	good := b.Bytes()
	for i := 0; i < len(good); i += 1 + i/64 {
		bad := bytes.Clone(good)
		bad[i] ^= 0x40
		if _, _, err := Decode(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: err = %v, want ErrCorrupt", i, err)
		}
	}
	for n := 0; n < len(good); n += 1 + n/16 {
		if _, _, err := Decode(bytes.NewReader(good[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut to %d bytes: err = %v, want ErrCorrupt", n, err)
		}
	}
	if _, _, err := Decode(bytes.NewReader(append(bytes.Clone(good), 0))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a byte after the checksum: err = %v, want ErrCorrupt", err)
	}
}

func TestDecodeReportsAReadErrorAsSuch(t *testing.T) {
	st := sampleState(t, 50)
	var b bytes.Buffer
	if err := Encode(&b, st, Header{Index: 1, Clock: st.Meta().Now, Records: uint64(st.Len())}); err != nil {
		t.Fatal(err)
	}
	failing := errors.New("network went away")
	for _, n := range []int{0, 10, b.Len() / 2, b.Len() - 2} {
		r := io.MultiReader(bytes.NewReader(b.Bytes()[:n]), iotest.ErrReader(failing))
		if _, _, err := Decode(r); !errors.Is(err, failing) || errors.Is(err, ErrCorrupt) {
			t.Errorf("read failing after %d bytes: err = %v, want the read error, not ErrCorrupt", n, err)
		}
	}
}
