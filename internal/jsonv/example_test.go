package jsonv_test

import (
	"fmt"

	"github.com/execstore/execstore/internal/jsonv"
)

func ExampleValidate() {
	for _, in := range []string{
		`{"id": 7, "tags": ["a", "b"]}`,
		`{"id": 7, "\u0069d": 8}`,
		`"\ud800"`,
		"\"caf\xe9\"",
		`[1, 2,]`,
	} {
		fmt.Println(jsonv.Validate([]byte(in)))
	}
	// Output:
	// <nil>
	// json: duplicate object key "id" at offset 10
	// json: lone UTF-16 surrogate \ud800 in string at offset 1
	// json: invalid UTF-8 in string at offset 4
	// json: unexpected character ']', want a value at offset 6
}

func ExampleValidateObject() {
	fmt.Println(jsonv.ValidateObject([]byte(`{"n": 1}`)))
	fmt.Println(jsonv.ValidateObject([]byte(`[{"n": 1}]`)))
	// Output:
	// <nil>
	// json: top-level value is an array, want an object at offset 0
}

func ExampleLimits() {
	l := jsonv.Limits{MaxDepth: 2}
	fmt.Println(l.Validate([]byte(`[[1]]`)))
	fmt.Println(l.Validate([]byte(`[[[1]]]`)))
	// Output:
	// <nil>
	// json: nesting depth exceeds the limit of 2 at offset 2
}

func ExampleCanonical() {
	a, _ := jsonv.Canonical(nil, []byte(`{ "b": [1, 2], "a": "caf\u00e9 \/ bar" }`))
	b, _ := jsonv.Canonical(nil, []byte(`{"a":"café / bar","b":[1,2]}`))
	c, _ := jsonv.Canonical(nil, []byte(`{"a":"café / bar","b":[1.0,2]}`))
	fmt.Printf("%s\n%v %v\n", a, string(a) == string(b), string(a) == string(c))
	// Output:
	// {"a":"café / bar","b":[1,2]}
	// true false
}

func ExampleValidator() {
	var v jsonv.Validator // keep one per goroutine and reuse it
	for _, in := range []string{`{"a":1}`, `{"a":1,"a":1}`} {
		fmt.Println(v.ValidateObject([]byte(in)))
	}
	// Output:
	// <nil>
	// json: duplicate object key "a" at offset 7
}
