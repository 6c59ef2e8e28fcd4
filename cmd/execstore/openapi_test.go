package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/execstore/execstore"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// The contract, openapi.yaml, is checked three ways: every answer a handler
// test gets is validated against it (server.call goes through checkAnswer);
// its routes are exactly the routes the server registers; its request
// bodies are exactly what the body decoder reads.

type loadedContract struct {
	doc    *openapi3.T
	router routers.Router
	err    error
}

var contract = sync.OnceValue(func() loadedContract {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(execstore.OpenAPI())
	if err != nil {
		return loadedContract{err: err}
	}
	if err := doc.Validate(context.Background()); err != nil {
		return loadedContract{err: err}
	}
	doc.Servers = nil // the tests' servers listen on ports of their own
	router, err := legacy.NewRouter(doc)
	return loadedContract{doc: doc, router: router, err: err}
})

func loadContract(t testing.TB) loadedContract {
	t.Helper()
	c := contract()
	if c.err != nil {
		t.Fatalf("openapi.yaml: %v", c.err)
	}
	return c
}

// checkAnswer fails t unless the answer to method and path (its status,
// headers and body) is one the document describes: for a documented
// operation, a documented status with a body its schema accepts; for a path
// or method the document does not have, an Error. Every error's code must
// come with its status in errorCodes.
func checkAnswer(t testing.TB, method, path string, status int, header http.Header, body []byte) {
	t.Helper()
	c := loadContract(t)
	req, err := http.NewRequest(method, "http://execstore"+path, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	route, params, err := c.router.FindRoute(req)
	if err == nil {
		in := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 status,
			Header:                 header,
			Body:                   io.NopCloser(bytes.NewReader(body)),
			Options:                &openapi3filter.Options{IncludeResponseStatus: true},
		}
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			t.Errorf("%s %s answered %d %.300s, which openapi.yaml does not describe: %v", method, path, status, body, err)
		}
	} else {
		var v any
		schema := c.doc.Components.Schemas["ErrorBody"].Value
		if jerr := json.Unmarshal(body, &v); jerr != nil || schema.VisitJSON(v, openapi3.EnableJSONSchema2020()) != nil {
			t.Errorf("%s %s (no operation in openapi.yaml: %v) answered %d %.300s, not an Error", method, path, err, status, body)
		}
	}
	var e struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(body, &e) == nil && e.Code != "" && !slices.Contains(errorCodes[e.Code], status) {
		t.Errorf("%s %s answered %d with code %s, which errorCodes does not list with that status", method, path, status, e.Code)
	}
}

// The document is a valid OpenAPI 3.1 document, examples included, and the
// server answers it at GET /v1/openapi.json, as JSON, equal to the YAML.
func TestTheOpenAPIDocumentIsValidAndServedAsJSON(t *testing.T) {
	c := loadContract(t)
	if !c.doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.yaml is OpenAPI %s, want 3.1", c.doc.OpenAPI)
	}
	s := newServer(t)
	status, served := s.call("GET", "/v1/openapi.json", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d", status)
	}
	want, err := openAPIJSON(execstore.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	var wantDoc map[string]any
	if err := json.Unmarshal(want, &wantDoc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(served, wantDoc) {
		t.Fatal("the served document differs from openapi.yaml")
	}
	raw, err := os.ReadFile("../../openapi.yaml")
	if err != nil || !bytes.Equal(raw, execstore.OpenAPI()) {
		t.Fatalf("execstore.OpenAPI() is not the repository's openapi.yaml (%v)", err)
	}
}

// notYetDocumented lists routes the server registers that the document may
// still lack: none. A branch that adds a route adds it to openapi.yaml, not
// here.
var notYetDocumented = map[string]bool{}

// notTheAPI reports whether a route of the table is outside the HTTP API
// the document describes: the web view (ui.go), HTML pages and their
// fragments for people, whose answers its own tests check.
func notTheAPI(pattern string) bool {
	return pattern == "GET /ui" || strings.HasPrefix(pattern, "GET /ui/")
}

// registeredRoutes lists every pattern of the route table, as "METHOD
// /path". It fails t if a file registers a route outside the table: every
// Handle or HandleFunc call is newMux's, in routes.go.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	var routes []string
	for _, rt := range routeTable(&api{}, &webUI{}, http.NotFoundHandler()) {
		routes = append(routes, rt.pattern)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "routes.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "HandleFunc" || sel.Sel.Name == "Handle") {
				t.Errorf("%s: a route registered outside the route table (routes.go)", fset.Position(call.Pos()))
			}
			return true
		})
	}
	sort.Strings(routes)
	return routes
}

// documentedRoutes lists the document's operations as "METHOD /path".
func documentedRoutes(doc *openapi3.T) []string {
	var routes []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			routes = append(routes, method+" "+path)
		}
	}
	sort.Strings(routes)
	return routes
}

// Every route the server registers is in openapi.yaml, and every operation
// of openapi.yaml is a route the server registers, answered by its handler
// (not by the fallback for unknown routes).
func TestEveryRegisteredRouteIsDocumentedAndTheReverse(t *testing.T) {
	c := loadContract(t)
	registered, documented := registeredRoutes(t), documentedRoutes(c.doc)
	if len(registered) < 20 {
		t.Fatalf("found only %d registered routes: %q", len(registered), registered)
	}
	for _, r := range registered {
		if !slices.Contains(documented, r) && !notYetDocumented[r] && !notTheAPI(r) {
			t.Errorf("the server registers %s, which openapi.yaml does not document", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(registered, r) {
			t.Errorf("openapi.yaml documents %s, which the server does not register", r)
		}
	}
	s := newServer(t)
	for _, r := range documented {
		if r == "GET /metrics" {
			continue // Prometheus's text, not JSON; TestHTTPMetricsExportsTheStoreInPrometheusFormat asks it
		}
		method, path, _ := strings.Cut(r, " ")
		path = regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "x")
		_, out := s.call(method, path, "")
		if out["code"] == "ROUTE_NOT_FOUND" || out["code"] == "METHOD_NOT_ALLOWED" {
			t.Errorf("%s: the server answers %v", r, out)
		}
	}
}

// "Each error code the server can send appears in the document with its
// status": the Error schema's codes are exactly errorCodes', and each
// operation lists only statuses the table allows.
func TestEveryErrorCodeIsDocumented(t *testing.T) {
	c := loadContract(t)
	var documented []string
	for _, v := range c.doc.Components.Schemas["ErrorBody"].Value.Properties["code"].Value.Enum {
		documented = append(documented, v.(string))
	}
	var listed []string
	for code := range errorCodes {
		listed = append(listed, code)
	}
	sort.Strings(documented)
	sort.Strings(listed)
	if !slices.Equal(documented, listed) {
		t.Errorf("openapi.yaml's error codes %q, the server's %q", documented, listed)
	}
	desc := c.doc.Info.Description
	for code, statuses := range errorCodes {
		for _, st := range statuses {
			row := regexp.MustCompile(`(?m)^\| ` + strconv.Itoa(st) + ` \|[^\n]*` + "`" + code + "`")
			if !row.MatchString(desc) {
				t.Errorf("the description's table lacks %s under %d", code, st)
			}
		}
	}
}

// The document's request bodies are exactly what the body decoder reads:
// the same fields, the same required ones, nothing else accepted.
func TestTheDocumentSpellsEveryBodyAsTheDecoderReadsIt(t *testing.T) {
	c := loadContract(t)
	var compare func(where string, schema *openapi3.Schema, typ reflect.Type, seen map[reflect.Type]bool)
	compare = func(where string, schema *openapi3.Schema, typ reflect.Type, seen map[reflect.Type]bool) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == timeType || seen[typ] {
			return
		}
		seen[typ] = true
		if len(schema.OneOf) > 0 {
			schema = mergeBranches(t, where, schema.OneOf)
		}
		if ap := schema.AdditionalProperties.Has; ap == nil || *ap {
			t.Errorf("%s: the schema accepts fields it does not list", where)
		}
		var docNames, goNames, docRequired, goRequired []string
		for name := range schema.Properties {
			docNames = append(docNames, name)
		}
		docRequired = append(docRequired, schema.Required...)
		for _, f := range bodyFieldsOf(typ) {
			goNames = append(goNames, f.name)
			if !f.optional {
				goRequired = append(goRequired, f.name)
			}
			if p := schema.Properties[f.name]; p != nil {
				ft := f.typ
				if ft.Kind() == reflect.Slice && ft != rawType {
					ft = ft.Elem()
					if p.Value.Items != nil {
						compare(where+"."+f.name+"[]", p.Value.Items.Value, ft, seen)
					}
					continue
				}
				compare(where+"."+f.name, p.Value, ft, seen)
			}
		}
		for _, l := range [][]string{docNames, goNames, docRequired, goRequired} {
			sort.Strings(l)
		}
		if !slices.Equal(docNames, goNames) || !slices.Equal(docRequired, goRequired) {
			t.Errorf("%s: openapi.yaml has fields %q (required %q), the decoder reads %q (required %q)",
				where, docNames, docRequired, goNames, goRequired)
		}
	}
	for route, typ := range routeBodies {
		method, path, _ := strings.Cut(route, " ")
		item := c.doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil || item.GetOperation(method).RequestBody == nil {
			t.Errorf("%s: no request body in openapi.yaml", route)
			continue
		}
		media := item.GetOperation(method).RequestBody.Value.Content.Get("application/json")
		compare(route, media.Schema.Value, typ, map[reflect.Type]bool{})
	}
}

// mergeBranches is what a decoder of one struct reads of a oneOf: every
// branch's fields, required where every branch requires them. Each branch
// must list its fields alone; the rule that picks a branch (an outcome's
// status) is the body's checkBody's.
func mergeBranches(t *testing.T, where string, branches openapi3.SchemaRefs) *openapi3.Schema {
	no := false
	merged := &openapi3.Schema{Properties: openapi3.Schemas{}, AdditionalProperties: openapi3.AdditionalProperties{Has: &no}}
	count := map[string]int{}
	for _, b := range branches {
		if ap := b.Value.AdditionalProperties.Has; ap == nil || *ap {
			t.Errorf("%s: a branch of its oneOf accepts fields it does not list", where)
		}
		for name, p := range b.Value.Properties {
			if merged.Properties[name] == nil || p.Value.Const == nil {
				merged.Properties[name] = p
			}
		}
		for _, name := range b.Value.Required {
			count[name]++
		}
	}
	for name, n := range count {
		if n == len(branches) {
			merged.Required = append(merged.Required, name)
		}
	}
	return merged
}

// failureRecorder is a testing.TB that notes a failure instead of failing.
type failureRecorder struct {
	testing.TB
	failed bool
}

func (f *failureRecorder) Errorf(string, ...any) { f.failed = true }

// The check refuses what the document does not describe: a field the
// record does not have, a status the operation does not list, a code the
// error schema does not know, a code with a status errorCodes does not give
// it, and an unknown route's answer that is not an Error.
func TestTheContractCheckRefusesAnswersTheDocumentDoesNotDescribe(t *testing.T) {
	record := `{"executionId":"e","workflowId":"w","status":"admitted","admittedAt":"2026-01-02T12:00:00Z","updatedAt":"2026-01-02T12:00:00Z","attempts":0,"maxAttempts":0`
	json := http.Header{"Content-Type": {"application/json"}}
	cases := []struct {
		name, method, path string
		status             int
		body               string
		ok                 bool
	}{
		{"a record", "GET", "/v1/executions/e", 200, record + `}`, true},
		{"a record with a field too many", "GET", "/v1/executions/e", 200, record + `,"extra":1}`, false},
		{"a record without its status", "GET", "/v1/executions/e", 200, strings.Replace(record, `"status":"admitted",`, "", 1) + `}`, false},
		{"an acknowledgement's answer", "POST", "/v1/leases/acknowledge", 200, record + `,"applied":false}`, true},
		{"an acknowledgement's answer without applied", "POST", "/v1/leases/acknowledge", 200, record + `}`, false},
		{"a status the operation does not list", "GET", "/v1/executions/e", 418, `{"code":"INTERNAL","message":"m"}`, false},
		{"an unknown code", "GET", "/v1/executions/e", 404, `{"code":"NOPE","message":"m"}`, false},
		{"a code with another status", "GET", "/v1/executions/e", 404, `{"code":"LEASE_LOST","message":"m"}`, false},
		{"an unknown route's error", "GET", "/v1/nowhere", 404, `{"code":"ROUTE_NOT_FOUND","message":"m"}`, true},
		{"an unknown route's text", "GET", "/v1/nowhere", 404, `{"error":"404 page not found"}`, false},
	}
	for _, c := range cases {
		rec := &failureRecorder{TB: t}
		checkAnswer(rec, c.method, c.path, c.status, json, []byte(c.body))
		if rec.failed == c.ok {
			t.Errorf("%s: the check passed it: %v, want %v", c.name, !rec.failed, c.ok)
		}
	}
}

// The route table of docs/http.md lists exactly the document's routes, and
// every status it gives a route is one the document lists for it.
func TestTheHTTPDocsRouteTableIsTheDocuments(t *testing.T) {
	c := loadContract(t)
	section := httpServerSection(t)
	row := regexp.MustCompile("(?m)^\\| `([A-Z]+) (/[^`?]*)(?:\\?[^`]*)?` \\|(.*)$")
	status := regexp.MustCompile(`\b[1-5][0-9][0-9]\b`)
	var listed []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		route := m[1] + " " + m[2]
		listed = append(listed, route)
		op := c.doc.Paths.Value(m[2])
		if op == nil || op.GetOperation(m[1]) == nil {
			continue // reported below
		}
		cells := strings.Split(strings.ReplaceAll(m[3], `\|`, ""), " | ")
		for _, cell := range cells[1:] {
			for _, st := range status.FindAllString(cell, -1) {
				if op.GetOperation(m[1]).Responses.Value(st) == nil {
					t.Errorf("docs/http.md gives %s the status %s, which openapi.yaml does not list", route, st)
				}
			}
		}
	}
	sort.Strings(listed)
	if documented := documentedRoutes(c.doc); !slices.Equal(listed, documented) {
		t.Errorf("docs/http.md's routes %q, openapi.yaml's %q", listed, documented)
	}
}

// The description's table of body limits gives every route that reads a
// body, with the limit it has at the store's default limits.
func TestTheDocumentGivesEveryRoutesBodyLimitAtTheDefaultLimits(t *testing.T) {
	c := loadContract(t)
	row := regexp.MustCompile("(?m)^\\| `([A-Z]+ /[^`]*)` \\| ([0-9]+) \\|$")
	documented := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(c.doc.Info.Description, -1) {
		documented[m[1]] = m[2]
	}
	lim := execstore.DefaultLimits
	var want strings.Builder
	for _, rt := range routeTable(&api{}, &webUI{}, http.NotFoundHandler()) {
		if rt.body == nil {
			continue
		}
		limit := strconv.FormatInt(rt.body.maxBytes(&lim), 10)
		fmt.Fprintf(&want, "    | `%s` | %s |\n", rt.pattern, limit)
		if documented[rt.pattern] != limit {
			t.Errorf("openapi.yaml gives %s the body limit %q, the server %s", rt.pattern, documented[rt.pattern], limit)
		}
		delete(documented, rt.pattern)
	}
	for route := range documented {
		t.Errorf("openapi.yaml gives %s a body limit, but it reads no body", route)
	}
	if t.Failed() {
		t.Logf("the table's rows:\n%s", want.String())
	}
}
