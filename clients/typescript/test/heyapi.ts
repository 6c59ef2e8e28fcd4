// The same refusals as test/types.ts, against the types @hey-api/openapi-ts
// generates (generated-heyapi/, made and removed by scripts/check-openapi.mjs):
// no type shadows the language's own, required fields stay required, enums
// stay enums, and a terminal record has its outcome.
import type { AdmitBody, ExecutionRecord, Outcome, OutcomeRequest } from "../generated-heyapi/types.gen.js";

export const admit: AdmitBody = { executionId: "order-42", workflowId: "charge-order", params: { order: 42, lines: [{ sku: "a-1" }] } };
// @ts-expect-error: an admission names its workflow
export const noWorkflow: AdmitBody = { executionId: "order-43" };
// @ts-expect-error: a failed outcome carries its error
export const failedWithoutError: OutcomeRequest = { status: "failed" };
// @ts-expect-error: "complete" is not a status
export const misspelt: OutcomeRequest = { status: "complete" };

export function outcomeOf(rec: ExecutionRecord): Outcome | undefined {
  if (rec.status === "completed" || rec.status === "failed" || rec.status === "cancelled") {
    return rec.outcome;
  }
  // @ts-expect-error: a live record has no outcome
  return rec.outcome;
}

// The language's own Record and Error are still the language's.
export const table: Record<string, number> = { a: 1 };
export const thrown: Error = new Error("still the built-in");
