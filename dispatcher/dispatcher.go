package dispatcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/execstore/execstore"
)

// Dispatcher claims due executions from a store and delivers each to an
// Invoker under a lease it renews, then acknowledges the outcome or releases
// the lease. See the package documentation for the rules it follows.
type Dispatcher struct {
	store  Store
	inv    Invoker
	opts   resolved
	queues QueueClaimer // the store, when the dispatcher claims from named queues

	mu       sync.Mutex
	running  bool
	stop     chan struct{} // closed by Stop: the loop returns
	loopDone chan struct{} // closed when the loop has returned
	active   int           // slots taken by deliveries not yet settled or abandoned
	drained  []chan struct{}

	// slotFreed tells a loop waiting for a slot that one is free. Capacity 1:
	// one pending token is enough, the loop recounts the free slots.
	slotFreed chan struct{}

	// next hands a claimed lease to a delivery goroutine waiting for one
	// (unbuffered: a send succeeds only if one is waiting), so that a
	// goroutine, its grown stack with it, serves delivery after delivery.
	next chan execstore.Lease

	acks ackCombiner // the deliveries' acknowledgements, written in rounds
}

// New returns a stopped Dispatcher that claims from store and delivers to
// inv. It returns an error matching execstore.ErrInvalidArgument if an
// option is out of range.
func New(store Store, inv Invoker, opts Options) (*Dispatcher, error) {
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{store: store, inv: inv, opts: r, slotFreed: make(chan struct{}, 1), next: make(chan execstore.Lease)}
	if len(r.Queues) > 0 {
		qc, ok := store.(QueueClaimer)
		if !ok {
			return nil, invalid("queues %q need a store that is a QueueClaimer; %T is not", r.Queues, store)
		}
		d.queues = qc
	}
	return d, nil
}

// Start starts claiming and delivering. Calling Start on a running
// dispatcher does nothing; a stopped one may be started again.
func (d *Dispatcher) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running {
		return
	}
	prev := d.loopDone
	stop, done := make(chan struct{}), make(chan struct{})
	d.running, d.stop, d.loopDone = true, stop, done
	go func() {
		if prev != nil {
			// A previous loop may be finishing its last claim; two loops
			// at once could claim more than the free slots.
			<-prev
		}
		d.loop(stop, done)
	}()
}

// Stop stops claiming, then waits for the deliveries in flight to settle
// (see Drain). A round of acknowledgements already being written may still
// claim an execution for each of its slots, as the loop's last claim may;
// those deliveries are waited for too, and nothing is claimed after them.
// It returns ctx's error if ctx ends first; the deliveries then carry on.
// Deliveries abandoned after losing their lease are not waited for.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	if d.running {
		d.running = false
		close(d.stop)
	}
	done := d.loopDone
	d.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return d.Drain(ctx)
}

// Drain waits until no delivery is active: every delivery started so far
// (and any started meanwhile) has settled or been abandoned. It returns
// ctx's error if ctx ends first.
func (d *Dispatcher) Drain(ctx context.Context) error {
	d.mu.Lock()
	if d.active == 0 {
		d.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	d.drained = append(d.drained, ch)
	d.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ActiveDeliveries returns the number of deliveries holding a slot.
func (d *Dispatcher) ActiveDeliveries() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.active
}

// freeSlots returns the slots a claim may fill now. Only the loop takes
// slots, so a claim never reserves more than are free (a round's claim
// refills the slots its own deliveries hold, see ackCombiner).
func (d *Dispatcher) freeSlots() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.opts.Concurrency - d.active
}

func (d *Dispatcher) takeSlot() {
	d.mu.Lock()
	d.active++
	d.mu.Unlock()
}

// freeSlot gives a delivery's slot back and tells the loop, so that it
// claims again at once rather than at the next poll.
func (d *Dispatcher) freeSlot() {
	d.mu.Lock()
	d.active--
	if d.active == 0 {
		for _, ch := range d.drained {
			close(ch)
		}
		d.drained = nil
	}
	d.mu.Unlock()
	select {
	case d.slotFreed <- struct{}{}:
	default:
	}
}

// loop claims whenever a slot is free and something may be due, until stop
// is closed.
func (d *Dispatcher) loop(stop, done chan struct{}) {
	defer close(done)
	failing, following := false, false
	for !closed(stop) {
		free := d.freeSlots()
		if free <= 0 {
			select {
			case <-d.slotFreed:
			case <-stop:
			}
			continue
		}
		// Take the signal BEFORE claiming: whatever becomes due after the
		// claim looked closes it, so the idle wait below cannot miss it.
		due := d.store.DueChanged()
		// The poll deadline counts from before the claim, so it is fixed by
		// the time anyone can observe the claim.
		poll := d.opts.Clock.Now().Add(d.opts.PollInterval)
		n, err := d.claim(free, stop)
		if !errors.Is(err, execstore.ErrNotLeader) {
			following = false
		}
		switch {
		case errors.Is(err, execstore.ErrNotLeader):
			// A replica that does not lead: the leader's dispatchers
			// deliver. Its due signal fires when its raft state changes,
			// so it claims as soon as it is elected.
			if !following {
				d.opts.logger.Info("dispatcher: this node is not the leader; claiming once it is", "err", err)
			}
			following = true
			d.wait(stop, poll, due, time.Time{})
		case err != nil:
			if !failing {
				d.opts.logger.Error("dispatcher: failed to claim due executions; retrying at the poll interval", "err", err)
			}
			failing = true
			d.wait(stop, poll, nil, time.Time{})
		case n == free:
			failing = false // every slot filled: more may be due
		default:
			failing = false // everything due was claimed
			d.wait(stop, poll, due, d.nextDue())
		}
	}
}

// claim leases up to limit due executions and starts delivering them.
func (d *Dispatcher) claim(limit int, stop chan struct{}) (int, error) {
	var leases []execstore.Lease
	var err error
	if d.queues != nil {
		leases, err = d.queues.Claim(context.Background(), execstore.ClaimRequest{Limit: limit, LeaseDuration: d.opts.LeaseDuration, Queues: d.opts.Queues})
	} else {
		leases, err = d.store.ClaimDue(context.Background(), limit, d.opts.LeaseDuration)
	}
	if err != nil {
		return 0, err
	}
	for _, l := range leases {
		d.takeSlot()
		d.hand(l, stop)
	}
	return len(leases), nil
}

// hand gives a claimed lease, whose slot is taken, to a delivery goroutine:
// one waiting for its next delivery, or a new one.
func (d *Dispatcher) hand(l execstore.Lease, stop chan struct{}) {
	select {
	case d.next <- l:
	default:
		go d.deliverFrom(l, stop)
	}
}

// deliverFrom delivers l, then each lease its acknowledgement claimed for
// the same slot, then the leases handed to it while it waits for them, until
// stop is closed. It holds l's slot until a delivery claims nothing next.
// These goroutines are made only when none waits for a lease, so there are
// about as many as deliveries ran at once; those waiting exit when the loop
// that started them stops, the others once their delivery is done.
func (d *Dispatcher) deliverFrom(l execstore.Lease, stop chan struct{}) {
	for {
		next, chained := d.deliver(l, stop)
		if chained {
			l = next // the slot passes to the lease claimed in its place
			continue
		}
		d.freeSlot()
		select {
		case l = <-d.next:
		case <-stop:
			return
		}
	}
}

// nextDue returns the earliest time anything can be claimed (a pending wake
// or a lease expiry), or the zero time if nothing is pending or the store
// cannot say.
func (d *Dispatcher) nextDue() time.Time {
	if d.queues != nil {
		next, err := d.queues.NextDueIn(context.Background(), d.opts.Queues)
		if err != nil {
			return time.Time{}
		}
		return next
	}
	if nd, ok := d.store.(NextDuer); ok {
		next, err := nd.NextDue(context.Background())
		if err != nil {
			return time.Time{}
		}
		return next
	}
	st, err := d.store.Stats(context.Background())
	if err != nil {
		return time.Time{}
	}
	return st.NextDue
}

// wait returns when due is closed, the clock reaches next (unless zero) or
// poll, or stop is closed.
func (d *Dispatcher) wait(stop chan struct{}, poll time.Time, due <-chan struct{}, next time.Time) {
	pollTimer := d.opts.Clock.TimerAt(poll)
	defer pollTimer.Stop()
	var nextC <-chan time.Time
	if !next.IsZero() {
		t := d.opts.Clock.TimerAt(next)
		defer t.Stop()
		nextC = t.C()
	}
	select {
	case <-due:
	case <-nextC:
	case <-pollTimer.C():
	case <-stop:
	}
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
