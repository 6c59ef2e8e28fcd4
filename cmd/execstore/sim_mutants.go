//go:build mutants

package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/execstore/execstore/internal/mutant"
)

// mutantsBuilt says whether this binary has internal/mutant's switches as
// variables (built with -tags mutants) and so the sim command's -mutant flag.
const mutantsBuilt = true

// mutantFlag defines the sim command's -mutant flag.
func mutantFlag(fs *flag.FlagSet) *string {
	return fs.String("mutant", "", "turn on one deliberate bug to watch the simulator catch it (only in a binary built with -tags mutants): "+
		strings.Join(mutantNames(), ", "))
}

// setMutant turns on the switch of internal/mutant of that name and returns
// the function that turns it off.
func setMutant(name string) (reset func(), err error) {
	v, ok := mutant.All[name]
	if !ok {
		return nil, fmt.Errorf("sim: unknown mutant %q (want one of %s)", name, strings.Join(mutantNames(), ", "))
	}
	return mutant.Set(v), nil
}

func mutantNames() []string {
	names := make([]string, 0, len(mutant.All))
	for n := range mutant.All {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
