package chargeorder

import (
	"context"
	"fmt"
	"sync"
)

// Item is a line of an order.
type Item struct {
	Name  string `json:"name"`  // what it is
	Cents int    `json:"cents"` // its price
}

// Order is an order as the shop keeps it.
type Order struct {
	ID        int    `json:"id"`        // the order number
	Customer  string `json:"customer"`  // who placed it
	Status    string `json:"status"`    // "open" or "cancelled"
	Items     []Item `json:"items"`     // what was ordered
	PaidCents int    `json:"paidCents"` // what the card was charged for it so far
}

// DueCents is what is left to pay.
func (o Order) DueCents() int {
	total := 0
	for _, it := range o.Items {
		total += it.Cents
	}
	return total - o.PaidCents
}

// Receipt is the payment gateway's answer to a charge.
type Receipt struct {
	ID    string `json:"id"`    // the gateway's receipt number
	Cents int    `json:"cents"` // the amount charged
}

// Charge is a line of the card statement.
type Charge struct {
	Key     string // the idempotency key it was made with
	Order   int    // the order it paid for
	Cents   int    // the amount
	Receipt string // the receipt number
}

// Shop is the example's shop: its orders and its payment gateway, in memory.
// The gateway is idempotent, as real ones are: a charge repeated with the
// same idempotency key returns the first charge's receipt and charges
// nothing. That is what lets a charge step run again after a crash between
// the charge and the saving of its receipt.
type Shop struct {
	mu        sync.Mutex
	orders    map[int]*Order
	statement []Charge
	byKey     map[string]Receipt
	calls     int // charge requests the gateway received

	settlements []Settlement // settlement.go
	settled     int          // charges of the statement settled so far

	// Faults, for the story's tests: called inside Load after it read the
	// order, and inside Charge after the gateway charged the card.
	afterLoad   func(ctx context.Context)
	afterCharge func(ctx context.Context)
}

// NewShop returns a shop with no orders.
func NewShop() *Shop {
	return &Shop{orders: make(map[int]*Order), byKey: make(map[string]Receipt)}
}

// PlaceOrder opens a customer's order with items.
func (s *Shop) PlaceOrder(id int, customer string, items ...Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orders[id] = &Order{ID: id, Customer: customer, Status: "open", Items: items}
}

// AddItem adds an item to an order.
func (s *Shop) AddItem(id int, item Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orders[id].Items = append(s.orders[id].Items, item)
}

// Cancel cancels an order.
func (s *Shop) Cancel(id int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orders[id].Status = "cancelled"
}

// CustomerOf returns who placed an order, and whether the shop has it.
func (s *Shop) CustomerOf(id int) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok {
		return "", false
	}
	return o.Customer, true
}

// Load returns a copy of an order.
func (s *Shop) Load(ctx context.Context, id int) (Order, error) {
	s.mu.Lock()
	o, ok := s.orders[id]
	var order Order
	if ok {
		order = *o
		order.Items = append([]Item(nil), o.Items...)
	}
	hook := s.afterLoad
	s.mu.Unlock()
	if !ok {
		return Order{}, fmt.Errorf("order %d not found", id)
	}
	if hook != nil {
		hook(ctx)
	}
	return order, ctx.Err()
}

// Charge charges the card for an order, once per idempotency key, and marks
// the amount paid.
func (s *Shop) Charge(ctx context.Context, key string, order, cents int) (Receipt, error) {
	if err := ctx.Err(); err != nil {
		return Receipt{}, err // the call never reached the gateway
	}
	s.mu.Lock()
	s.calls++
	r, done := s.byKey[key]
	if !done {
		r = Receipt{ID: fmt.Sprintf("r-%d", len(s.statement)+1), Cents: cents}
		s.byKey[key] = r
		s.statement = append(s.statement, Charge{Key: key, Order: order, Cents: cents, Receipt: r.ID})
		s.orders[order].PaidCents += cents
	}
	hook := s.afterCharge
	s.mu.Unlock()
	if hook != nil {
		hook(ctx)
	}
	return r, nil
}

// Statement returns the card statement: every charge made, in order.
func (s *Shop) Statement() []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Charge(nil), s.statement...)
}

// GatewayCalls returns how many charge requests the gateway received,
// repeats included.
func (s *Shop) GatewayCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}
