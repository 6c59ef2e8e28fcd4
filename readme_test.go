package execstore_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The README is the front door and docs/ the manual. Every promise either
// makes names the tests that would fail if it became false: the guarantees
// table (docs/guarantees.md) has a "tested by" column, and each paragraph of
// the server's rules (docs/http.md), of serving and the limits
// (docs/operating.md), and each design record (docs/design/) ends with
// "(tests: `TestX`, `TestY`)". These tests keep that mapping from rotting: a
// renamed or deleted test, or a promise added without its tests, fails here.
// They also keep the README's first two commands as they are, every
// guarantee briefed in the README, and every relative link leading to a file
// (and heading) that exists.

// cited matches a test, example or fuzz target the manual names.
var cited = regexp.MustCompile("`((?:Test|Example|Fuzz)[A-Za-z0-9_]*)`")

// testsLine matches a paragraph's closing citation.
var testsLine = regexp.MustCompile("\\(tests: `(?:Test|Example|Fuzz)[A-Za-z0-9_]*`(?:, `(?:Test|Example|Fuzz)[A-Za-z0-9_]*`)*\\)$")

// citingSections are the sections whose every paragraph must end with its
// tests, besides the design records: the README's "The HTTP server" and
// "Limits" sections before the manual moved to docs/, where they now live
// (the serving flags of the first under operating's "Serving").
var citingSections = []struct{ file, heading string }{
	{"docs/http.md", "## The HTTP server"},
	{"docs/operating.md", "## Serving"},
	{"docs/operating.md", "## Limits"},
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docFiles returns README.md and every Markdown file under docs/, as
// slash-separated paths from the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir("docs", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, filepath.ToSlash(p))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("found only %q: the manual was not found", files)
	}
	return files
}

// designRecords returns the files of docs/design/ but its index.
func designRecords(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, f := range docFiles(t) {
		if path.Dir(f) == "docs/design" && path.Base(f) != "README.md" {
			out = append(out, f)
		}
	}
	if len(out) < 10 {
		t.Fatalf("found only %d design records: %q", len(out), out)
	}
	return out
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

// section returns a file's section under the heading line (such as
// "## Limits"), up to the next heading of level one or two.
func section(t *testing.T, file, text, heading string) string {
	t.Helper()
	start := strings.Index("\n"+text, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("%s has no section %q", file, heading)
	}
	rest := text[start:]
	end := len(rest)
	for _, next := range []string{"\n## ", "\n# "} {
		if i := strings.Index(rest[1:], next); i >= 0 && i+1 < end {
			end = i + 1
		}
	}
	return rest[:end]
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

func TestTheManualCitesOnlyTestsThatExist(t *testing.T) {
	defined := definedTests(t)
	if len(defined) < 100 {
		t.Fatalf("found only %d test functions: the search did not cover the repository", len(defined))
	}
	for _, f := range docFiles(t) {
		seen := map[string]bool{}
		for _, m := range cited.FindAllStringSubmatch(readDoc(t, f), -1) {
			if name := m[1]; !defined[name] && !seen[name] {
				seen[name] = true
				t.Errorf("%s cites %s, which no _test.go file defines", f, name)
			}
		}
	}
}

// guaranteeRow is a row of the guarantees table.
type guaranteeRow struct{ anchor, label string }

// guaranteeHeader is the table's header row.
var guaranteeHeader = regexp.MustCompile(`(?m)^\| \| guarantee \| tested by \|$`)

// rowAnchor is how a row's first cell makes the row a link target.
var rowAnchor = regexp.MustCompile(`^\| <a id="([a-z0-9-]+)"></a>(.+)$`)

// guaranteeRows checks the guarantees table as the README's was checked
// (three cells a row, each row citing a test) and returns its rows.
func guaranteeRows(t *testing.T) []guaranteeRow {
	t.Helper()
	const file = "docs/guarantees.md"
	table := section(t, file, readDoc(t, file), "# Guarantees")
	if !guaranteeHeader.MatchString(table) {
		t.Errorf("%s: the table has no \"tested by\" column", file)
	}
	var rows []guaranteeRow
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| ") || guaranteeHeader.MatchString(line) || strings.HasPrefix(line, "| --- ") {
			continue
		}
		cells := strings.Split(strings.ReplaceAll(line, `\|`, ""), " | ")
		if len(cells) != 3 {
			t.Errorf("%s: a row with %d cells, want 3: %.60s...", file, len(cells), line)
			continue
		}
		m := rowAnchor.FindStringSubmatch(cells[0])
		if m == nil {
			t.Errorf("%s: the %q row has no anchor (<a id=\"...\"></a>) for the README to link to", file, strings.TrimPrefix(cells[0], "| "))
			continue
		}
		rows = append(rows, guaranteeRow{m[1], m[2]})
		if !cited.MatchString(cells[2]) {
			t.Errorf("%s: the %q guarantee cites no test", file, m[2])
		}
	}
	if len(rows) < 10 {
		t.Errorf("%s: found %d rows: the table was not understood", file, len(rows))
	}
	return rows
}

func TestEveryPromiseCitesItsTests(t *testing.T) {
	guaranteeRows(t)
	check := func(where, text string) {
		paras := paragraphs(text)
		if len(paras) == 0 {
			t.Errorf("%s: no prose found", where)
		}
		for _, p := range paras {
			if !testsLine.MatchString(p) {
				t.Errorf("%s: a paragraph does not end with its (tests: ...): %.80s...", where, p)
			}
		}
	}
	for _, s := range citingSections {
		check(s.file+" "+s.heading, section(t, s.file, readDoc(t, s.file), s.heading))
	}
	for _, f := range designRecords(t) {
		check(f, readDoc(t, f))
	}
}

// The two commands at the very top of the README are what CI runs and what
// a newcomer types first: they stay first and word for word.
func TestTheREADMEOpensWithItsTwoCommands(t *testing.T) {
	const top = "# execstore\n\n```sh\n" +
		"go run ./cmd/execstore serve          # serve the store kept in ./execstore-data on 127.0.0.1:7070\n" +
		"go test -race -count=1 ./...          # the tests (what CI runs, after gofmt, go vet and staticcheck)\n" +
		"```\n"
	if readme := readDoc(t, "README.md"); !strings.HasPrefix(readme, top) {
		t.Errorf("the README does not open with its two commands:\n%s\nit opens with:\n%.400s", top, readme)
	}
	if ci := readDoc(t, ".ci/run"); !strings.Contains(ci, "\ngo test -race -count=1 ./...\n") {
		t.Error(".ci/run does not run the README's test command")
	}
}

// The README is a front door: short enough to read at one sitting, with
// the rest in docs/.
func TestTheREADMEStaysAFrontDoor(t *testing.T) {
	if n := strings.Count(readDoc(t, "README.md"), "\n"); n > 200 {
		t.Errorf("the README has %d lines, more than 200: move the detail into docs/", n)
	}
}

// The README briefs every guarantee, in the table's order, each line
// linking to its row.
func TestTheREADMEBriefsEveryGuarantee(t *testing.T) {
	const file = "README.md"
	brief := section(t, file, readDoc(t, file), "## Guarantees in brief")
	item := regexp.MustCompile(`(?m)^- \[([^\]]+)\]\(docs/guarantees\.md#([a-z0-9-]+)\): \S`)
	var briefed, rows []string
	for _, m := range item.FindAllStringSubmatch(brief, -1) {
		briefed = append(briefed, m[2])
	}
	for _, r := range guaranteeRows(t) {
		rows = append(rows, r.anchor)
	}
	if !slices.Equal(briefed, rows) {
		t.Errorf("the README briefs the guarantees %q, the table's rows are %q", briefed, rows)
	}
}

// Every page of docs/design/ is listed in its index.
func TestEveryDesignRecordIsInItsIndex(t *testing.T) {
	index := readDoc(t, "docs/design/README.md")
	for _, f := range designRecords(t) {
		if !strings.Contains(index, "]("+path.Base(f)+")") {
			t.Errorf("docs/design/README.md does not link to %s", path.Base(f))
		}
	}
}

// link matches a Markdown link or image target: [text](target) or
// [text](target "title").
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// codeSpan matches inline code, which holds no links.
var codeSpan = regexp.MustCompile("`[^`\n]*`")

// Every relative link of the README and the manual leads to a file that
// exists, and a link with a #fragment into a Markdown file to a heading or
// an id="..." anchor that it has.
func TestEveryRelativeLinkLeadsSomewhere(t *testing.T) {
	anchors := map[string]map[string]bool{}
	links := 0
	for _, f := range docFiles(t) {
		for _, target := range linkTargets(readDoc(t, f)) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, frag, _ := strings.Cut(target, "#")
			dest := f
			if file != "" {
				dest = path.Clean(path.Join(path.Dir(f), file))
				if _, err := os.Stat(filepath.FromSlash(dest)); err != nil {
					t.Errorf("%s links to %s, which does not exist (%s)", f, target, dest)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if anchors[dest] == nil {
				anchors[dest] = anchorsOf(readDoc(t, dest))
			}
			if !anchors[dest][frag] {
				t.Errorf("%s links to %s, but %s has no heading or anchor %q", f, target, dest, frag)
			}
		}
	}
	if links < 100 {
		t.Errorf("found only %d relative links: the links were not understood", links)
	}
}

// linkTargets returns the link targets of a Markdown text, outside code.
func linkTargets(text string) []string {
	var out []string
	code := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			code = !code
			continue
		}
		if code {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, "code"), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// anchorsOf returns the anchors of a Markdown text: its headings as GitHub
// names them (repeats numbered -1, -2, ...) and its id="..." attributes.
func anchorsOf(text string) map[string]bool {
	out := map[string]bool{}
	id := regexp.MustCompile(`\bid="([^"]+)"`)
	code := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			code = !code
			continue
		}
		if code {
			continue
		}
		for _, m := range id.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		heading := strings.TrimLeft(line, "#")
		if len(heading) == len(line) || len(line)-len(heading) > 6 || !strings.HasPrefix(heading, " ") {
			continue
		}
		base := slug(heading)
		s := base
		for i := 1; out[s]; i++ {
			s = base + "-" + strconv.Itoa(i)
		}
		out[s] = true
	}
	return out
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
