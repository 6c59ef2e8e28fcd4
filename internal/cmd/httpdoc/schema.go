package main

import (
	"fmt"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v4"
)

// resolve follows a local $ref ("#/components/schemas/Lease") to the node it
// names; any other node is returned as it is. The name is the last segment
// of the reference, or "".
func (r *renderer) resolve(n *yaml.Node) (*yaml.Node, string) {
	ref := str(n, "$ref")
	if ref == "" {
		return n, ""
	}
	segs := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
	target := path(r.root, segs...)
	if !strings.HasPrefix(ref, "#/") || target == nil {
		if r.err == nil {
			r.err = fmt.Errorf("openapi.yaml line %d: a $ref the generator cannot follow: %s", n.Line, ref)
		}
		return nil, ""
	}
	return target, segs[len(segs)-1]
}

// schemaLink is a link to a schema of the Schemas section.
func schemaLink(name string) string {
	code := "`" + name + "`"
	return "[" + code + "](#" + slug(code) + ")"
}

// jsonTypes are the JSON types; a schema that allows them all allows any value.
var jsonTypes = []string{"object", "array", "string", "number", "boolean", "null"}

// typeOf says in a few words what a schema accepts.
func (r *renderer) typeOf(s *yaml.Node) string {
	if s == nil {
		return ""
	}
	if ref := str(s, "$ref"); ref != "" {
		_, name := r.resolve(s)
		return schemaLink(name)
	}
	if c := get(s, "const"); c != nil {
		j, _ := toJSON(c)
		return "`" + j + "`"
	}
	if e := scalars(get(s, "enum")); len(e) > 0 {
		return "one of `" + strings.Join(e, "`, `") + "`"
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		if alts := items(get(s, k)); len(alts) > 0 {
			var ts []string
			for _, a := range alts {
				ts = append(ts, r.typeOf(a))
			}
			return strings.Join(ts, " or ")
		}
	}
	t := get(s, "type")
	if t != nil && t.Kind == yaml.SequenceNode {
		ts := scalars(t)
		if len(ts) == len(jsonTypes) {
			return "any JSON value"
		}
		return strings.Join(ts, " or ")
	}
	return r.simpleType(s, str(s, "type"))
}

// simpleType says what a schema of one type accepts, with its bounds.
func (r *renderer) simpleType(s *yaml.Node, typ string) string {
	switch typ {
	case "array":
		item := get(s, "items")
		if item == nil {
			return "array"
		}
		if it := r.typeOf(item); it != "object" {
			return "array of " + it
		}
		return "array of objects"
	case "object", "":
		if ap := get(s, "additionalProperties"); ap != nil && ap.Kind == yaml.MappingNode {
			return "object of " + r.typeOf(ap) + " values"
		}
		if typ == "" && get(s, "properties") == nil && get(s, "allOf") == nil {
			return "any"
		}
		return "object"
	case "string":
		out := "string"
		switch f := str(s, "format"); f {
		case "":
		case "date-time":
			out += " (RFC 3339 time)"
		default:
			out += " (" + f + ")"
		}
		if m := str(s, "maxLength"); m != "" {
			out += ", at most " + m + " characters"
		}
		return out
	case "integer", "number":
		lo, hi := str(s, "minimum"), str(s, "maximum")
		switch {
		case lo != "" && hi != "":
			return typ + ", " + lo + " to " + hi
		case lo != "":
			return typ + ", at least " + lo
		case hi != "":
			return typ + ", at most " + hi
		}
	}
	return typ
}

// merged returns a schema's fields and required names, its allOf members'
// included, following $refs.
func (r *renderer) merged(s *yaml.Node) ([]pair, []string) {
	s, _ = r.resolve(s)
	if s == nil {
		return nil, nil
	}
	var props []pair
	var required []string
	for _, member := range items(get(s, "allOf")) {
		p, req := r.merged(member)
		props = append(props, p...)
		required = append(required, req...)
	}
	props = append(props, pairs(get(s, "properties"))...)
	required = append(required, scalars(get(s, "required"))...)
	return props, required
}

// hasFields reports whether merged found any field.
func hasFields(props []pair, _ []string) bool { return len(props) > 0 }

// fieldTable writes a schema's fields, nested inline objects as dotted
// paths; mark heads the column that says which fields are required.
func (r *renderer) fieldTable(s *yaml.Node, mark string) {
	props, required := r.merged(s)
	if len(props) == 0 {
		return
	}
	r.printf("| field | type | %s | description |\n| --- | --- | --- | --- |\n", mark)
	r.fieldRows(props, required, "")
	r.printf("\n")
}

// fieldRows writes one row per field, then the rows of the object it holds
// when that object is spelt out here rather than named.
func (r *renderer) fieldRows(props []pair, required []string, prefix string) {
	for _, p := range props {
		req := ""
		for _, name := range required {
			if name == p.key {
				req = "yes"
			}
		}
		name := prefix + p.key
		r.printf("| `%s` | %s | %s | %s |\n", name, r.typeOf(p.value), req, cell(str(p.value, "description")))
		if get(p.value, "$ref") != nil {
			continue
		}
		inner, innerPrefix := p.value, name+"."
		if str(p.value, "type") == "array" {
			inner, innerPrefix = get(p.value, "items"), name+"[]."
			if get(inner, "$ref") != nil {
				continue
			}
		}
		if get(inner, "properties") != nil {
			innerProps, innerReq := r.merged(inner)
			r.fieldRows(innerProps, innerReq, innerPrefix)
		}
	}
}

// cell makes text fit one cell of a Markdown table.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

// sentence ends a summary with a full stop.
func sentence(s string) string {
	if strings.HasSuffix(s, ".") || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "!") {
		return s
	}
	return s + "."
}

// slug is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, and nothing but letters, digits, hyphens and underscores.
func slug(heading string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case c == ' ':
			b.WriteByte('-')
		case c == '-', c == '_', unicode.IsLetter(c), unicode.IsDigit(c):
			b.WriteRune(c)
		}
	}
	return b.String()
}
