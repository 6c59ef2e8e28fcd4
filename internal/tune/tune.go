// Package tune lets the crash simulator open stores whose states are cut
// into small pieces (fsm.Sizes), so that its states of a few dozen records
// reach the code that compacts them, as a state of millions does: a change
// log that compacts itself a chunk of 256 entries at a time would never
// compact within a simulated run.
//
// The sizes are no option of the public API: they change no result, no
// encoding and no replay, only how a structure is cut into pieces, and a
// user has nothing to gain from them. Nor are they process-wide variables:
// each store's states have their own, so a store the simulator made small
// and any other in the same process never see each other's. This package,
// internal to the module, is the door: the root package, which alone can
// set an Options' hidden sizes, fills in SetSizes when it is initialised.
package tune

import (
	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"

	"github.com/execstore/execstore/fsm"
)

// SetSizes makes the stores opened with opts, an *execstore.Options (for a
// replicated store, its ReplicaOptions' Options), cut their states by sz:
// the state each loads or restores, and so every copy of it. It panics on
// anything else. Set by the root package's init; nil in a program that does
// not link it.
var SetSizes func(opts any, sz fsm.Sizes)

// SetArchiveFS makes the stores opened with opts, an *execstore.Options,
// keep their archive (Options.Archive) in fs instead of the operating
// system's files: the crash simulator's in-memory filesystem, which it
// clones as a crash would leave it. Set by the root package's init.
var SetArchiveFS func(opts any, fs pebblevfs.FS)
