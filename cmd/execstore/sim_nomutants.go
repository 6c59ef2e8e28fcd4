//go:build !mutants

package main

import (
	"errors"
	"flag"
)

// mutantsBuilt says whether this binary has internal/mutant's switches as
// variables (built with -tags mutants) and so the sim command's -mutant flag.
// This build has neither: every switch is a constant false.
const mutantsBuilt = false

// mutantFlag defines no flag: without the mutants tag there is no switch to
// turn on, and the sim command refuses -mutant as an unknown flag. It returns
// the name of no mutation.
func mutantFlag(*flag.FlagSet) *string { return new(string) }

// setMutant is never reached: mutantFlag's name stays empty.
func setMutant(string) (reset func(), err error) {
	return nil, errors.New("sim: this binary has no mutants (build it with -tags mutants)")
}
