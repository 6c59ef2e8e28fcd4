package sim

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain collects garbage at four times the live heap, as the sim command
// does (unless GOGC says otherwise): the seeds' heaps are small and their
// garbage plentiful.
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(m.Run())
}
