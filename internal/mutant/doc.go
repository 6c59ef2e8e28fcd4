// Package mutant holds deliberate bugs that the crash simulator must catch.
//
// A harness that never fails proves nothing. Each switch, when on, breaks one
// guarantee in the real code path that provides it; the simulator's mutation
// tests turn them on one at a time and require that a bounded number of
// seeds finds a violation.
//
// The switches exist only in builds with the mutants tag. In every other
// build, the library's and the shipped binary's included, each switch is a
// constant false (switches_off.go): a read such as `if mutant.SkipFsync` is
// dead code the compiler removes, nothing can turn a switch on, and the
// binary carries no trace of them (TestTheShippedBinaryCarriesNoMutationSwitch
// in cmd/execstore reads its symbol table). With -tags mutants the same
// names are variables (switches_on.go), and Set and All exist:
//
//	go test -tags mutants -run TestEachMutationIsCaughtWithinTheSeedBound ./sim
//	go run -tags mutants ./cmd/execstore sim -mutant SkipFsync -seeds 20
//
// The code that reads a switch is the same in both builds. Tests that turn
// a switch on carry the mutants build constraint, must not run in parallel
// with other tests of the same binary, and must turn it off again (Set
// returns the function that does).
package mutant
