package chargeorder

import (
	"context"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/workflow"
)

// The nightly settlement: at 02:00 UTC every night a schedule admits
// settle-night, which settles the card charges made since the previous
// settlement. Each night's execution ID is the schedule's occurrence ID
// ("nightly-settlement@2026-01-03T02:00:00Z"), so a night is settled at most
// once, whatever restarts or manual triggers happen; and the schedule
// catches up every night missed while the shop was down, because each
// night's charges must be settled.

// SettlementWorkflowID is the ID settle-night is registered under.
const SettlementWorkflowID = "settle-night"

// SettlementSchedule is the nightly settlement's schedule, from start.
func SettlementSchedule(start time.Time) execstore.Schedule {
	return execstore.Schedule{
		ID:         "nightly-settlement",
		WorkflowID: SettlementWorkflowID,
		Cron:       "0 2 * * *",
		Start:      start,
		CatchUp:    execstore.CatchUpAll,
	}
}

// Settlement is one night's settlement.
type Settlement struct {
	Night   string `json:"night"`   // the settling execution's ID
	Charges int    `json:"charges"` // charges settled
	Cents   int    `json:"cents"`   // their total
}

// RegisterSettlement registers settle-night, settling shop's charges, with w.
func RegisterSettlement(w *workflow.Worker, shop *Shop, cfg Config) {
	say := newPrinter(cfg.Out)
	workflow.Register(w, SettlementWorkflowID, func(x *workflow.Execution, _ struct{}) (Settlement, error) {
		return workflow.Run(x, "settle", func(ctx context.Context) (Settlement, error) {
			st := shop.Settle(x.ID())
			say("%s: settled %d charges, %s", x.ID(), st.Charges, money(st.Cents))
			return st, ctx.Err()
		})
	})
}

// Settle settles the charges not settled yet, under night's name, once: a
// repeat of the same night returns the first settlement and settles
// nothing (the settlement is idempotent, as the gateway's charges are).
func (s *Shop) Settle(night string) Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.settlements {
		if st.Night == night {
			return st
		}
	}
	st := Settlement{Night: night}
	for _, c := range s.statement[s.settled:] {
		st.Charges++
		st.Cents += c.Cents
	}
	s.settled = len(s.statement)
	s.settlements = append(s.settlements, st)
	return st
}

// Settlements returns every settlement made, in order.
func (s *Shop) Settlements() []Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Settlement(nil), s.settlements...)
}
