package wal

import (
	"fmt"
	"slices"
)

// Batch collects payloads for one Write. It is reusable (Reset) so the hot path does not
// allocate once its buffers have grown. A Batch is not safe for concurrent use.
type Batch struct {
	data []byte // payloads, back to back
	ends []int  // ends[i] is the end offset of payload i in data
	err  error  // first limit violation; Write returns it
}

// Add copies payload into the batch. An empty payload or one past a limit is not added; the
// batch remembers the first such error and Write returns it without writing anything, so a
// caller can add in a loop and check once.
func (b *Batch) Add(payload []byte) {
	if b.err != nil {
		return
	}
	switch {
	case len(payload) == 0:
		b.err = ErrEmptyPayload
	case len(payload) > MaxPayloadBytes:
		b.err = fmt.Errorf("%w: payload of %d bytes, max %d", ErrTooLarge, len(payload), MaxPayloadBytes)
	case len(b.ends) == MaxBatchEntries:
		b.err = fmt.Errorf("%w: more than %d entries", ErrTooLarge, MaxBatchEntries)
	case len(b.data)+len(payload) > MaxBatchBytes:
		b.err = fmt.Errorf("%w: more than %d payload bytes", ErrTooLarge, MaxBatchBytes)
	}
	if b.err != nil {
		return
	}
	b.data = append(b.data, payload...)
	b.ends = append(b.ends, len(b.data))
}

// Grow makes room for n more payload bytes, so that adding a batch whose
// size is known does not copy the buffer as it grows.
func (b *Batch) Grow(n int) { b.data = slices.Grow(b.data, n) }

// Len is the number of payloads added.
func (b *Batch) Len() int { return len(b.ends) }

// Err is the first error Add met, or nil.
func (b *Batch) Err() error { return b.err }

// Reset empties the batch, keeping its buffers.
func (b *Batch) Reset() {
	b.data = b.data[:0]
	b.ends = b.ends[:0]
	b.err = nil
}

// payload returns payload i; it aliases the batch's buffer.
func (b *Batch) payload(i int) []byte {
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.data[start:b.ends[i]]
}
