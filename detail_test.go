package execstore_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/execstore/execstore"
)

// Detail lists an execution's saved steps in key order, up to the limit
// asked, with their count, and its watches.
func TestDetailListsSavedStepsAndWatches(t *testing.T) {
	f := newFixture(t)
	id := f.admit(execstore.AdmitRequest{ExecutionID: "e", WorkflowID: "w"})
	l := f.claimOne(id)
	for _, k := range []string{"b", "a", "c"} {
		if err := f.s.SaveStep(ctx, l, k, raw(`"`+k+`"`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.s.Watch(ctx, id, "k1", "k2"); err != nil {
		t.Fatal(err)
	}
	d, err := f.s.Detail(ctx, id, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Steps) != 2 || d.Steps[0].Key != "a" || string(d.Steps[1].Value) != `"b"` || d.StepCount != 3 ||
		len(d.Watches) != 1 || !slices.Equal(d.Watches[0], []string{"k1", "k2"}) {
		t.Fatalf("Detail: %+v", d)
	}
	if _, err := f.s.Detail(ctx, "missing", 10); !errors.Is(err, execstore.ErrExecutionNotFound) {
		t.Fatalf("Detail of a missing execution: %v", err)
	}
}
