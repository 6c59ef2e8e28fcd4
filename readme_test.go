package execstore_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every promise of the README names the tests that would fail if it became
// false: the Guarantees table has a "tested by" column, and each paragraph of
// the Limits and HTTP server sections and each design note ends with
// "(tests: `TestX`, `TestY`)". These tests keep that mapping from rotting: a
// renamed or deleted test, or a promise added without its tests, fails here.

// cited matches a test, example or fuzz target the README names.
var cited = regexp.MustCompile("`((?:Test|Example|Fuzz)[A-Za-z0-9_]*)`")

// testsLine matches a paragraph's closing citation.
var testsLine = regexp.MustCompile("\\(tests: `(?:Test|Example|Fuzz)[A-Za-z0-9_]*`(?:, `(?:Test|Example|Fuzz)[A-Za-z0-9_]*`)*\\)$")

func readREADME(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// definedTests returns the name of every Test, Example and Fuzz function in
// the repository's _test.go files.
func definedTests(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Example|Fuzz)[A-Za-z0-9_]*)\(`)
	names := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// section returns the README's section under the heading "## name".
func section(t *testing.T, readme, name string) string {
	t.Helper()
	start := strings.Index(readme, "\n## "+name+"\n")
	if start < 0 {
		t.Fatalf("the README has no section %q", name)
	}
	rest := readme[start+1:]
	if end := strings.Index(rest[1:], "\n## "); end >= 0 {
		rest = rest[:end+1]
	}
	return rest
}

// paragraphs returns a section's prose paragraphs and list items, each
// joined into one line: not its heading, tables or code.
func paragraphs(sec string) []string {
	var out []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.Join(cur, " "))
			cur = nil
		}
	}
	code := false
	for _, line := range strings.Split(sec, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			code = !code
			flush()
		case code, strings.HasPrefix(trimmed, "#"):
		case trimmed == "", strings.HasPrefix(trimmed, "|"):
			flush()
		case strings.HasPrefix(line, "- "):
			flush()
			cur = append(cur, trimmed)
		default:
			cur = append(cur, trimmed)
		}
	}
	flush()
	return out
}

func TestTheREADMECitesOnlyTestsThatExist(t *testing.T) {
	defined := definedTests(t)
	if len(defined) < 100 {
		t.Fatalf("found only %d test functions: the search did not cover the repository", len(defined))
	}
	seen := map[string]bool{}
	for _, m := range cited.FindAllStringSubmatch(readREADME(t), -1) {
		if name := m[1]; !defined[name] && !seen[name] {
			seen[name] = true
			t.Errorf("the README cites %s, which no _test.go file defines", name)
		}
	}
}

func TestEveryREADMEPromiseCitesItsTests(t *testing.T) {
	readme := readREADME(t)

	rows := 0
	header := regexp.MustCompile(`(?m)^\| \| guarantee \| tested by \|$`)
	guarantees := section(t, readme, "Guarantees")
	if !header.MatchString(guarantees) {
		t.Error("the Guarantees table has no \"tested by\" column")
	}
	for _, line := range strings.Split(guarantees, "\n") {
		if !strings.HasPrefix(line, "| ") || header.MatchString(line) || strings.HasPrefix(line, "| --- ") {
			continue
		}
		cells := strings.Split(strings.ReplaceAll(line, `\|`, ""), " | ")
		if len(cells) != 3 {
			t.Errorf("a Guarantees row with %d cells, want 3: %.60s...", len(cells), line)
			continue
		}
		rows++
		if !cited.MatchString(cells[2]) {
			t.Errorf("the %q guarantee cites no test", strings.TrimPrefix(cells[0], "| "))
		}
	}
	if rows < 10 {
		t.Errorf("found %d Guarantees rows: the table was not understood", rows)
	}

	for _, name := range []string{"Limits", "The HTTP server", "Design notes"} {
		paras := paragraphs(section(t, readme, name))
		if len(paras) == 0 {
			t.Errorf("%s: no prose found", name)
		}
		for _, p := range paras {
			if !testsLine.MatchString(p) {
				t.Errorf("%s: a paragraph does not end with its (tests: ...): %.80s...", name, p)
			}
		}
	}
}
