//go:build mutants

package mutant

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"sort"
	"testing"
)

// Every bool variable of this package is in All under its own name, and All
// names nothing else.
func TestAllNamesEverySwitch(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "switches_on.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "bool" {
				for _, n := range vs.Names {
					declared = append(declared, n.Name)
				}
			}
		}
	}
	var named []string
	for n := range All {
		named = append(named, n)
	}
	sort.Strings(declared)
	sort.Strings(named)
	if len(declared) < 10 || !slices.Equal(declared, named) {
		t.Fatalf("switches declared %v, All names %v", declared, named)
	}
	for n, v := range All {
		*v = true
		on := 0
		for _, w := range All {
			if *w {
				on++
			}
		}
		*v = false
		if on != 1 {
			t.Fatalf("All[%q] does not point to its own switch", n)
		}
	}
}
