package jsonv

import (
	"math/rand/v2"
	"testing"
)

var canonicalCases = []struct {
	name string
	in   string
	want string
}{
	// Whitespace and member order.
	{"whitespace is dropped", " { \"b\" :\t1 ,\n\"a\" : [ 1 , 2 ] }\r\n", `{"a":[1,2],"b":1}`},
	{"members sorted", `{"c":3,"a":1,"b":2}`, `{"a":1,"b":2,"c":3}`},
	{"sorted members kept", `{"a":1,"b":2}`, `{"a":1,"b":2}`},
	{"array order kept", `[3,1,2]`, `[3,1,2]`},
	{"nested objects sorted at each level",
		`{"b":{"d":1,"c":2},"a":[{"z":1,"y":2}]}`,
		`{"a":[{"y":2,"z":1}],"b":{"c":2,"d":1}}`},
	{"deep unsorted inside sorted",
		`{"a":{"b":{"c":{"z":0,"y":[{"q":1,"p":2}]}}}}`,
		`{"a":{"b":{"c":{"y":[{"p":2,"q":1}],"z":0}}}}`},
	{"empty object", `{ }`, `{}`},
	{"empty array", `[ ]`, `[]`},
	{"empty containers as members", `{"b":[ ],"a":{ }}`, `{"a":{},"b":[]}`},
	{"scalar with surrounding space", " \n 1.50 \t", `1.50`},
	{"more than sixteen members reversed",
		`{"q":17,"p":16,"o":15,"n":14,"m":13,"l":12,"k":11,"j":10,"i":9,"h":8,"g":7,"f":6,"e":5,"d":4,"c":3,"b":2,"a":1}`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17}`},
	// Key order is by unescaped bytes.
	{"escaped key sorts by its meaning", `{"b":1,"\u0061":2}`, `{"a":2,"b":1}`},
	{"prefix sorts first", `{"ab":1,"a":2}`, `{"a":2,"ab":1}`},
	{"empty key sorts first", `{"a":1,"":2}`, `{"":2,"a":1}`},
	{"upper case before lower case", `{"a":1,"B":2}`, `{"B":2,"a":1}`},
	{"escaped quote sorts as 0x22", `{"\"":1,"!":2}`, `{"!":2,"\"":1}`},
	{"escaped backslash sorts as 0x5c", `{"\u005c":1,"[":2}`, `{"[":2,"\\":1}`},
	// UTF-16 order (RFC 8785) would put the emoji before U+FFFF.
	{"non-ASCII keys in UTF-8 byte order",
		`{"😀":4,"\uffff":3,"é":1,"z":0}`,
		"{\"z\":0,\"é\":1,\"\uffff\":3,\"😀\":4}"},
	// Strings.
	{"escaped non-ASCII becomes raw", `"\u00e9"`, `"é"`},
	{"upper-case escape becomes raw", `"\u00C9"`, `"É"`},
	{"escaped slash becomes raw", `"a\/b"`, `"a/b"`},
	{"escaped letter becomes raw", `"\u0041"`, `"A"`},
	{"quote stays escaped", `"\""`, `"\""`},
	{"quote as \\u escape", `"\u0022"`, `"\""`},
	{"backslash stays escaped", `"\\"`, `"\\"`},
	{"backslash as \\u escape", `"\u005C"`, `"\\"`},
	{"short escapes kept", `"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
	{"short escapes from \\u escapes", `"\u0008\u000c\u000A\u000d\u0009"`, `"\b\f\n\r\t"`},
	{"other control characters as lower-case \\u00xx", `"\u001F\u0000\u0001"`, `"\u001f\u0000\u0001"`},
	{"DEL becomes raw", `"\u007f"`, "\"\x7f\""},
	{"surrogate pair becomes raw", `"\ud83d\ude00"`, `"😀"`},
	{"line separator becomes raw", `"\u2028"`, "\"\u2028\""},
	{"HTML characters stay raw", `"<&>"`, `"<&>"`},
	{"raw UTF-8 kept", `"Zoë 😀"`, `"Zoë 😀"`},
	{"escaped keys are re-spelled", `{"\u00e9\/":1}`, `{"é/":1}`},
	// Numbers and literals.
	{"numbers kept as written", `[1.0,1,1e0,-0,1E+2,0.10]`, `[1.0,1,1e0,-0,1E+2,0.10]`},
	{"literals kept", `[true,false,null]`, `[true,false,null]`},
}

func TestCanonicalForms(t *testing.T) {
	for _, tc := range canonicalCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical(nil, []byte(tc.in))
			if err != nil {
				t.Fatalf("Canonical(%q) error: %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Fatalf("Canonical(%q) = %q, want %q", tc.in, got, tc.want)
			}
			again, err := Canonical(nil, got)
			if err != nil || string(again) != tc.want {
				t.Fatalf("Canonical of the canonical form = %q, %v; want it unchanged", again, err)
			}
		})
	}
}

func TestCanonicalAppendsToDst(t *testing.T) {
	dst := []byte("prefix:")
	got, err := Canonical(dst, []byte(`{"b":{"y":1,"x":2},"a":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `prefix:{"a":0,"b":{"x":2,"y":1}}`; string(got) != want {
		t.Fatalf("Canonical = %q, want %q", got, want)
	}
}

func TestCanonicalRefusesInvalidValuesAndLeavesDstAlone(t *testing.T) {
	for _, tc := range rejectCases {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("prefix")
			got, err := Canonical(dst, []byte(tc.in))
			checkError(t, err, tc.offset, tc.reason)
			if string(got) != "prefix" {
				t.Fatalf("Canonical returned %q, want dst unchanged", got)
			}
		})
	}
	_, err := Limits{MaxDepth: 2}.Canonical(nil, []byte(`[[[]]]`))
	checkError(t, err, 2, "nesting depth exceeds the limit of 2")
}

// TestCanonicalIgnoresWhitespaceMemberOrderAndEscaping renders random
// values twice, with different member order, whitespace and string
// spelling, and checks that both give the canonical form the reference
// computes from the tree.
func TestCanonicalIgnoresWhitespaceMemberOrderAndEscaping(t *testing.T) {
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 1))
		tree := genValue(rng, 5)
		want := refCanonical(tree)
		for range 2 {
			in := render(rng, tree)
			got, err := Canonical(nil, in)
			if err != nil {
				t.Fatalf("seed %d: Canonical(%q): %v", seed, in, err)
			}
			if string(got) != want {
				t.Fatalf("seed %d: Canonical(%q)\n got %q\nwant %q", seed, in, got, want)
			}
		}
	}
}

func TestCanonicalOfLargeValueMatchesReference(t *testing.T) {
	tree, err := refParse(params10KiB, DefaultMaxDepth)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Canonical(nil, params10KiB)
	if err != nil {
		t.Fatal(err)
	}
	if want := refCanonical(tree); string(got) != want {
		t.Fatalf("Canonical\n got %q\nwant %q", got, want)
	}
}
