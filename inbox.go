package execstore

import "sync"

// inbox is the queue between the callers and the writer: callers push the
// requests of one call together (so that they share a batch), the writer
// takes them in order, a batch at a time.
type inbox struct {
	mu      sync.Mutex
	reqs    []*request
	calls   int  // the calls queued, counted by their lead requests (group.go)
	closing bool // Close began: no new requests

	kick chan struct{} // wakes the writer; capacity 1
}

func (in *inbox) init() { in.kick = make(chan struct{}, 1) }

// signal wakes the writer, or leaves a wake-up for its next wait.
func (in *inbox) signal() {
	select {
	case in.kick <- struct{}{}:
	default:
	}
}

// push queues the requests of one call, unless refuse (called under the
// lock) gives a reason not to; then nothing is queued and that is returned.
func (in *inbox) push(reqs []*request, refuse func() error) error {
	in.mu.Lock()
	if err := refuse(); err != nil {
		in.mu.Unlock()
		return err
	}
	if in.closing {
		in.mu.Unlock()
		return ErrClosed
	}
	first := len(in.reqs) == 0
	if len(reqs) > 0 {
		reqs[0].lead = true
		in.calls++
	}
	in.reqs = append(in.reqs, reqs...)
	in.mu.Unlock()
	if first {
		in.signal()
	}
	return nil
}

// pushFront queues requests again, ahead of everything queued, and wakes the
// writer: it must go round again even if nothing else arrives. They are not
// new calls.
func (in *inbox) pushFront(reqs []*request) {
	in.mu.Lock()
	in.reqs = append(reqs, in.reqs...)
	in.mu.Unlock()
	in.signal()
}

// take appends to batch the requests of the next batch (see takeBatch) and
// returns it, with the calls they begin, how many requests stay queued, and
// whether Close began.
func (in *inbox) take(batch []*request, maxCount, maxBytes int) (_ []*request, calls, rest int, closing bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := takeBatch(in.reqs, maxCount, maxBytes)
	batch = append(batch, in.reqs[:n]...)
	for _, r := range batch {
		if r.lead {
			calls++
			r.lead = false // a deferred request queued again is not a new call
		}
	}
	in.calls -= calls
	rest = copy(in.reqs, in.reqs[n:])
	clear(in.reqs[rest:])
	in.reqs = in.reqs[:rest]
	if rest == 0 && cap(in.reqs) > queueCapMax {
		in.reqs = nil // a burst's backing array is not kept for ever
	}
	return batch, calls, rest, in.closing
}

// close refuses every request from now on.
func (in *inbox) close() {
	in.mu.Lock()
	in.closing = true
	in.mu.Unlock()
	in.signal()
}

// state returns the calls and requests queued and whether Close began.
func (in *inbox) state() (calls, queued int, closing bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.calls, len(in.reqs), in.closing
}

// queueCapMax bounds the request slices the writer keeps between batches, so
// that one burst does not pin its memory for the life of the store.
const queueCapMax = 1 << 14
