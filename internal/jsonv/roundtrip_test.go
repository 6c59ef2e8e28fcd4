package jsonv

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// reencode decodes b with encoding/json, keeping numbers as text, and
// encodes the result again: what a client that reads and rewrites a value
// would send back.
func reencode(b []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// checkRoundTrip checks that a value Validate accepted survives
// encoding/json: it is valid there too, and decoding and re-encoding it
// loses no member and changes no string, which is to say the canonical
// forms agree.
func checkRoundTrip(t *testing.T, in []byte) {
	t.Helper()
	if !json.Valid(in) {
		t.Fatalf("encoding/json refuses %q, which Validate accepted", in)
	}
	again, err := reencode(in)
	if err != nil {
		t.Fatalf("encoding/json cannot decode %q: %v", in, err)
	}
	want, err := Canonical(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Canonical(nil, again)
	if err != nil {
		t.Fatalf("Validate refuses encoding/json's output %q: %v", again, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("value changed through encoding/json:\n in %q\nout %q", want, got)
	}
}

func TestAcceptedValuesRoundTripThroughEncodingJSON(t *testing.T) {
	for _, tc := range acceptCases {
		t.Run(tc.name, func(t *testing.T) { checkRoundTrip(t, []byte(tc.in)) })
	}
	t.Run("random values", func(t *testing.T) {
		for seed := range uint64(2000) {
			rng := rand.New(rand.NewPCG(seed, 2))
			checkRoundTrip(t, render(rng, genValue(rng, 5)))
		}
	})
}

// TestRefusedHazardsWouldNotRoundTrip shows why each round-trip rule
// exists: encoding/json accepts these values, and hands back something
// else.
func TestRefusedHazardsWouldNotRoundTrip(t *testing.T) {
	cases := []struct{ name, in string }{
		{"duplicate key", `{"a":1,"a":2}`},
		{"duplicate key through an escape", `{"a":1,"\u0061":2}`},
		{"lone high surrogate", `"\ud800"`},
		{"lone low surrogate", `"\udc00"`},
		{"invalid UTF-8", "\"\xff\""},
		{"UTF-8-encoded surrogate", "\"\xed\xa0\x80\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if Validate([]byte(tc.in)) == nil {
				t.Fatalf("Validate accepts %q", tc.in)
			}
			if !json.Valid([]byte(tc.in)) {
				t.Fatalf("encoding/json refuses %q, so the rule guards nothing there", tc.in)
			}
			again, err := reencode([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(again, []byte(tc.in)) {
				t.Fatalf("%q came back unchanged", tc.in)
			}
			t.Logf("%q came back as %q", tc.in, again)
		})
	}
}
