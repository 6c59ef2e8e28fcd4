package main

import (
	"os"
	"strings"
	"testing"
)

// docs/http.md is what the generator makes of the repository's openapi.yaml:
// a change to the contract that was not regenerated into the manual fails
// here, with the command that fixes it.
func TestTheHTTPDocIsGeneratedFromTheCurrentOpenAPI(t *testing.T) {
	spec, err := os.ReadFile("../../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../../docs/http.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Generate(doc, spec)
	if err != nil {
		t.Fatalf("docs/http.md: %v", err)
	}
	if got := string(doc); got != string(want) {
		line, have, should := firstDifference(got, string(want))
		t.Fatalf("docs/http.md is not what the generator makes of openapi.yaml: run `%s` from the repository root and commit the result.\n"+
			"First difference, line %d:\n  the file:      %q\n  the generator: %q", Regenerate, line, have, should)
	}
}

// firstDifference returns the first line (1-based) where a and b differ,
// and that line in each.
func firstDifference(a, b string) (int, string, string) {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y || i >= len(al) || i >= len(bl) {
			return i + 1, x, y
		}
	}
	return 0, "", ""
}

// A small document that uses what openapi.yaml uses: a shared parameter,
// response and schemas, allOf, nested objects and arrays, enums, consts,
// bounds and named examples.
const smallSpec = `openapi: 3.1.0
info:
  title: t
  version: "1"
  summary: A test document.
  description: The overview.
tags:
  - name: things
    description: Things and their parts.
paths:
  /v1/things/{id}:
    parameters: [{$ref: '#/components/parameters/ID'}]
    put:
      tags: [things]
      summary: Put a thing
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [name, parts]
              properties:
                name: {type: string, maxLength: 8, description: 'Short | sweet.'}
                parts:
                  type: array
                  items:
                    type: object
                    required: [size]
                    properties:
                      size: {type: integer, minimum: 1, maximum: 9}
                kind: {enum: [big, small]}
            examples:
              small: {value: {name: a, parts: [{size: 1}], kind: small}}
      responses:
        '200':
          description: Stored.
          content:
            application/json:
              schema: {type: object, required: [status], properties: {status: {const: stored}}}
              example: {status: stored}
        '404': {$ref: '#/components/responses/Missing'}
    get:
      tags: [things]
      summary: Read a thing
      responses:
        '200':
          description: The thing.
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Thing'}
components:
  parameters:
    ID: {name: id, in: path, required: true, schema: {type: string}}
  responses:
    Missing:
      description: No such thing (` + "`NOT_FOUND`" + `).
      content:
        application/json:
          schema: {$ref: '#/components/schemas/Error'}
  schemas:
    Error:
      type: object
      required: [code]
      properties:
        code: {enum: [NOT_FOUND, OTHER]}
    Named:
      type: object
      properties:
        name: {type: string}
    Thing:
      type: object
      required: [name, at]
      allOf: [{$ref: '#/components/schemas/Named'}]
      properties:
        at: {type: string, format: date-time}
        tags: {type: object, additionalProperties: {type: string}}
`

func TestRenderFollowsRefsAndKeepsTheDocumentsOrder(t *testing.T) {
	out, err := Render([]byte(smallSpec))
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	wants := []string{
		"## Reference\n",
		"**t**, version 1 (OpenAPI 3.1.0): A test document.",
		"The overview.",
		"| [`PUT /v1/things/{id}`](#put-v1thingsid) | Put a thing |\n| [`GET /v1/things/{id}`](#get-v1thingsid) | Read a thing |",
		"### Things\n\nThings and their parts.",
		"#### `PUT /v1/things/{id}`\n\nPut a thing.",
		"| `id` | path | string | yes |  |",
		"| `name` | string, at most 8 characters | yes | Short \\| sweet. |",
		"| `parts` | array of objects | yes |  |\n| `parts[].size` | integer, 1 to 9 | yes |  |",
		"| `kind` | one of `big`, `small` |  |  |",
		"Example (small):\n\n```json\n{\"name\":\"a\",\"parts\":[{\"size\":1}],\"kind\":\"small\"}\n```",
		"| 404 | [`Missing`](#missing) | `NOT_FOUND` | [`Error`](#error) |",
		"| `status` | `\"stored\"` | yes |  |",
		"| 200 | The thing. |  | [`Thing`](#thing) |",
		"### Shared responses",
		"#### `Thing`\n\n| field | type | required | description |\n| --- | --- | --- | --- |\n| `name` | string | yes |  |\n| `at` | string (RFC 3339 time) | yes |  |\n| `tags` | object of string values |  |  |",
	}
	last := -1
	for _, w := range wants {
		i := strings.Index(got, w)
		if i < 0 {
			t.Errorf("the reference lacks %q", w)
			continue
		}
		if i < last {
			t.Errorf("%q comes earlier than what the document puts before it", w)
		}
		last = i
	}
	if t.Failed() {
		t.Logf("the reference:\n%s", got)
	}
}

func TestGenerateKeepsTheHandWrittenPartByteForByte(t *testing.T) {
	head := "# The HTTP API\n\nWritten by hand.  Kept as it is.\n\n"
	doc := head + referenceHeading + "\nwhatever was generated before\n"
	out, err := Generate([]byte(doc), []byte(smallSpec))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), head+referenceHeading+"\n"+generatedNote) {
		t.Fatalf("the generated document begins %q", string(out)[:len(head)+40])
	}
	if strings.Contains(string(out), "whatever was generated before") {
		t.Error("the old reference was kept")
	}
	again, err := Generate(out, []byte(smallSpec))
	if err != nil || string(again) != string(out) {
		t.Errorf("generating twice changed the document (%v)", err)
	}
}

func TestGenerateRefusesADocumentWithoutItsReferenceHeading(t *testing.T) {
	if _, err := Generate([]byte("# The HTTP API\n\n### Reference\n"), []byte(smallSpec)); err == nil {
		t.Error("a document without \"## Reference\" was accepted")
	}
	if _, err := Render([]byte("paths: {}\n")); err == nil {
		t.Error("a document without operations was accepted")
	}
	bad := strings.Replace(smallSpec, "#/components/schemas/Thing", "#/components/schemas/Nothing", 1)
	if _, err := Render([]byte(bad)); err == nil || !strings.Contains(err.Error(), "Nothing") {
		t.Errorf("a $ref to nothing: %v", err)
	}
}
