package dispatcher

// DrainWaiters returns how many Drain calls (Stop's included) are waiting for
// the deliveries in flight to settle. Tests use it to know that a Stop is
// blocked, before they let its deliveries end.
func (d *Dispatcher) DrainWaiters() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.drained)
}
