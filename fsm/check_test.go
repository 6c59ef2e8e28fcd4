package fsm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
)

// decodeAndCheck runs both readers of a state encoding over b.
// Each reads the input followed by a trailer: both must stop at the same
// byte (on a valid encoding, just before the trailer).
func decodeAndCheck(t *testing.T, b []byte) (decoded *State, decodeErr error, sum StateSummary, checkErr error) {
	t.Helper()
	in := append(append([]byte(nil), b...), "trailer"...)
	r := bufio.NewReader(bytes.NewReader(in))
	decoded, decodeErr = DecodeState(r)
	decodeRest, _ := io.ReadAll(r)
	for i, size := range []int{16, 4096} { // a buffer smaller than some strings, and the default
		r := bufio.NewReaderSize(bytes.NewReader(in), size)
		s, err := CheckState(r)
		if i == 0 {
			sum, checkErr = s, err
		} else if (err == nil) != (checkErr == nil) || s != sum {
			t.Fatalf("CheckState with buffers of 16 and 4096 bytes: %v %+v, %v %+v", checkErr, sum, err, s)
		}
		if rest, _ := io.ReadAll(r); err == nil && decodeErr == nil && !bytes.Equal(rest, decodeRest) {
			t.Fatalf("CheckState (buffer %d) left %q unread, DecodeState %q", size, rest, decodeRest)
		}
	}
	return decoded, decodeErr, sum, checkErr
}

// agree fails the test unless CheckState accepts exactly what DecodeState
// accepts, and reports the summary of the state DecodeState builds.
func agree(t *testing.T, what string, b []byte) bool {
	t.Helper()
	decoded, derr, sum, cerr := decodeAndCheck(t, b)
	switch {
	case (derr == nil) != (cerr == nil):
		t.Fatalf("%s: DecodeState says %v, CheckState says %v", what, derr, cerr)
	case cerr != nil && !errors.Is(cerr, ErrDecode):
		t.Fatalf("%s: CheckState's error does not wrap ErrDecode: %v", what, cerr)
	case derr == nil && sum != decoded.Summary():
		t.Fatalf("%s: CheckState's summary %+v, the decoded state's %+v", what, sum, decoded.Summary())
	}
	return derr == nil
}

// CheckState accepts what DecodeState accepts and refuses what it refuses,
// and reports the decoded state's summary: on random states, on every
// truncation, and on every one-byte change of an encoding.
func TestCheckStateAgreesWithDecodeState(t *testing.T) {
	for seed := uint64(1); seed <= seeds(40); seed++ {
		s := randomState(seed, 400)
		b := encodeState(t, s)
		if !agree(t, "random state", b) {
			t.Fatalf("seed %d: the encoding of a state does not decode", seed)
		}
		if sum, _ := CheckState(bufio.NewReader(bytes.NewReader(b))); sum != s.Summary() {
			t.Fatalf("seed %d: summary %+v, the state's %+v", seed, sum, s.Summary())
		}
	}
	b := encodeState(t, randomState(7, 200))
	for n := 0; n < len(b); n++ {
		agree(t, "truncation", b[:n])
	}
	r := bufio.NewReaderSize(bytes.NewReader(append(b, "trailer"...)), 16)
	if _, err := CheckState(r); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "trailer" {
		t.Fatalf("CheckState left %q after a valid state, want the trailer", rest)
	}
	accepted := 0
	mutated := append([]byte(nil), b...)
	for i := range b {
		for _, v := range []byte{0, 1, 2, 0x7f, 0x80, 0xff, b[i] ^ 1, b[i] + 1} {
			mutated[i] = v
			if agree(t, "one-byte change", mutated) {
				accepted++
			}
		}
		mutated[i] = b[i]
	}
	if accepted == 0 {
		t.Fatal("no changed encoding decoded: the changes never reach the value checks")
	}
	v1, err := os.ReadFile("testdata/state-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	if !agree(t, "version 1", v1) {
		t.Fatal("the version 1 state does not decode")
	}
	// Version 2 has no change log: both readers derive the same sequence.
	v2, err := os.ReadFile("testdata/state-v2.bin")
	if err != nil {
		t.Fatal(err)
	}
	if !agree(t, "version 2", v2) {
		t.Fatal("the version 2 state does not decode")
	}
}

func FuzzCheckState(f *testing.F) {
	f.Add(encodeState(f, New()))
	f.Add(encodeState(f, randomState(1, 50)))
	f.Add(encodeState(f, randomState(2, 150)))
	for _, name := range []string{"testdata/state-v1.bin", "testdata/state-v2.bin"} {
		if old, err := os.ReadFile(name); err == nil {
			f.Add(old)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) { agree(t, "fuzzed input", b) })
}

// byteReader hides bufio.Reader's Peek, so that the decoders take their
// byte-by-byte path.
type byteReader struct{ r *bufio.Reader }

func (b byteReader) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b byteReader) ReadByte() (byte, error)    { return b.r.ReadByte() }

// The decoders read varints from a buffered reader's buffer in one step, and
// byte by byte from any other reader: both paths accept and refuse exactly
// the same inputs, and decode the same values.
func TestVarintPathsAgree(t *testing.T) {
	b := encodeState(t, randomState(9, 300))
	inputs := [][]byte{b}
	for n := 0; n < len(b); n += 1 + n/100 {
		inputs = append(inputs, b[:n])
	}
	for _, v := range [][]byte{{0x80}, {0x80, 0x00}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, {0xff, 0xff, 0xff}} {
		inputs = append(inputs, append([]byte{StateVersion}, v...))
	}
	for i, in := range inputs {
		s1, err1 := DecodeState(bufio.NewReader(bytes.NewReader(in)))
		s2, err2 := DecodeState(byteReader{bufio.NewReader(bytes.NewReader(in))})
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("input %d: buffered %v, byte by byte %v", i, err1, err2)
		}
		if err1 == nil && s1.Summary() != s2.Summary() {
			t.Fatalf("input %d: buffered %+v, byte by byte %+v", i, s1.Summary(), s2.Summary())
		}
	}
}
