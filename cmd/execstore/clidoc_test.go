package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// docs/cli.md lists every command's flags: each flag a command's -h prints
// is spelt "--name" in that command's section, so a flag added without its
// line in the manual fails here.
func TestTheCLIDocListsEveryCommandAndFlag(t *testing.T) {
	raw, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	commands := map[string][][]string{
		"serve":   {{"serve"}},
		"inspect": {{"inspect", "summary"}, {"inspect", "get"}, {"inspect", "list"}, {"inspect", "wal", "dump"}, {"inspect", "verify"}},
		"demo":    {{"demo"}},
		"sim":     {{"sim"}},
		"cluster": {{"cluster", "start"}, {"cluster", "status"}, {"cluster", "add"}, {"cluster", "remove"}},
	}
	var usage bytes.Buffer
	if err := run([]string{"help"}, &usage, &usage); err != nil {
		t.Fatal(err)
	}
	listed := regexp.MustCompile(`(?m)^  ([a-z]+) `).FindAllStringSubmatch(usage.String(), -1)
	if len(listed) != len(commands) {
		t.Errorf("execstore lists %d commands, the test knows %d: %q", len(listed), len(commands), listed)
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	for _, m := range listed {
		name := m[1]
		sec := cliSection(doc, name)
		if sec == "" {
			t.Errorf("docs/cli.md has no section \"## %s\"", name)
			continue
		}
		for _, args := range commands[name] {
			var out, errOut bytes.Buffer
			_ = run(append(args, "-h"), &out, &errOut)
			flags := flagLine.FindAllStringSubmatch(errOut.String(), -1)
			if len(flags) == 0 {
				t.Errorf("%s -h printed no flags:\n%s", strings.Join(args, " "), errOut.String())
			}
			for _, f := range flags {
				if !strings.Contains(sec, "`--"+f[1]) {
					t.Errorf("docs/cli.md's %q section does not list %s's flag --%s", name, strings.Join(args, " "), f[1])
				}
			}
		}
	}
}

// cliSection returns the text under "## name" up to the next such heading.
func cliSection(doc, name string) string {
	start := strings.Index(doc, "\n## "+name+"\n")
	if start < 0 {
		return ""
	}
	rest := doc[start+1:]
	if end := strings.Index(rest[1:], "\n## "); end >= 0 {
		rest = rest[:end+1]
	}
	return rest
}
