//go:build !race

package execstore

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
