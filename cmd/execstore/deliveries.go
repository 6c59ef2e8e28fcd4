package main

import (
	"context"
	"encoding/json"

	"github.com/execstore/execstore"
)

// A claim with withExecutions answers, beside each lease, what a worker
// needs to run the execution: its workflow, params, context, parent, the
// attempt, and its saved steps, so that a delivery takes no read before its
// first step and none for a step saved already. The record is read right
// after the claim: params, context and parent never change, and while the
// claim's lease is current only its holder saves steps, so what is read is
// what the delivery starts from.

// Bounds on the steps a claim's answer carries: each execution's first
// steps up to deliveryStepBytes of values (a step larger than that comes
// alone), and deliveriesStepBytes over the whole answer. An execution whose
// steps were not all carried says so with moreSteps; the worker reads the
// rest (GET /v1/executions/{id}/steps/{key}) when it needs them.
const (
	deliveryStepBytes   = 1 << 20
	deliveriesStepBytes = 16 << 20
)

// deliveryJSON is one claimed execution as a delivery needs it.
type deliveryJSON struct {
	ExecutionID string            `json:"executionId"`
	WorkflowID  string            `json:"workflowId"`
	Params      json.RawMessage   `json:"params,omitempty"`
	Context     map[string]string `json:"context,omitempty"`
	Parent      *parentJSON       `json:"parent,omitempty"`
	Attempt     uint64            `json:"attempt"`
	MaxAttempts int               `json:"maxAttempts"`
	Steps       []savedStepJSON   `json:"steps"`
	MoreSteps   bool              `json:"moreSteps,omitempty"`
}

// deliveries reads each lease's execution for the claim's answer, in the
// leases' order. It returns nil, and the answer carries the leases alone,
// if a read fails (the store closed meanwhile): the leases were granted and
// must reach the worker all the same.
func (a *api) deliveries(ctx context.Context, leases []execstore.Lease) []deliveryJSON {
	out := make([]deliveryJSON, len(leases))
	budget := deliveriesStepBytes
	lim := a.store.Limits()
	for i, l := range leases {
		rec, err := a.store.Get(ctx, l.ExecutionID)
		if err != nil {
			a.logger.Warn("execstore: a claim's executions could not be read; answering its leases alone", "err", err)
			return nil
		}
		d := deliveryJSON{
			ExecutionID: rec.ExecutionID, WorkflowID: rec.WorkflowID, Params: rec.Params, Context: rec.Context,
			Attempt: l.Token, MaxAttempts: rec.MaxAttempts, Steps: []savedStepJSON{},
		}
		if p := rec.Parent; p != nil {
			d.Parent = &parentJSON{ExecutionID: p.ExecutionID, StepKey: p.StepKey}
		}
		if budget <= 0 {
			d.MoreSteps = true
		} else {
			steps, more, err := a.store.ListSteps(ctx, l.ExecutionID, "", lim.ClaimLimit, min(deliveryStepBytes, budget))
			if err != nil {
				a.logger.Warn("execstore: a claim's executions could not be read; answering its leases alone", "err", err)
				return nil
			}
			for _, s := range steps {
				d.Steps = append(d.Steps, savedStepJSON{Key: s.Key, Value: s.Value})
				budget -= len(s.Value)
			}
			d.MoreSteps = more
		}
		out[i] = d
	}
	return out
}
