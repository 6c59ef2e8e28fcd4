package execstore

import (
	pebblevfs "github.com/cockroachdb/pebble/v2/vfs"

	"github.com/execstore/execstore/fsm"
	"github.com/execstore/execstore/internal/tune"
)

// The sizes a store's states are cut by (fsm.Sizes: how many entries a chunk
// of the change log holds, how much dead weight it carries before a sweep)
// change no result, no encoding and no replay, so they are not an option: a
// user has nothing to gain from them. The crash simulator makes them small,
// so that its states of a few dozen records reach the code that compacts
// them, and it reaches an Options' hidden field through internal/tune, which
// only this module can import. Each store keeps its own sizes, from its
// options to every state it loads, restores or copies: nothing is shared by
// the stores of one process.
func init() {
	tune.SetSizes = func(opts any, sz fsm.Sizes) {
		o, ok := opts.(*Options)
		if !ok {
			panic("tune.SetSizes: not an *execstore.Options")
		}
		o.sizes = sz
	}
	tune.SetArchiveFS = func(opts any, fs pebblevfs.FS) {
		o, ok := opts.(*Options)
		if !ok {
			panic("tune.SetArchiveFS: not an *execstore.Options")
		}
		o.archiveFS = fs
	}
}
