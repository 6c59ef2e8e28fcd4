//go:build !invariants

package fsm

// checkPrecheck is off outside the invariants build: see
// precheck_invariants.go.
const checkPrecheck = false

func (s *State) fingerprint() [32]byte { return [32]byte{} }

func (s *State) unchanged([32]byte, *Command) {}
