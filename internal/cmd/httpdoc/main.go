// Command httpdoc writes the reference part of docs/http.md from openapi.yaml.
//
//	go run ./internal/cmd/httpdoc          # from the repository root
//
// openapi.yaml is the HTTP contract: the server's tests validate every answer
// against it, its routes are exactly the ones the server registers and its
// request bodies exactly what the decoder reads. A reference written by hand
// beside it would drift; this one is generated, and a test in this package
// fails when docs/http.md is not what the generator makes of the current
// openapi.yaml.
//
// docs/http.md has two parts. Everything before the line "## Reference" is
// written by hand: how the server behaves, each paragraph with the tests
// that hold it. Everything from that line on is rebuilt here: the document's
// own overview, a table of the routes, each route with its parameters,
// request body, responses (with the error codes each status carries) and
// examples, and the schemas the routes share. The generator reads only the
// standard library and go.yaml.in/yaml/v4, walking the YAML nodes so that
// routes, fields and examples keep the document's order.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
)

// Regenerate is the command that rebuilds docs/http.md, as the test's
// failure message tells it.
const Regenerate = "go run ./internal/cmd/httpdoc"

func main() {
	spec := flag.String("openapi", "openapi.yaml", "the OpenAPI document")
	doc := flag.String("doc", "docs/http.md", "the Markdown file whose reference part is rebuilt")
	check := flag.Bool("check", false, "write nothing; exit 1 if the file is not current")
	flag.Parse()
	if err := run(*spec, *doc, *check); err != nil {
		fmt.Fprintln(os.Stderr, "httpdoc:", err)
		os.Exit(1)
	}
}

func run(specPath, docPath string, check bool) error {
	spec, err := os.ReadFile(specPath)
	if err != nil {
		return fmt.Errorf("%w (run it from the repository root)", err)
	}
	old, err := os.ReadFile(docPath)
	if err != nil {
		return fmt.Errorf("%w (run it from the repository root)", err)
	}
	out, err := Generate(old, spec)
	if err != nil {
		return err
	}
	if bytes.Equal(out, old) {
		return nil
	}
	if check {
		return fmt.Errorf("%s is not current: run %s", docPath, Regenerate)
	}
	return os.WriteFile(docPath, out, 0o644)
}

// referenceHeading starts the generated part of the document.
const referenceHeading = "## Reference\n"

// generatedNote follows the heading, for whoever opens the file to edit it.
const generatedNote = "<!-- Generated from openapi.yaml by `" + Regenerate + "`. Edit openapi.yaml (or the generator), not what follows. -->\n"

// Generate returns doc with everything from its "## Reference" line on
// rebuilt from spec; what comes before that line is kept byte for byte.
func Generate(doc, spec []byte) ([]byte, error) {
	head, ok := handWritten(doc)
	if !ok {
		return nil, errors.New(`the document has no line "## Reference", where its generated part begins`)
	}
	ref, err := Render(spec)
	if err != nil {
		return nil, err
	}
	return append(head, ref...), nil
}

// handWritten returns the part of doc before its reference heading.
func handWritten(doc []byte) ([]byte, bool) {
	if bytes.HasPrefix(doc, []byte(referenceHeading)) {
		return nil, true
	}
	i := bytes.Index(doc, []byte("\n"+referenceHeading))
	if i < 0 {
		return nil, false
	}
	return append([]byte(nil), doc[:i+1]...), true
}
