package jsonv

// frame is one open array or object on the explicit stack. The scan never
// recurses, so its depth is bounded by the stack length, which is bounded by
// Limits.MaxDepth.
type frame struct {
	// base is the length of scratch.keys (and, when canonicalizing,
	// scratch.spans) as the object opened: the object's own keys are the
	// ones above it.
	base uint32
	// arenaBase is the length of scratch.arena as the object opened.
	arenaBase uint32
	object    bool
}

// keyRef names the unescaped bytes of one object key without copying them
// when it can: a key with no backslash is its own unescaped form, so it is
// a span of the input; only a key with escapes is decoded into the arena.
//
// Offsets are 32-bit to halve the scratch the scan carries; values near
// 4 GiB are refused (see maxInputLen), far beyond any value the store keeps.
type keyRef struct {
	pos     uint32 // offset of the key's opening quote in the input
	lo, hi  uint32 // unescaped bytes: input[lo:hi] or arena[lo:hi]
	inArena bool
}

// span is where the canonical `"key":value` text of an object member lies
// in the output, while its object is being canonicalized. spans[j] belongs
// to keys[j].
type span struct {
	start, end int
}

const maxInputLen = 1<<32 - 1

// scratch is the working memory of a scan. Its slices are stacks: an object
// pushes its keys (and their decoded bytes, if escaped) when it opens and
// pops them when it closes, so the scratch in use is proportional to the
// keys of the currently open objects, not to the whole value.
type scratch struct {
	stack  []frame
	keys   []keyRef
	spans  []span
	arena  []byte
	items  []sortItem
	hashes []uint64
}

// keyBytes returns the unescaped bytes of k.
func (s *scratch) keyBytes(b []byte, k keyRef) []byte {
	if k.inArena {
		return s.arena[k.lo:k.hi]
	}
	return b[k.lo:k.hi]
}

// The scratch grows only through the push methods below, which never
// append to a field: they reslice it (a self-assignment, which escape
// analysis ignores) and, when full, swap in a fresh copy. An append to a
// field through a pointer would make the compiler assume the backing array
// escapes, and then localScratch could not stay on the caller's stack.

func (s *scratch) pushFrame(f frame) {
	if len(s.stack) == cap(s.stack) {
		s.stack = grown(s.stack, 1)
	}
	s.stack = s.stack[:len(s.stack)+1]
	s.stack[len(s.stack)-1] = f
}

func (s *scratch) pushKey(k keyRef) {
	if len(s.keys) == cap(s.keys) {
		s.keys = grown(s.keys, 1)
	}
	s.keys = s.keys[:len(s.keys)+1]
	s.keys[len(s.keys)-1] = k
}

func (s *scratch) pushSpan(sp span) {
	if len(s.spans) == cap(s.spans) {
		s.spans = grown(s.spans, 1)
	}
	s.spans = s.spans[:len(s.spans)+1]
	s.spans[len(s.spans)-1] = sp
}

// pushUnescaped decodes the body of the string whose opening quote is at
// pos onto the arena and returns a reference to the result. Unescaping
// never lengthens a string, so len(raw) bytes of room are enough.
func (s *scratch) pushUnescaped(pos int, raw []byte) keyRef {
	lo := len(s.arena)
	if cap(s.arena)-lo < len(raw) {
		s.arena = grown(s.arena, len(raw))
	}
	n := unescapeInto(s.arena[lo:lo+len(raw)], raw)
	s.arena = s.arena[:lo+n]
	return keyRef{pos: uint32(pos), lo: uint32(lo), hi: uint32(lo + n), inArena: true}
}

// grown returns a copy of x with room for at least n more elements. It
// always allocates, and never returns x itself, so that x does not leak.
func grown[T any](x []T, n int) []T {
	y := make([]T, len(x), 2*cap(x)+n+8)
	copy(y, x)
	return y
}

// localScratch is the starting capacity of the package-level Validate and
// ValidateObject, sized so that typical params and results never leave it.
// It lives on the caller's stack, which is what makes those functions
// allocation-free; a value that outgrows it moves that part of the scratch
// to the heap, nothing worse. It is kept small because it is zeroed on
// every call.
type localScratch struct {
	stack [16]frame
	keys  [32]keyRef
	arena [64]byte
}

func (l *localScratch) scratch() scratch {
	return scratch{stack: l.stack[:0], keys: l.keys[:0], arena: l.arena[:0]}
}

// localCanonicalScratch is localScratch plus what Canonical needs to
// reorder members.
type localCanonicalScratch struct {
	localScratch
	spans [16]span
	items [16]sortItem
}

func (l *localCanonicalScratch) scratch() scratch {
	s := l.localScratch.scratch()
	s.spans = l.spans[:0]
	s.items = l.items[:0]
	return s
}

// retainBytesMax bounds what a Validator keeps between calls, so that one
// huge value does not pin its scratch forever.
const retainBytesMax = 64 << 10

// release empties s for the next call, dropping buffers that grew past
// retainBytesMax.
func (s *scratch) release() {
	s.stack = keep(s.stack, 12)
	s.keys = keep(s.keys, 16)
	s.spans = keep(s.spans, 16)
	s.arena = keep(s.arena, 1)
	s.items = keep(s.items, 16)
	s.hashes = keep(s.hashes, 8)
}

// keep returns x emptied, or nil if it holds more than retainBytesMax;
// size is the element size in bytes, near enough.
func keep[T any](x []T, size int) []T {
	if cap(x)*size > retainBytesMax {
		return nil
	}
	return x[:0]
}
