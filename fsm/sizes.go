package fsm

import "github.com/execstore/execstore/fsm/internal/chunk"

// Sizes are how a state cuts its structures into pieces: how many entries a
// chunk of the change log holds, how much dead weight the log carries before
// the writer sweeps it. They change no result, no encoding and no replay: a
// state applies every command with the same result and encodes to the same
// bytes whatever its sizes; only the memory a piece holds and how often a
// piece is compacted change. So they are not part of a snapshot, and a state
// decoded from one has the default sizes until SetSizes says otherwise.
//
// A store never changes them (its states have the defaults). The crash
// simulator makes them small, so that its states of a few dozen records
// reach the code that compacts them, as a state of millions does.
type Sizes struct {
	// FeedChunk is the most entries a chunk of the change log holds.
	// Default 256; at least 4 (a smaller one is taken as 4), so that the
	// log's bound (see CheckInvariants) holds.
	FeedChunk int
	// FeedSweep: the change log is swept while it holds more than FeedSweep
	// times as many entries as there are records, plus a quarter chunk.
	// Default 2.
	FeedSweep int
}

// The default sizes, those of every state SetSizes did not change.
const (
	DefaultFeedChunk = 256
	DefaultFeedSweep = 2
	minFeedChunk     = 4
)

// withDefaults returns sz with every field not above zero at its default.
func (sz Sizes) withDefaults() Sizes {
	if sz.FeedChunk <= 0 {
		sz.FeedChunk = DefaultFeedChunk
	} else if sz.FeedChunk < minFeedChunk {
		sz.FeedChunk = minFeedChunk
	}
	if sz.FeedSweep <= 0 {
		sz.FeedSweep = DefaultFeedSweep
	}
	return sz
}

// Sizes returns the state's sizes, every field set.
func (s *State) Sizes() Sizes { return s.list.feed.sizes.withDefaults() }

// SetSizes makes the state cut its structures by sz from now on (a zero
// field means its default), cutting again, in one pass, what it holds
// already: the change log's entries, live or not, in their order, into
// chunks of the new size, then sweeping it once over if it holds more
// than the new sizes let it, so that it is within its bound from the
// start. It changes no result and no encoding. Its copies
// keep the sizes they were copied with, and a state's Copy takes its sizes.
func (s *State) SetSizes(sz Sizes) {
	sz = sz.withDefaults()
	f := &s.list.feed
	if f.sizes.withDefaults() == sz {
		f.sizes = sz
		return
	}
	old := *f
	*f = feed{sizes: sz}
	if old.chunks == nil {
		return
	}
	old.chunks.Scan(func(c *chunk.Feed) bool {
		for i := range c.Len() {
			f.append(c.Entry(i), s.gen)
		}
		return true
	})
	if f.chunks == nil {
		return // the log held no entry
	}
	// A pass of sweep steps drops every dead entry but the last chunk's.
	for steps := f.chunks.Len(); steps > 0; steps-- {
		f.sweepIfOver(s.execs.Len(), &s.list.adm, s.gen)
	}
}
