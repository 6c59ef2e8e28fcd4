package execstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/snapshot"
	"github.com/google/go-cmp/cmp"
)

// A torn write at the end of the log is cut off at Open: the bytes are kept
// in a torn-*.bin side file and the cut is logged, and every whole entry
// before them is kept.
func TestATornTailIsCutKeptInASideFileAndLogged(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"a", "b"} {
		f.admit(execstore.AdmitRequest{ExecutionID: id, WorkflowID: "w"})
	}
	f.s.Close()
	f.s = nil
	seg := lastSegment(t, filepath.Join(f.dir, "wal"))
	torn := bytes.Repeat([]byte{0x5a}, 100) // what a write cut short left
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seg, append(data, torn...), 0o640); err != nil {
		t.Fatal(err)
	}

	logs := &logRecorder{}
	f.opts.Logger = slog.New(logs)
	f.open()
	f.get("a")
	f.get("b")
	sides, _ := filepath.Glob(filepath.Join(f.dir, "wal", "torn-*.bin"))
	if len(sides) != 1 {
		t.Fatalf("side files %v, want one", sides)
	}
	if kept, _ := os.ReadFile(sides[0]); !bytes.Equal(kept, torn) {
		t.Fatalf("the side file holds %d bytes, want the %d torn ones", len(kept), len(torn))
	}
	logged := false
	for _, l := range logs.about("torn") {
		logged = logged || l.attrs["side_file"].String() == filepath.Base(sides[0])
	}
	if !logged {
		t.Fatalf("no log line names the side file %s", filepath.Base(sides[0]))
	}
	f.admit(execstore.AdmitRequest{ExecutionID: "c", WorkflowID: "w"})
	f.reopen()
	for _, id := range []string{"a", "b", "c"} {
		f.get(id)
	}
}

// The background check after Open reads the older kept snapshot too, not
// only the log between the two: damage there is found and reported, and the
// snapshot the store then takes leaves the damaged file unneeded (it is
// pruned), all without losing anything.
func TestADamagedOlderSnapshotIsFoundAfterOpen(t *testing.T) {
	f, older, _ := fallbackFixture(t)
	want := func() map[string]any {
		f.open()
		defer func() { f.s.Close(); f.s = nil }()
		return f.everything()
	}()
	olderName := fmt.Sprintf("snapshot-%020d.snap", older)
	path := filepath.Join(f.dir, "snapshots", olderName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o640); err != nil {
		t.Fatal(err)
	}

	f.open()
	st := f.waitFallbackChecked()
	if !errors.Is(st.FallbackErr, snapshot.ErrCorrupt) || !strings.Contains(st.FallbackErr.Error(), olderName) {
		t.Fatalf("FallbackErr = %v, want the older snapshot %s reported corrupt", st.FallbackErr, olderName)
	}
	if diff := cmp.Diff(want, f.everything()); diff != "" {
		t.Fatalf("state (-want +got):\n%s", diff)
	}
	eventually(t, "the damaged "+olderName+" is pruned", func() bool {
		return !slices.Contains(snapshotFiles(t, f.dir), olderName)
	})
	f.reopen()
	if st := f.waitFallbackChecked(); st.FallbackErr != nil {
		t.Fatalf("after the repairing snapshot: FallbackErr = %v", st.FallbackErr)
	}
	if diff := cmp.Diff(want, f.everything()); diff != "" {
		t.Fatalf("state after reopening (-want +got):\n%s", diff)
	}
}
