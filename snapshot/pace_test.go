package snapshot

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/vfs"
)

// Writing a snapshot and reading a new one back (Check) are both paced: each
// pauses after every chunk of at most 128 KiB, so that the encoder and the
// read-back each keep to a fraction of a core. Time.Sleep pauses at least as
// long as asked, so the bound below holds however busy the machine is.
func TestWriteAndCheckArePacedAlike(t *testing.T) {
	// Few records with large params: decoding them takes far less time than
	// the pauses, so only pacing makes the bound hold.
	st := fsm.New()
	params := `{"p":"` + strings.Repeat("p", 64<<10) + `"}`
	for i := range 200 {
		st.Apply(&fsm.Command{Kind: fsm.KindAdmit, Now: 1, ExecutionID: fmt.Sprint("e", i), WorkflowID: "w", Params: params, HasParams: true})
	}
	h := Header{Index: 1, Clock: st.Meta().Now, Records: uint64(st.Len())}
	start := time.Now()
	info, err := Write(t.TempDir(), st, h, Options{NoSync: true})
	wrote := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(info.Path)
	if err != nil {
		t.Fatal(err)
	}
	chunks := fi.Size() / (128 << 10)
	if chunks < 4 {
		t.Fatalf("test premise: a snapshot of %d bytes is too small to show pacing", fi.Size())
	}
	start = time.Now()
	if err := Check(vfs.Default, info.Path, h, st); err != nil {
		t.Fatal(err)
	}
	checked := time.Since(start)
	least := time.Duration(chunks) * snapshotPause
	t.Logf("%d bytes written in %v and checked in %v", fi.Size(), wrote, checked)
	if wrote < least || checked < least {
		t.Fatalf("%d bytes written in %v and checked in %v; paced, each takes at least %v", fi.Size(), wrote, checked, least)
	}
}
