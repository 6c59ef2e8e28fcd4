package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The shipped binary carries none of internal/mutant's switches: built as
// it ships (without the mutants tag), its symbol table names nothing of the
// package, since every switch is a constant that the compiler folds away.
// When this test is built with -tags mutants (CI's mutation run), it builds
// the binary with the tag too, whose symbol table must name the switches:
// the check can fail. (A test binary has no symbol table to read.)
func TestTheShippedBinaryCarriesNoMutationSwitch(t *testing.T) {
	const pkg = "github.com/execstore/execstore/internal/mutant."
	bin := filepath.Join(t.TempDir(), "execstore")
	build := []string{"build", "-o", bin}
	if mutantsBuilt {
		build = append(build, "-tags", "mutants")
	}
	if out, err := exec.Command("go", append(build, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	found := symbolsOf(t, bin, pkg)
	switch {
	case !mutantsBuilt && len(found) > 0:
		t.Fatalf("the binary built without the mutants tag carries %d symbols of internal/mutant: %v", len(found), found)
	case mutantsBuilt && !containsAll(found, pkg+"SkipFsync", pkg+"SkipCRC", pkg+"All"):
		t.Fatalf("the binary built with the mutants tag lacks the switches' symbols (found %v): the check cannot see them", found)
	}
}

// symbolsOf returns the symbols of the binary at path whose names start with
// prefix.
func symbolsOf(t *testing.T, path, prefix string) []string {
	t.Helper()
	out, err := exec.Command("go", "tool", "nm", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm: %v\n%s", err, out)
	}
	var found []string
	symbols := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		symbols++
		if name := f[len(f)-1]; strings.HasPrefix(name, prefix) {
			found = append(found, name)
		}
	}
	if symbols < 1000 {
		t.Fatalf("go tool nm listed %d symbols of %s: its output was not understood:\n%.2000s", symbols, path, out)
	}
	return found
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, s := range list {
			found = found || s == w
		}
		if !found {
			return false
		}
	}
	return true
}

// The sim command offers -mutant only in a binary built with the mutants
// tag; without it the flag is unknown, and the help says where it is.
func TestTheSimCommandOffersMutantOnlyWithTheTag(t *testing.T) {
	var out, errOut bytes.Buffer
	run([]string{"sim", "-h"}, &out, &errOut)
	help := errOut.String()
	if !strings.Contains(help, "exists only in a binary built with -tags mutants") {
		t.Errorf("the sim help does not say where -mutant is:\n%s", help)
	}
	if offered := strings.Contains(help, "\n  -mutant string\n"); offered != mutantsBuilt {
		t.Fatalf("built with the mutants tag: %v; the sim help offers -mutant: %v\n%s", mutantsBuilt, offered, help)
	}
	if mutantsBuilt {
		return
	}
	errOut.Reset()
	err := run([]string{"sim", "-seeds", "1", "-ops", "10", "-lin", "0", "-dispatch", "0", "-workflow", "0", "-replicated", "0",
		"-mutant", "SkipFsync", "-dir", t.TempDir()}, &out, &errOut)
	if err == nil || !strings.Contains(errOut.String(), "flag provided but not defined: -mutant") {
		t.Fatalf("sim -mutant without the tag returned %v:\n%s", err, errOut.String())
	}
}
