package chargeorder

import (
	"context"
	"fmt"

	"github.com/execstore/execstore"
)

// CancelOrder is the customer cancelling an order within the ten minutes:
// the shop marks the order cancelled and cancels the execution that would
// charge it (execstore.Store.Cancel), with the reason kept in its record.
// The cancelled execution is never delivered again, so nothing loads the
// order or charges the card; a delivery running at that moment loses its
// lease and its writes are refused, a charge step included. The order's
// status alone (which the workflow checks after its wait) would stop the
// charge too, but only when the wait ends: cancelling the execution ends it
// now, and its record says why.
func CancelOrder(ctx context.Context, store *execstore.Store, shop *Shop, order int, executionID string) (execstore.Record, error) {
	shop.Cancel(order)
	return store.Cancel(ctx, executionID, fmt.Sprintf("the customer cancelled order %d", order))
}
