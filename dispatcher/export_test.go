package dispatcher

// DrainWaiters returns how many Drain calls (Stop's included) are waiting for
// the deliveries in flight to settle. Tests use it to know that a Stop is
// blocked, before they let its deliveries end.
func (d *Dispatcher) DrainWaiters() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.drained)
}

// QueuedAcks returns how many deliveries' acknowledgements wait for the next
// round (not the one being written). Tests use it to know that they will be
// written together.
func (d *Dispatcher) QueuedAcks() int {
	d.acks.mu.Lock()
	defer d.acks.mu.Unlock()
	return len(d.acks.queue)
}
