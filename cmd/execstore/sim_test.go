package main

import (
	"bytes"
	"strings"
	"testing"
)

// sim -coverage prints the table and fails when a required cell stays at
// zero, as it must over a run too short to reach them all.
func TestSimCoverageFailsOnARequiredCellAtZero(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run([]string{"sim", "-seeds", "1", "-ops", "30", "-lin", "0", "-workflow", "0", "-replicated", "0", "-coverage", "-dir", t.TempDir()}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "required coverage cells not reached") {
		t.Fatalf("sim -coverage over 30 operations returned %v", err)
	}
	if !strings.Contains(out.String(), "(required)") || !strings.Contains(out.String(), "sim: 1 seeds, 30 ops") {
		t.Fatalf("no coverage table or summary line:\n%s", out.String())
	}
}
