package jsonv

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
)

func addSeeds(f *testing.F, add func([]byte)) {
	for _, tc := range acceptCases {
		add([]byte(tc.in))
	}
	for _, tc := range rejectCases {
		if len(tc.in) < 4096 {
			add([]byte(tc.in))
		}
	}
	for _, tc := range canonicalCases {
		add([]byte(tc.in))
	}
	add(params10KiB)
}

// fuzzValidator is reused across fuzz inputs so that scratch left by one
// input is exercised by the next. Fuzz inputs run one at a time.
var fuzzValidator Validator

// FuzzValidate holds Validate against the reference parser and
// encoding/json, and checks the canonical form of every accepted input.
func FuzzValidate(f *testing.F) {
	addSeeds(f, func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, in []byte) {
		err := Validate(in)
		if verr := fuzzValidator.Validate(in); (verr == nil) != (err == nil) ||
			err != nil && verr.Error() != err.Error() {
			t.Fatalf("Validator.Validate = %v, Validate = %v", verr, err)
		}
		tree, refErr := refParse(in, DefaultMaxDepth)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("Validate(%q) = %v, reference says %v", in, err, refErr)
		}
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(in) || e.Reason == "" {
				t.Fatalf("Validate(%q) = %#v, want an *Error within the input", in, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("Validate accepts %q, encoding/json does not", in)
		}
		isObject := tree.kind == 'o'
		if oerr := ValidateObject(in); (oerr == nil) != isObject {
			t.Fatalf("ValidateObject(%q) = %v for kind %c", in, oerr, tree.kind)
		}
		canon, err := Canonical(nil, in)
		if err != nil {
			t.Fatalf("Canonical(%q): %v", in, err)
		}
		if want := refCanonical(tree); string(canon) != want {
			t.Fatalf("Canonical(%q)\n got %q\nwant %q", in, canon, want)
		}
		if err := Validate(canon); err != nil {
			t.Fatalf("canonical form %q refused: %v", canon, err)
		}
		again, err := fuzzValidator.Canonical(nil, canon)
		if err != nil || !bytes.Equal(again, canon) {
			t.Fatalf("Canonical(%q) = %q, %v; want a fixed point", canon, again, err)
		}
	})
}

// FuzzCanonical checks that re-spelling an accepted value (member order,
// whitespace, string escapes, chosen by seed) or passing it through
// encoding/json leaves its canonical form unchanged.
func FuzzCanonical(f *testing.F) {
	addSeeds(f, func(b []byte) { f.Add(b, uint64(len(b))) })
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		want, err := Canonical(nil, in)
		if err != nil {
			return
		}
		tree, err := refParse(in, DefaultMaxDepth)
		if err != nil {
			t.Fatalf("reference refuses %q: %v", in, err)
		}
		rng := rand.New(rand.NewPCG(seed, 3))
		respelled := render(rng, tree)
		got, err := Canonical(nil, respelled)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Canonical(%q) = %q, %v; Canonical(%q) = %q", respelled, got, err, in, want)
		}
		checkRoundTrip(t, in)
	})
}
