package jsonv

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// acceptCases are values Validate MUST accept. They also seed the fuzz
// tests and the round-trip test.
var acceptCases = []struct {
	name string
	in   string
}{
	{"zero", `0`},
	{"negative zero", `-0`},
	{"integer", `123`},
	{"negative fraction with exponent", `-1.5e+10`},
	{"upper-case exponent", `1E-2`},
	{"zero fraction", `0.0`},
	{"number beyond float64 is kept as text", `1e400`},
	{"integer beyond int64 is kept as text", `12345678901234567890`},
	{"true", `true`},
	{"false", `false`},
	{"null", `null`},
	{"empty string", `""`},
	{"surrounding whitespace", " \t\n\r1 \t\n\r"},
	{"empty array", `[]`},
	{"empty object", `{}`},
	{"empty containers with space inside", `[ { } , [ ] ]`},
	{"nested empty array", `[[]]`},
	{"mixed array", `[1,"a",true,false,null,{"b":[]}]`},
	{"all short escapes", `"\"\\\/\b\f\n\r\t"`},
	{"escaped NUL", `"\u0000"`},
	{"escapes in both cases", `"\u00e9\u00E9"`},
	{"surrogate pair", `"\ud83d\ude00"`},
	{"upper-case surrogate pair", `"\uD83D\uDE00"`},
	{"last code point as surrogate pair", `"\udbff\udfff"`},
	{"escaped replacement character", `"\ufffd"`},
	{"raw two-byte UTF-8", `"é"`},
	{"raw four-byte UTF-8", `"😀"`},
	{"raw replacement character", "\"\xef\xbf\xbd\""},
	{"raw noncharacter", "\"\xef\xbf\xbf\""},
	{"raw last code point", "\"\xf4\x8f\xbf\xbf\""},
	{"raw DEL", "\"\x7f\""},
	{"raw line separator", "\"\u2028\""},
	{"same key in sibling objects", `[{"a":1},{"a":2}]`},
	{"same key in parent and child", `{"a":{"a":1}}`},
	{"keys differing in case", `{"a":1,"A":2}`},
	{"key that is a prefix of another", `{"a":1,"ab":2}`},
	{"escaped key differing by one byte", `{"\u0061b":1,"a":2}`},
	{"composed and decomposed keys are different bytes", `{"é":1,"e\u0301":2}`},
	{"empty key", `{"":1,"a":2}`},
	{"keys with escaped quote and backslash", `{"\"":1,"\\":2,"\/":3}`},
	{"parent keys after a closed child", `{"a":{"b":1,"c":2},"b":{"a":3},"c":4}`},
	{"depth 128", strings.Repeat("[", 128) + strings.Repeat("]", 128)},
	{"sixteen distinct keys", manyKeys(16, -1, -1)},
	{"seventeen distinct keys", manyKeys(17, -1, -1)},
	{"a hundred distinct keys", manyKeys(100, -1, -1)},
	{"many escaped keys", `{"\u0061":1,"\u0062":2,"\u0063":3,"\u0064":4,"\u0065":5,"\u0066":6,` +
		`"\u0067":7,"\u0068":8,"\u0069":9,"\u006a":10,"\u006b":11,"\u006c":12,"\u006d":13,` +
		`"\u006e":14,"\u006f":15,"\u0070":16,"\u0071":17,"\u0072":18}`},
	{"long escaped keys outgrow the starting arena", `{"` + strings.Repeat(`\u00e9`, 100) + `":1,"` +
		strings.Repeat(`\u00e9`, 99) + `":2}`},
	{"params", params200},
}

// manyKeys returns an object with keys k0..k(n-1); when dup >= 0, the key
// at index at is replaced by a copy of key dup.
func manyKeys(n, dup, at int) string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		k := i
		if i == at {
			k = dup
		}
		sb.WriteString(`"k` + strconv.Itoa(k) + `":` + strconv.Itoa(i))
	}
	sb.WriteByte('}')
	return sb.String()
}

func TestValidateAcceptsValidValues(t *testing.T) {
	for _, tc := range acceptCases {
		t.Run(tc.name, func(t *testing.T) {
			if err := Validate([]byte(tc.in)); err != nil {
				t.Fatalf("Validate(%q) = %v, want nil", tc.in, err)
			}
		})
	}
}

// rejectCases are values Validate MUST refuse, with the offset and reason
// it MUST report.
var rejectCases = []struct {
	name   string
	in     string
	offset int
	reason string
}{
	// Grammar.
	{"empty input", ``, 0, `unexpected end of input, want a value`},
	{"only whitespace", " \n", 2, `unexpected end of input, want a value`},
	{"trailing comma in array", `[1,]`, 3, `unexpected character ']', want a value`},
	{"trailing comma in object", `{"a":1,}`, 7, `unexpected character '}', want an object key`},
	{"missing colon", `{"a" 1}`, 5, `unexpected character '1', want ':' after object key`},
	{"unquoted key", `{a:1}`, 1, `unexpected character 'a', want an object key or '}'`},
	{"number key", `{1:1}`, 1, `unexpected character '1', want an object key or '}'`},
	{"unclosed object", `{"a":1`, 6, `unexpected end of input, want ',' or '}'`},
	{"unclosed array", `[1`, 2, `unexpected end of input, want ',' or ']'`},
	{"unclosed empty array", `[`, 1, `unexpected end of input, want a value or ']'`},
	{"unclosed empty object", `{`, 1, `unexpected end of input, want an object key or '}'`},
	{"object closed by bracket", `{"a":1]`, 6, `unexpected character ']', want ',' or '}'`},
	{"array closed by brace", `[1}`, 2, `unexpected character '}', want ',' or ']'`},
	{"missing value", `{"a":}`, 5, `unexpected character '}', want a value`},
	{"missing comma", `[1 2]`, 3, `unexpected character '2', want ',' or ']'`},
	{"two top-level values", `1 2`, 2, `unexpected character '2' after top-level value`},
	{"garbage after object", `{} x`, 3, `unexpected character 'x' after top-level value`},
	{"comment", `{} // note`, 3, `unexpected character '/' after top-level value`},
	{"single quotes", `'a'`, 0, `unexpected character '\'', want a value`},
	// Numbers.
	{"leading zero", `01`, 0, `invalid number: leading zero`},
	{"negative leading zero", `[-01]`, 1, `invalid number: leading zero`},
	{"minus alone", `-`, 1, `unexpected end of input, want a digit after '-'`},
	{"minus letter", `-a`, 1, `unexpected character 'a', want a digit after '-'`},
	{"plus sign", `+1`, 0, `unexpected character '+', want a value`},
	{"leading dot", `.5`, 0, `unexpected character '.', want a value`},
	{"trailing dot", `1.`, 2, `unexpected end of input, want a digit after '.'`},
	{"dot before exponent", `1.e5`, 2, `unexpected character 'e', want a digit after '.'`},
	{"empty exponent", `1e`, 2, `unexpected end of input, want a digit in exponent`},
	{"exponent sign only", `1e+`, 3, `unexpected end of input, want a digit in exponent`},
	{"hex number", `0x10`, 1, `unexpected character 'x' after top-level value`},
	{"NaN", `NaN`, 0, `unexpected character 'N', want a value`},
	{"negative infinity", `-Infinity`, 1, `unexpected character 'I', want a digit after '-'`},
	// Literals.
	{"truncated literal", `tru`, 3, `unexpected end of input, want literal true`},
	{"misspelled literal", `nulL`, 3, `unexpected character 'L', want literal null`},
	{"capitalized literal", `True`, 0, `unexpected character 'T', want a value`},
	{"literal with a tail", `falsey`, 5, `unexpected character 'y' after top-level value`},
	// Strings.
	{"unterminated string", `"abc`, 0, `unterminated string`},
	{"unterminated after backslash", `["ab\`, 1, `unterminated string`},
	{"unterminated inside \\u escape", `"\u12`, 0, `unterminated string`},
	{"unknown escape", `"\x"`, 1, `invalid escape \x in string`},
	{"escaped space", `"\ "`, 1, `invalid escape in string`},
	{"bad hex digit", `"\u12g4"`, 1, `invalid \u escape: want 4 hex digits`},
	{"bad hex digit at the end of input", `"\u1x`, 1, `invalid \u escape: want 4 hex digits`},
	{"raw line feed", "\"a\nb\"", 2, `unescaped control character U+000A in string`},
	{"raw NUL", "\"\x00\"", 1, `unescaped control character U+0000 in string`},
	{"raw tab", "\"\t\"", 1, `unescaped control character U+0009 in string`},
	{"raw unit separator", "\"\x1f\"", 1, `unescaped control character U+001F in string`},
	// Lone surrogates, which decoders replace with U+FFFD.
	{"lone high surrogate", `"\ud800"`, 1, `lone UTF-16 surrogate \ud800 in string`},
	{"high surrogate before text", `"\ud800x"`, 1, `lone UTF-16 surrogate \ud800 in string`},
	{"high surrogate before other escape", `"\uD800\u0041"`, 1, `lone UTF-16 surrogate \uD800 in string`},
	{"two high surrogates", `"\ud800\ud800"`, 1, `lone UTF-16 surrogate \ud800 in string`},
	{"high surrogate before truncated escape", `"\ud800\u12"`, 1, `lone UTF-16 surrogate \ud800 in string`},
	{"lone low surrogate", `"\udc00"`, 1, `lone UTF-16 surrogate \udc00 in string`},
	{"reversed pair", `"\udc00\ud800"`, 1, `lone UTF-16 surrogate \udc00 in string`},
	{"lone after a valid pair", `"\ud83d\ude00\ud83d"`, 13, `lone UTF-16 surrogate \ud83d in string`},
	{"lone surrogate in a key", `{"\ud800":1}`, 2, `lone UTF-16 surrogate \ud800 in string`},
	// Invalid UTF-8, which decoders replace with U+FFFD.
	{"invalid byte in string", "\"a\xffb\"", 2, `invalid UTF-8 in string`},
	{"truncated sequence", "\"\xc3\"", 1, `invalid UTF-8 in string`},
	{"truncated sequence at end", "\"\xe2\x82", 1, `invalid UTF-8 in string`},
	{"overlong slash", "\"\xc0\xaf\"", 1, `invalid UTF-8 in string`},
	{"UTF-8-encoded surrogate", "\"\xed\xa0\x80\"", 1, `invalid UTF-8 in string`},
	{"beyond the last code point", "\"\xf4\x90\x80\x80\"", 1, `invalid UTF-8 in string`},
	{"stray continuation byte", "\"\x80\"", 1, `invalid UTF-8 in string`},
	{"invalid UTF-8 in a key", "{\"\xff\":1}", 2, `invalid UTF-8 in string`},
	{"invalid UTF-8 outside strings", "[1,\xff]", 3, `invalid UTF-8`},
	{"invalid UTF-8 after the value", "{}\xff", 2, `invalid UTF-8`},
	{"byte order mark", "\xef\xbb\xbf{}", 0, `unexpected character '\ufeff', want a value`},
	{"no-break space is not whitespace", "\u00a01", 0, `unexpected character '\u00a0', want a value`},
	{"form feed is not whitespace", "\f1", 0, `unexpected character '\f', want a value`},
	{"NUL outside strings", "\x00", 0, `unexpected character '\x00', want a value`},
	// Duplicate keys, which decoders silently drop.
	{"duplicate key", `{"a":1,"a":2}`, 7, `duplicate object key "a"`},
	{"duplicate with same value", `{"a":1,"b":2,"a":1}`, 13, `duplicate object key "a"`},
	{"escaped duplicate of plain key", `{"a":1,"\u0061":2}`, 7, `duplicate object key "a"`},
	{"plain duplicate of escaped key", `{"\u0061":1,"a":2}`, 12, `duplicate object key "a"`},
	{"escapes in different case", `{"\u00e9":1,"\u00E9":2}`, 12, `duplicate object key "é"`},
	{"raw and escaped non-ASCII", `{"é":1,"\u00e9":2}`, 8, `duplicate object key "é"`},
	{"escaped slash", `{"a/b":1,"a\/b":2}`, 9, `duplicate object key "a/b"`},
	{"surrogate pair and raw", `{"😀":1,"\ud83d\ude00":2}`, 10, `duplicate object key "😀"`},
	{"empty keys", `{"":1,"":2}`, 6, `duplicate object key ""`},
	{"duplicate in nested object", `{"a":{"b":1,"b":2}}`, 12, `duplicate object key "b"`},
	{"duplicate in second array element", `[{"x":1},{"x":1,"x":2}]`, 16, `duplicate object key "x"`},
	{"duplicate after a child object", `{"a":{"z":1},"b":2,"a":3}`, 19, `duplicate object key "a"`},
	{"duplicate key needing escapes", `{"a\"b":1,"a\"b":2}`, 10, `duplicate object key "a\"b"`},
	{"duplicate control-character key", `{"\n":1,"\u000a":2}`, 8, `duplicate object key "\n"`},
	{"duplicate long escaped key", `{"` + strings.Repeat(`\u00e9`, 40) + `":1,"` + strings.Repeat("é", 40) + `":2}`,
		6*40 + 6, `duplicate object key "` + strings.Repeat("é", 32) + `"...`},
	{"duplicate as 16th key", manyKeys(16, 3, 15), len(manyKeys(15, -1, -1)), `duplicate object key "k3"`},
	// Nesting.
	{"depth 129 arrays", strings.Repeat("[", 129) + strings.Repeat("]", 129), 128, `nesting depth exceeds the limit of 128`},
	{"depth 129 objects", strings.Repeat(`{"a":`, 129) + "1" + strings.Repeat("}", 129), 640, `nesting depth exceeds the limit of 128`},
	{"depth 129 empty innermost", strings.Repeat("[", 128) + "{}" + strings.Repeat("]", 128), 128, `nesting depth exceeds the limit of 128`},
}

func TestValidateRefusesInvalidValuesWithOffsetAndReason(t *testing.T) {
	for _, tc := range rejectCases {
		t.Run(tc.name, func(t *testing.T) {
			checkError(t, Validate([]byte(tc.in)), tc.offset, tc.reason)
		})
	}
}

func checkError(t *testing.T, err error, offset int, reason string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error = %v, want an *Error", err)
	}
	if e.Offset != offset || e.Reason != reason {
		t.Fatalf("error = {%d, %q}, want {%d, %q}", e.Offset, e.Reason, offset, reason)
	}
}

func TestErrorSaysReasonAndOffset(t *testing.T) {
	err := Validate([]byte(`{"a":1,"a":2}`))
	if got, want := err.Error(), `json: duplicate object key "a" at offset 7`; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

func TestDuplicateKeyReasonIsBounded(t *testing.T) {
	// 63 ASCII bytes and then 'é' straddle the 64-byte cut, which MUST
	// fall on a character boundary.
	key := strings.Repeat("k", 63) + "é" + strings.Repeat("x", 1000)
	err := Validate([]byte(`{"` + key + `":1,"` + key + `":2}`))
	want := `duplicate object key "` + strings.Repeat("k", 63) + `"...`
	checkError(t, err, len(key)+6, want)
}

// TestDuplicateInLargeObjectIsReportedAsTheFirstRepeat checks that the
// sorted check used past 16 keys reports the same key the pairwise check
// would: the first key, in input order, that repeats an earlier one.
func TestDuplicateInLargeObjectIsReportedAsTheFirstRepeat(t *testing.T) {
	for _, n := range []int{2, 15, 16, 17, 18, 40, 100} {
		for at := 1; at < n; at++ {
			for _, dup := range []int{0, at / 2, at - 1} {
				in := manyKeys(n, dup, at)
				checkError(t, Validate([]byte(in)), keyOffset(in, at), `duplicate object key "k`+strconv.Itoa(dup)+`"`)
			}
		}
	}
	// Two duplicated keys: the earlier repeat wins, whichever sorts first.
	in := `{"z":0,"a":1,` + strings.TrimPrefix(manyKeys(20, -1, -1), "{")
	in = strings.TrimSuffix(in, "}") + `,"z":2,"a":3}`
	checkError(t, Validate([]byte(in)), strings.LastIndex(in, `"z"`), `duplicate object key "z"`)
}

// keyOffset returns the offset of the quote of the member at index i of an
// object made by manyKeys.
func keyOffset(in string, i int) int {
	off := 1
	for range i {
		off += strings.IndexByte(in[off:], ',') + 1
	}
	return off
}

func TestNestingDepthFollowsLimits(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	cases := []struct {
		name   string
		limits Limits
		depth  int
		ok     bool
	}{
		{"default allows 128", Limits{}, 128, true},
		{"default refuses 129", Limits{}, 129, false},
		{"negative means default", Limits{MaxDepth: -1}, 128, true},
		{"limit 1 allows a flat array", Limits{MaxDepth: 1}, 1, true},
		{"limit 1 refuses nesting", Limits{MaxDepth: 1}, 2, false},
		{"limit 1000 allows 1000", Limits{MaxDepth: 1000}, 1000, true},
		{"limit 1000 refuses 1001", Limits{MaxDepth: 1000}, 1001, false},
		{"scalars have depth 0", Limits{MaxDepth: 1}, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := nest(tc.depth)
			if tc.depth == 0 {
				in = []byte("1")
			}
			err := tc.limits.Validate(in)
			if tc.ok {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			max := tc.limits.maxDepth()
			checkError(t, err, max, "nesting depth exceeds the limit of "+strconv.Itoa(max))
		})
	}
}

func TestVeryDeepNestingIsRefusedWithoutRecursion(t *testing.T) {
	// Ten million levels would overflow any recursive scanner's stack; the
	// explicit stack stops at the limit. With a huge limit, the stack of
	// frames grows on the heap instead, and the scan still ends.
	deep := []byte(strings.Repeat("[", 10_000_000))
	checkError(t, Validate(deep), 128, "nesting depth exceeds the limit of 128")
	checkError(t, Limits{MaxDepth: 1 << 30}.Validate(deep), len(deep), "unexpected end of input, want a value or ']'")
}

func TestValidateObject(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		offset int    // when reason is set
		reason string // empty when the value is accepted
	}{
		{"empty object", `{}`, 0, ""},
		{"object with space around", " {\"a\":[1]} ", 0, ""},
		{"array", `[]`, 0, "top-level value is an array, want an object"},
		{"string after space", ` "a"`, 1, "top-level value is a string, want an object"},
		{"number", `1`, 0, "top-level value is a number, want an object"},
		{"negative number", `-1`, 0, "top-level value is a number, want an object"},
		{"true", `true`, 0, "top-level value is a boolean, want an object"},
		{"false", `false`, 0, "top-level value is a boolean, want an object"},
		{"null", `null`, 0, "top-level value is null, want an object"},
		{"kind is told before inner problems", `[1,}`, 0, "top-level value is an array, want an object"},
		{"empty input", ``, 0, "unexpected end of input, want a value"},
		{"no value", `x`, 0, "unexpected character 'x', want a value"},
		{"object with duplicate", `{"a":1,"a":2}`, 7, `duplicate object key "a"`},
		{"object with trailing data", `{}{}`, 2, `unexpected character '{' after top-level value`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateObject([]byte(tc.in))
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("ValidateObject = %v, want nil", err)
				}
				return
			}
			checkError(t, err, tc.offset, tc.reason)
		})
	}
}

func TestValidatorAgreesWithPackageFunctionsAcrossReuse(t *testing.T) {
	var v Validator
	for round := range 2 {
		for _, tc := range acceptCases {
			if err := v.Validate([]byte(tc.in)); err != nil {
				t.Fatalf("round %d: %s: Validator.Validate = %v", round, tc.name, err)
			}
			want, _ := Canonical(nil, []byte(tc.in))
			got, err := v.Canonical(nil, []byte(tc.in))
			if err != nil || string(got) != string(want) {
				t.Fatalf("round %d: %s: Validator.Canonical = %q, %v; want %q", round, tc.name, got, err, want)
			}
		}
		for _, tc := range rejectCases {
			checkError(t, v.Validate([]byte(tc.in)), tc.offset, tc.reason)
		}
	}
	small := Validator{Limits: Limits{MaxDepth: 1}}
	checkError(t, small.ValidateObject([]byte(`{"a":{}}`)), 5, "nesting depth exceeds the limit of 1")
	got, err := small.Canonical([]byte("dst"), []byte(`[[]]`))
	checkError(t, err, 1, "nesting depth exceeds the limit of 1")
	if string(got) != "dst" {
		t.Fatalf("Validator.Canonical returned %q, want dst unchanged", got)
	}
}

func TestValidatorDropsScratchGrownByAHugeValue(t *testing.T) {
	var v Validator
	if err := v.Validate([]byte(manyKeys(20_000, -1, -1))); err != nil {
		t.Fatal(err)
	}
	if cap(v.s.keys) != 0 {
		t.Fatalf("kept %d keys of scratch, want none", cap(v.s.keys))
	}
	if err := v.Validate([]byte(manyKeys(100, -1, -1))); err != nil {
		t.Fatal(err)
	}
	if cap(v.s.keys) == 0 {
		t.Fatal("dropped a small scratch, want it kept")
	}
}

func TestTypicalValuesAreValidatedWithoutAllocating(t *testing.T) {
	for _, in := range [][]byte{[]byte(params200), params10KiB} {
		if n := testing.AllocsPerRun(100, func() { _ = Validate(in) }); n != 0 {
			t.Errorf("Validate of %d bytes: %v allocations, want 0", len(in), n)
		}
		if n := testing.AllocsPerRun(100, func() { _ = ValidateObject(in) }); n != 0 {
			t.Errorf("ValidateObject of %d bytes: %v allocations, want 0", len(in), n)
		}
	}
	dst := make([]byte, 0, 1024)
	in := []byte(params200)
	if n := testing.AllocsPerRun(100, func() { _, _ = Canonical(dst, in) }); n != 0 {
		t.Errorf("Canonical of %d bytes: %v allocations, want 0", len(in), n)
	}
}
