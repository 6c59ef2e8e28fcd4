package fsm

// seeds returns how many seeds a randomized test of the state machine runs:
// n, or a quarter of n under the race detector. The state machine runs in
// one goroutine, so what the detector adds to these tests is time, not
// findings; the invariants build runs them in full without it.
func seeds(n uint64) uint64 {
	if raceEnabled {
		return max(1, n/4)
	}
	return n
}
