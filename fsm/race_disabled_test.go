//go:build !race

package fsm

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
