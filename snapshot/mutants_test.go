//go:build mutants

package snapshot

import (
	"errors"
	"fmt"
	"testing"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/mutant"
	"github.com/execstore/execstore/vfs"
)

// Tests that turn on a switch of internal/mutant, which is a variable only in
// builds with the mutants tag: they run with `go test -tags mutants`.

// Check decodes the whole state of a snapshot just written: a file whose
// checksum is right but whose state the encoder got wrong is refused, where
// Verify (the checksum alone) accepts it.
func TestCheckCatchesAnEncoderBugTheChecksumCannot(t *testing.T) {
	dir := t.TempDir()
	st := fsm.New()
	for i := range 5 {
		st.Apply(&fsm.Command{Kind: fsm.KindAdmit, Now: int64(1 + i), ExecutionID: fmt.Sprint("e", i), WorkflowID: "w"})
	}
	h := Header{Index: 5, Clock: st.Meta().Now, Records: uint64(st.Len())}
	good, err := Write(dir, st, h, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(vfs.Default, good.Path, h, st); err != nil {
		t.Fatalf("Check of a good snapshot: %v", err)
	}
	if err := Check(vfs.Default, good.Path, Header{Index: 6, Clock: h.Clock, Records: h.Records}, st); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check against another index: %v, want ErrCorrupt", err)
	}
	reset := mutant.Set(&mutant.EncodeSkipsLastRecord)
	h.Index = 7
	bad, err := Write(dir, st, h, Options{NoSync: true})
	reset()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(vfs.Default, bad.Path); err != nil {
		t.Fatalf("Verify: %v; the checksum of a wrong state is still right", err)
	}
	if err := Check(vfs.Default, bad.Path, h, st); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check of a snapshot missing a record: %v, want ErrCorrupt", err)
	}
}
