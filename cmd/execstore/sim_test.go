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

// sim -workflow runs the workflow checks, counts a violation in the summary
// line, and prints the command that reruns the failing seed with the same
// mutant.
func TestSimWorkflowChecksReportAViolationWithItsRerunCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run([]string{"sim", "-seeds", "0", "-lin", "0", "-dispatch", "0", "-workflow", "1", "-replicated", "0", "-dir", t.TempDir()}, &out, &errOut)
	if err != nil || !strings.Contains(errOut.String(), "sim: workflow checks: 1 seeds, ") || !strings.Contains(out.String(), " 0 violations") {
		t.Fatalf("a workflow check of the correct code returned %v:\n%s%s", err, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	err = run([]string{"sim", "-seeds", "0", "-lin", "0", "-dispatch", "0", "-workflow", "1", "-replicated", "0", "-mutant", "WorkflowRerunsSavedSteps", "-dir", t.TempDir()}, &out, &errOut)
	rerun := "-workflow 1 -seed 1 -mutant WorkflowRerunsSavedSteps"
	if err == nil || !strings.Contains(out.String(), " 1 violations") ||
		!strings.Contains(errOut.String(), "workflow seed 1: VIOLATION") || !strings.Contains(errOut.String(), rerun) {
		t.Fatalf("a workflow check with a step run again returned %v:\n%s%s", err, out.String(), errOut.String())
	}
}

// sim -replicated runs replicated worlds, prints what they reached, counts a
// violation in the summary line, and prints the command that reruns the
// failing seed with the same mutant.
func TestSimReplicatedWorldsReportAViolationWithItsRerunCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run([]string{"sim", "-seeds", "0", "-lin", "0", "-dispatch", "0", "-workflow", "0", "-replicated", "1", "-dir", t.TempDir()}, &out, &errOut)
	if err != nil || !strings.Contains(errOut.String(), "sim: replicated worlds: 1 seeds, ") || !strings.Contains(out.String(), " 0 violations") {
		t.Fatalf("a replicated world of the correct code returned %v:\n%s%s", err, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	err = run([]string{"sim", "-seeds", "0", "-lin", "0", "-dispatch", "0", "-workflow", "0", "-replicated", "1", "-mutant", "ReplicaStampsOwnClock", "-dir", t.TempDir()}, &out, &errOut)
	rerun := "-replicated 1 -seed 1 -mutant ReplicaStampsOwnClock"
	if err == nil || !strings.Contains(out.String(), " 1 violations") ||
		!strings.Contains(errOut.String(), "replicated seed 1: VIOLATION") || !strings.Contains(errOut.String(), rerun) {
		t.Fatalf("a replicated world whose leaders stamp with their own clocks returned %v:\n%s%s", err, out.String(), errOut.String())
	}
}
