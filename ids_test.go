package execstore_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// A generated ID is a ULID: 26 characters of Crockford's base32, the first
// ten the time. Should a caller have chosen the very string the store
// generates, the state machine derives an unused ID from it: a generated ID
// never conflicts, and a restart replays the same choice.
func TestAGeneratedIDNeverConflictsWithACallersChoice(t *testing.T) {
	seeded := func() execstore.Options {
		return execstore.Options{NoSync: true, Now: func() time.Time { return t0 }, IDRand: rand.NewChaCha8([32]byte{7})}
	}
	// A first store tells which ID the seed generates first.
	first, err := execstore.Open(t.TempDir(), seeded())
	if err != nil {
		t.Fatal(err)
	}
	generated, err := first.Admit(ctx, execstore.AdmitRequest{WorkflowID: "w"})
	first.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`).MatchString(generated) {
		t.Fatalf("generated ID %q is not a ULID", generated)
	}
	var ms int64
	for _, c := range generated[:10] {
		ms = ms<<5 | int64(strings.IndexRune(crockford, c))
	}
	if ms != t0.UnixMilli() {
		t.Fatalf("generated ID %q carries the time %d ms, want the clock's %d", generated, ms, t0.UnixMilli())
	}

	f := newFixture(t)
	f.s.Close()
	f.opts = seeded()
	f.open()
	f.admit(execstore.AdmitRequest{ExecutionID: generated, WorkflowID: "chosen"}) // draws no random bits
	id := f.admit(execstore.AdmitRequest{WorkflowID: "w"})
	if id == generated {
		t.Fatalf("the generated ID %q is the caller's", id)
	}
	for _, reopen := range []bool{false, true} {
		if reopen {
			f.reopen()
		}
		if rec := f.get(generated); rec.WorkflowID != "chosen" {
			t.Fatalf("reopened %v: the caller's %q is %+v", reopen, generated, rec)
		}
		if rec := f.get(id); rec.WorkflowID != "w" {
			t.Fatalf("reopened %v: the generated %q is %+v", reopen, id, rec)
		}
	}
}
