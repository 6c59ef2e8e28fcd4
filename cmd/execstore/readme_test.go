package main

import (
	"fmt"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// routeBodies is the body type of every route that takes one, as the route
// table declares it (decode answers 500 for a body a route does not
// declare).
var routeBodies = func() map[string]reflect.Type {
	bodies := map[string]reflect.Type{}
	for _, rt := range routeTable(&api{}, &webUI{}, http.NotFoundHandler()) {
		if rt.body != nil {
			bodies[rt.pattern] = reflect.TypeOf(rt.body)
		}
	}
	return bodies
}()

// docField is a field as docs/http.md spells a body: "name", "name"? (may be
// left out), then optionally ": {...}" (an object spelt out), ": [{...}]"
// (an array of them) or ": [...]" (an array).
type docField struct {
	name     string
	optional bool
	object   []docField
	array    bool
}

// parseDocObject reads one spelt-out object from the front of s.
func parseDocObject(s string) ([]docField, string, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") {
		return nil, s, fmt.Errorf("want '{' at %q", s)
	}
	s = strings.TrimSpace(s[1:])
	var fields []docField
	for !strings.HasPrefix(s, "}") {
		m := regexp.MustCompile(`^"([A-Za-z]+)"(\?)?`).FindStringSubmatch(s)
		if m == nil {
			return nil, s, fmt.Errorf("want a field name at %q", s)
		}
		f := docField{name: m[1], optional: m[2] == "?"}
		s = strings.TrimSpace(s[len(m[0]):])
		if strings.HasPrefix(s, ":") {
			s = strings.TrimSpace(s[1:])
			if strings.HasPrefix(s, "[") {
				f.array = true
				s = strings.TrimSpace(s[1:])
				if strings.HasPrefix(s, "...") {
					s = s[3:]
				} else {
					var err error
					if f.object, s, err = parseDocObject(s); err != nil {
						return nil, s, err
					}
				}
				if s = strings.TrimSpace(s); !strings.HasPrefix(s, "]") {
					return nil, s, fmt.Errorf("want ']' at %q", s)
				}
				s = s[1:]
			} else {
				var err error
				if f.object, s, err = parseDocObject(s); err != nil {
					return nil, s, err
				}
			}
		}
		fields = append(fields, f)
		if s = strings.TrimSpace(s); strings.HasPrefix(s, ",") {
			s = strings.TrimSpace(s[1:])
		}
	}
	return fields, s[1:], nil
}

// compareDoc checks that docs/http.md's spelling of an object matches the
// struct the body decoder reads it into: the same names, the same "?" as
// omitempty, the same nesting. A struct the document leaves unspelt must be
// a lease (spelt once, in the text) or an object it is already inside (a
// cause is an error).
func compareDoc(t *testing.T, where string, doc []docField, typ reflect.Type, lease []docField, inside []reflect.Type) {
	t.Helper()
	fields := bodyFieldsOf(typ)
	var docNames, goNames []string
	for _, d := range doc {
		docNames = append(docNames, d.name)
	}
	for _, f := range fields {
		goNames = append(goNames, f.name)
	}
	if !reflect.DeepEqual(docNames, goNames) {
		t.Errorf("%s: docs/http.md lists %q, the decoder reads %q", where, docNames, goNames)
		return
	}
	inside = append(inside, typ)
	for i, d := range doc {
		f := fields[i]
		path := where + "." + d.name
		if d.optional != f.optional {
			t.Errorf("%s: optional in docs/http.md %v, in the decoder %v", path, d.optional, f.optional)
		}
		ft := f.typ
		if d.array {
			if ft.Kind() != reflect.Slice {
				t.Errorf("%s: docs/http.md shows an array", path)
				continue
			}
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case d.object != nil:
			compareDoc(t, path, d.object, ft, lease, inside)
		case ft.Kind() != reflect.Struct || ft == timeType:
		case ft == reflect.TypeFor[leaseRefJSON]():
			compareDoc(t, path, lease, ft, lease, inside)
		case !containsType(inside, ft):
			t.Errorf("%s: an object docs/http.md does not spell out", path)
		}
	}
}

func containsType(ts []reflect.Type, t reflect.Type) bool {
	for _, u := range ts {
		if u == t {
			return true
		}
	}
	return false
}

// The route table of docs/http.md ("The HTTP server") is the HTTP contract
// as people read it: each body it spells, with its "?" marks, is exactly what
// the decoder reads and requires.
func TestTheHTTPDocSpellsEveryBodyAsTheDecoderReadsIt(t *testing.T) {
	section := httpServerSection(t)

	m := regexp.MustCompile("Leases travel as `(\\{[^`]*\\})`").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("docs/http.md does not spell a lease")
	}
	lease, _, err := parseDocObject(m[1])
	if err != nil {
		t.Fatalf("docs/http.md's lease: %v", err)
	}

	seen := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `((?:POST|PUT) [^`]*)` \\| `(\\{[^`]*\\})`")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		route, body := m[1], m[2]
		seen[route] = true
		typ, ok := routeBodies[route]
		if !ok {
			t.Errorf("docs/http.md lists %s, which takes no body the tests know", route)
			continue
		}
		doc, rest, err := parseDocObject(body)
		if err != nil || strings.TrimSpace(rest) != "" {
			t.Errorf("%s: docs/http.md's body %s: %v (left %q)", route, body, err, rest)
			continue
		}
		compareDoc(t, route, doc, typ, lease, nil)
	}
	for route := range routeBodies {
		if !seen[route] {
			t.Errorf("docs/http.md's route table lacks %s", route)
		}
	}
}

// httpServerSection returns the section "## The HTTP server" of
// docs/http.md: the server's rules, written by hand, and its route table,
// up to the reference generated from openapi.yaml.
func httpServerSection(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/http.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "\n## The HTTP server\n")
	if start < 0 {
		t.Fatal("docs/http.md has no section \"## The HTTP server\"")
	}
	rest := doc[start+1:]
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

// Every field of every body, at any depth, is of a kind the body decoder
// has a rule for (it panics on one it has not).
func TestEveryBodyFieldHasADecodingRule(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(where string, typ reflect.Type)
	walk = func(where string, typ reflect.Type) {
		if seen[typ] {
			return
		}
		seen[typ] = true
		switch typ {
		case rawType, timeType, millisType:
			return
		}
		switch typ.Kind() {
		case reflect.Pointer:
			if e := typ.Elem(); e == rawType || e.Kind() == reflect.Pointer {
				t.Errorf("%s: no rule for %s", where, typ)
			}
			walk(where, typ.Elem())
		case reflect.Slice:
			walk(where, typ.Elem())
		case reflect.Map:
			if typ.Key().Kind() != reflect.String {
				t.Errorf("%s: a map whose keys are not strings", where)
			}
			walk(where, typ.Elem())
		case reflect.Struct:
			for _, f := range bodyFieldsOf(typ) {
				walk(where+"."+f.name, f.typ)
			}
		default:
			if kindOf(typ) == "something else" {
				t.Errorf("%s: no rule for %s", where, typ)
			}
		}
	}
	for route, typ := range routeBodies {
		walk(route, typ)
	}
}
