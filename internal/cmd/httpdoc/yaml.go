package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v4"
)

// The document is read as YAML nodes rather than decoded into maps, so that
// paths, operations, fields and examples come out in the order openapi.yaml
// gives them.

// pair is one entry of a YAML mapping.
type pair struct {
	key   string
	value *yaml.Node
}

// pairs returns a mapping's entries in order; nothing for any other node.
func pairs(n *yaml.Node) []pair {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([]pair, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, pair{n.Content[i].Value, n.Content[i+1]})
	}
	return out
}

// get returns the value under key in a mapping, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	for _, p := range pairs(n) {
		if p.key == key {
			return p.value
		}
	}
	return nil
}

// path follows keys from n, or returns nil.
func path(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		n = get(n, k)
	}
	return n
}

// str returns the scalar under key, or "".
func str(n *yaml.Node, key string) string {
	if v := get(n, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

// items returns a sequence's elements; nothing for any other node.
func items(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// scalars returns a sequence's scalar values, or a lone scalar's.
func scalars(n *yaml.Node) []string {
	if n != nil && n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, e := range items(n) {
		out = append(out, e.Value)
	}
	return out
}

// toJSON writes a YAML value as compact JSON, keys in the document's order.
func toJSON(n *yaml.Node) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, n); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSON(b *strings.Builder, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		return writeJSON(b, n.Content[0])
	case yaml.AliasNode:
		return writeJSON(b, n.Alias)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i, p := range pairs(n) {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSONScalar(b, p.key); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeJSON(b, p.value); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		if err := writeJSONScalar(b, v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
	}
	return nil
}

// writeJSONScalar writes v as JSON, leaving <, > and & as they are: the
// examples are read by people, not embedded in HTML.
func writeJSONScalar(b *strings.Builder, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return nil
}
