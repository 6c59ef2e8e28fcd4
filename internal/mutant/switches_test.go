package mutant

import (
	"go/ast"
	"go/build"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"testing"
)

// Without the mutants tag every switch is a constant false, and the package
// declares nothing else: no variable a build could set, no Set, no All. With
// the tag the same names are bool variables, plus Set and All. The test
// type-checks the package's files as each build selects them, so it holds
// whichever tags the test binary itself was built with, and its second half
// shows it can tell a variable from a constant.
func TestEverySwitchIsAConstantFalseWithoutTheTag(t *testing.T) {
	off := buildScope(t)
	var names []string
	for _, name := range off.Names() {
		c, ok := off.Lookup(name).(*types.Const)
		if !ok || c.Val().Kind() != constant.Bool || constant.BoolVal(c.Val()) {
			t.Errorf("without the mutants tag, %s is %v: every name must be a constant false", name, off.Lookup(name))
			continue
		}
		names = append(names, name)
	}
	if len(names) < 10 {
		t.Fatalf("the default build declares only %d switches: the check checks nothing", len(names))
	}

	on := buildScope(t, "mutants")
	want := append(slices.Clone(names), "All", "Set")
	slices.Sort(want)
	if got := on.Names(); !slices.Equal(got, want) {
		t.Fatalf("with the mutants tag the package declares %v, want the default build's switches and All and Set: %v", got, want)
	}
	for _, name := range names {
		v, ok := on.Lookup(name).(*types.Var)
		if !ok || !types.Identical(v.Type(), types.Typ[types.Bool]) {
			t.Errorf("with the mutants tag, %s is %v, want a bool variable", name, on.Lookup(name))
		}
	}
}

// buildScope type-checks this package's non-test files as a build with the
// given tags selects them, and returns its scope.
func buildScope(t *testing.T, tags ...string) *types.Scope {
	t.Helper()
	ctxt := build.Default
	ctxt.BuildTags = tags
	p, err := ctxt.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.Default()}
	pkg, err := conf.Check("internal/mutant", fset, files, nil)
	if err != nil {
		t.Fatalf("type-checking the build with tags %v: %v", tags, err)
	}
	return pkg.Scope()
}
