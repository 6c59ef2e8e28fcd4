package replica

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/raft"
)

func sampleLogs() []raft.Log {
	return []raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte("command")},
		{Index: 2, Term: 1, Type: raft.LogNoop},
		{Index: 3, Term: 7, Type: raft.LogConfiguration, Data: []byte{0, 1, 2}, Extensions: []byte("ext"),
			AppendedAt: time.Unix(1_700_000_000, 123456789)},
		{Index: 1 << 40, Term: 1<<64 - 1, Type: raft.LogBarrier, AppendedAt: time.Unix(-5, 1)},
		{Index: 9, Term: 2, Type: raft.LogType(200), Data: make([]byte, 70_000)},
	}
}

// logOpts compares logs by value: AppendedAt by instant (decoding drops the location and
// the monotonic reading), empty and nil slices alike.
var logOpts = cmp.Options{cmpopts.EquateEmpty(), cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })}

func TestEntryRoundTripsEveryField(t *testing.T) {
	for _, want := range sampleLogs() {
		var got raft.Log
		if err := decodeEntry(want.Index, appendEntry(nil, &want), &got); err != nil {
			t.Fatalf("log %d: %v", want.Index, err)
		}
		if diff := cmp.Diff(want, got, logOpts); diff != "" {
			t.Fatalf("log %d round trip (-want +got):\n%s", want.Index, diff)
		}
	}
}

func TestEntryDecodeRefusesEveryDamage(t *testing.T) {
	l := sampleLogs()[2]
	good := appendEntry(nil, &l)
	tests := []struct {
		name    string
		payload []byte
	}{
		{"empty", nil},
		{"unknown version", append([]byte{2}, good[1:]...)},
		{"version zero", append([]byte{0}, good[1:]...)},
		{"unknown flag", append([]byte{1, good[1], 3}, good[3:]...)},
		{"a byte after the extensions", append(append([]byte{}, good...), 0)},
		{"data length past the end", []byte{1, 0, 0, 1, 0xff, 0xff, 0x03}},
		{"term overflows", []byte{1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	}
	for n := range len(good) {
		tests = append(tests, struct {
			name    string
			payload []byte
		}{"cut to " + string(rune('0'+n%10)), good[:n]})
	}
	for _, tt := range tests {
		var got raft.Log
		got.Term = 99
		if err := decodeEntry(5, tt.payload, &got); !errors.Is(err, ErrCorruptEntry) {
			t.Errorf("%s: err = %v, want ErrCorruptEntry", tt.name, err)
		}
		if diff := cmp.Diff(raft.Log{Index: 5}, got, logOpts); diff != "" {
			t.Errorf("%s: a refused payload filled the log:\n%s", tt.name, diff)
		}
	}
}

func FuzzEntryDecode(f *testing.F) {
	for _, l := range sampleLogs() {
		f.Add(appendEntry(nil, &l))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := decodeEntry(3, b, &l); err != nil {
			return
		}
		// What decodes re-encodes to the same bytes: the layout has one encoding per log.
		if again := appendEntry(nil, &l); string(again) != string(b) {
			t.Fatalf("decoded %x, re-encoded %x", b, again)
		}
	})
}
