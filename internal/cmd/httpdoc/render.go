package main

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
)

// specLink is openapi.yaml as docs/http.md links to it.
const specLink = "../openapi.yaml"

// methods are the operations a path item may hold, in the order a path's
// operations are listed when the document gives them in another order.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// operation is one route of the document.
type operation struct {
	method, path string
	item, op     *yaml.Node // the path item (for its parameters) and the operation
}

// route is how the reference names an operation: "GET /v1/executions".
func (o operation) route() string { return strings.ToUpper(o.method) + " " + o.path }

// tag is the first of the operation's tags, or "".
func (o operation) tag() string {
	if t := scalars(get(o.op, "tags")); len(t) > 0 {
		return t[0]
	}
	return ""
}

// renderer writes the reference into b; the first error it meets is kept
// in err and stops nothing, so that the writing code reads straight.
type renderer struct {
	root  *yaml.Node
	b     strings.Builder
	codes []string // the Error schema's codes
	err   error
}

// Render returns the reference part of docs/http.md for the OpenAPI
// document spec: from its "## Reference" heading to the end.
func Render(spec []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("openapi.yaml: not a YAML mapping")
	}
	r := &renderer{root: doc.Content[0]}
	r.codes = scalars(path(r.root, "components", "schemas", "Error", "properties", "code", "enum"))
	ops := r.operations()
	if len(ops) == 0 {
		return nil, errors.New("openapi.yaml: no operations under paths")
	}
	groups := groupByTag(r.tags(), ops)
	r.overview()
	r.routeTable(groups)
	for _, g := range groups {
		r.tagSection(g)
	}
	r.sharedResponses()
	r.schemas()
	if r.err != nil {
		return nil, r.err
	}
	return []byte(r.b.String()), nil
}

// printf writes to the reference.
func (r *renderer) printf(format string, args ...any) { fmt.Fprintf(&r.b, format, args...) }

// operations lists the document's operations, in its order of paths and,
// within a path, of methods.
func (r *renderer) operations() []operation {
	var ops []operation
	for _, p := range pairs(get(r.root, "paths")) {
		for _, m := range pairs(p.value) {
			if slices.Contains(methods, m.key) {
				ops = append(ops, operation{method: m.key, path: p.key, item: p.value, op: m.value})
			}
		}
	}
	return ops
}

// tagInfo is a tag and what the document says of it.
type tagInfo struct{ name, description string }

// tags lists the document's tags in its order.
func (r *renderer) tags() []tagInfo {
	var out []tagInfo
	for _, t := range items(get(r.root, "tags")) {
		out = append(out, tagInfo{str(t, "name"), str(t, "description")})
	}
	return out
}

// group is a tag's operations.
type group struct {
	tag tagInfo
	ops []operation
}

// groupByTag puts each operation under its first tag: the document's tags
// first, in its order, then tags it does not list, then untagged ones.
func groupByTag(tags []tagInfo, ops []operation) []group {
	var groups []group
	index := map[string]int{}
	add := func(t tagInfo) {
		if _, ok := index[t.name]; !ok {
			index[t.name] = len(groups)
			groups = append(groups, group{tag: t})
		}
	}
	for _, t := range tags {
		add(t)
	}
	for _, o := range ops {
		add(tagInfo{name: o.tag()})
		g := &groups[index[o.tag()]]
		g.ops = append(g.ops, o)
	}
	return slices.DeleteFunc(groups, func(g group) bool { return len(g.ops) == 0 })
}

// overview writes the heading, the generated-file note, and the
// document's own introduction.
func (r *renderer) overview() {
	info := get(r.root, "info")
	r.printf("%s\n%s\n", referenceHeading, generatedNote)
	r.printf("**%s**, version %s (OpenAPI %s", str(info, "title"), str(info, "version"), str(r.root, "openapi"))
	if s := str(info, "summary"); s != "" {
		r.printf("): %s", s)
	} else {
		r.printf(")")
	}
	r.printf(" The document is [`openapi.yaml`](%s)", specLink)
	if servers := items(get(r.root, "servers")); len(servers) > 0 {
		r.printf("; its server: `%s`", str(servers[0], "url"))
	}
	r.printf(".\n\n")
	if d := strings.TrimSpace(str(info, "description")); d != "" {
		r.printf("%s\n\n", d)
	}
}

// routeTable writes one row per operation, linking to its section.
func (r *renderer) routeTable(groups []group) {
	r.printf("### Routes\n\n| route | what it does |\n| --- | --- |\n")
	for _, g := range groups {
		for _, o := range g.ops {
			r.printf("| [`%s`](#%s) | %s |\n", o.route(), slug("`"+o.route()+"`"), cell(str(o.op, "summary")))
		}
	}
	r.printf("\n")
}

// tagSection writes a tag's heading and each of its operations.
func (r *renderer) tagSection(g group) {
	name := g.tag.name
	if name == "" {
		name = "other"
	}
	r.printf("### %s\n\n", strings.ToUpper(name[:1])+name[1:])
	if d := strings.TrimSpace(g.tag.description); d != "" {
		r.printf("%s\n\n", d)
	}
	for _, o := range g.ops {
		r.operation(o)
	}
}

// operation writes one route: what it does, its parameters, its request
// body and its responses.
func (r *renderer) operation(o operation) {
	r.printf("#### `%s`\n\n", o.route())
	if s := strings.TrimSpace(str(o.op, "summary")); s != "" {
		r.printf("%s\n\n", sentence(s))
	}
	if d := strings.TrimSpace(str(o.op, "description")); d != "" {
		r.printf("%s\n\n", d)
	}
	r.parameters(o)
	r.requestBody(get(o.op, "requestBody"))
	r.responses(get(o.op, "responses"))
}

// parameters writes the path item's and the operation's parameters.
func (r *renderer) parameters(o operation) {
	params := append(items(get(o.item, "parameters")), items(get(o.op, "parameters"))...)
	if len(params) == 0 {
		return
	}
	r.printf("Parameters:\n\n| name | in | type | required | description |\n| --- | --- | --- | --- | --- |\n")
	for _, p := range params {
		p, _ = r.resolve(p)
		req := ""
		if str(p, "required") == "true" {
			req = "yes"
		}
		r.printf("| `%s` | %s | %s | %s | %s |\n", str(p, "name"), str(p, "in"), r.typeOf(get(p, "schema")), req, cell(str(p, "description")))
	}
	r.printf("\n")
}

// requestBody writes the body an operation takes: its media type, its
// fields and its examples.
func (r *renderer) requestBody(body *yaml.Node) {
	if body == nil {
		return
	}
	body, _ = r.resolve(body)
	for _, c := range pairs(get(body, "content")) {
		req := "optional"
		if str(body, "required") == "true" {
			req = "required"
		}
		schema := get(c.value, "schema")
		r.printf("Request body (`%s`, %s): %s.\n\n", c.key, req, r.typeOf(schema))
		r.fieldTable(schema, "required")
		r.examples(c.value, "Example")
	}
}

// responses writes a table of every status an operation answers, with the
// error codes each carries, then the success answers' fields and examples.
func (r *renderer) responses(resps *yaml.Node) {
	r.printf("Responses:\n\n| status | meaning | codes | body |\n| --- | --- | --- | --- |\n")
	type success struct {
		status string
		media  pair
	}
	var ok []success
	for _, p := range pairs(resps) {
		resp, name := r.resolve(p.value)
		meaning := cell(str(resp, "description"))
		if name != "" {
			meaning = schemaLink(name) // described once, under Shared responses
		}
		var bodies []string
		for _, c := range pairs(get(resp, "content")) {
			bodies = append(bodies, r.typeOf(get(c.value, "schema")))
			if strings.HasPrefix(p.key, "2") {
				ok = append(ok, success{p.key, c})
			}
		}
		r.printf("| %s | %s | %s | %s |\n", p.key, meaning, r.codesOf(resp), strings.Join(bodies, ", "))
	}
	r.printf("\n")
	for _, s := range ok {
		if get(get(resps, s.status), "$ref") != nil {
			continue
		}
		schema := get(s.media.value, "schema")
		if hasFields(r.merged(schema)) && get(schema, "$ref") == nil {
			r.printf("The %s answer (`%s`):\n\n", s.status, s.media.key)
			r.fieldTable(schema, "always present")
		}
		r.examples(s.media.value, "Example answer")
	}
}

// codesRef finds an error code written as code in a description.
var codesRef = regexp.MustCompile("`([A-Z][A-Z_]+)`")

// codesOf lists the Error codes a response's description names, or that
// its example carries.
func (r *renderer) codesOf(resp *yaml.Node) string {
	var found []string
	add := func(code string) {
		if slices.Contains(r.codes, code) && !slices.Contains(found, code) {
			found = append(found, code)
		}
	}
	for _, m := range codesRef.FindAllStringSubmatch(str(resp, "description"), -1) {
		add(m[1])
	}
	for _, c := range pairs(get(resp, "content")) {
		add(str(get(c.value, "example"), "code"))
	}
	for i, c := range found {
		found[i] = "`" + c + "`"
	}
	return strings.Join(found, ", ")
}

// examples writes a media type's example, or each of its named examples.
func (r *renderer) examples(media *yaml.Node, label string) {
	if ex := get(media, "example"); ex != nil {
		r.jsonBlock(label+":", ex)
	}
	for _, e := range pairs(get(media, "examples")) {
		name := e.key
		if s := str(e.value, "summary"); s != "" {
			name += ", " + strings.ToLower(s[:1]) + s[1:]
		}
		r.jsonBlock(fmt.Sprintf("%s (%s):", label, name), get(e.value, "value"))
	}
}

// jsonBlock writes a caption and a value as a JSON code block.
func (r *renderer) jsonBlock(caption string, v *yaml.Node) {
	if v == nil {
		return
	}
	out, err := toJSON(v)
	if err != nil && r.err == nil {
		r.err = err
	}
	r.printf("%s\n\n```json\n%s\n```\n\n", caption, out)
}

// schemas writes every schema of the document's components.
func (r *renderer) schemas() {
	schemas := pairs(path(r.root, "components", "schemas"))
	if len(schemas) == 0 {
		return
	}
	r.printf("### Schemas\n\nThe shapes the routes above link to.\n\n")
	for _, s := range schemas {
		r.printf("#### `%s`\n\n", s.key)
		if d := strings.TrimSpace(str(s.value, "description")); d != "" {
			r.printf("%s\n\n", d)
		}
		if hasFields(r.merged(s.value)) {
			r.fieldTable(s.value, "required")
		} else {
			r.printf("Type: %s.\n\n", r.typeOf(s.value))
		}
	}
}

// sharedResponses writes the responses the document's components hold,
// which the routes' tables link to instead of repeating them.
func (r *renderer) sharedResponses() {
	resps := pairs(path(r.root, "components", "responses"))
	if len(resps) == 0 {
		return
	}
	r.printf("### Shared responses\n\nAnswers that several routes give, named in their tables.\n\n")
	for _, p := range resps {
		r.printf("#### `%s`\n\n", p.key)
		if d := strings.TrimSpace(str(p.value, "description")); d != "" {
			r.printf("%s\n\n", d)
		}
		for _, c := range pairs(get(p.value, "content")) {
			schema := get(c.value, "schema")
			r.printf("Body (`%s`): %s.\n\n", c.key, r.typeOf(schema))
			if get(schema, "$ref") == nil {
				r.fieldTable(schema, "always present")
			}
			r.examples(c.value, "Example")
		}
	}
}
