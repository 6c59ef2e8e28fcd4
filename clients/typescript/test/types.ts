// What the types generated from openapi.yaml must let a user write, and
// what they must refuse. `npm run typecheck` compiles this file: a line
// marked @ts-expect-error that compiles is an error too, so each refusal
// below fails the check if the document stops saying it.
import type { components, paths } from "../src/schema.js";

type Schemas = components["schemas"];
type Answer<P extends keyof paths, M extends keyof paths[P], S extends number> =
  paths[P][M] extends { responses: { [K in S]: { content: { "application/json": infer T } } } } ? T : never;

// Params, results and step values are JSON a user writes as it is.
export const admit: Schemas["AdmitBody"] = {
  executionId: "order-42",
  workflowId: "charge-order",
  params: { order: 42, lines: [{ sku: "a-1", qty: 2 }], gift: null, note: "ring twice" },
  context: { tenant: "shop" },
};
export const completed: Schemas["OutcomeRequest"] = { status: "completed", result: { receipt: "r-1", total: 16.5 } };
export const failed: Schemas["OutcomeRequest"] = {
  status: "failed",
  error: { name: "PaymentError", message: "card declined", code: "DECLINED" },
};

// Required fields are required.
// @ts-expect-error: an admission names its workflow
export const noWorkflow: Schemas["AdmitBody"] = { executionId: "order-43" };
// @ts-expect-error: a failed outcome carries its error
export const failedWithoutError: Schemas["OutcomeRequest"] = { status: "failed" };
// @ts-expect-error: a result belongs to a completed outcome only
export const suspendedWithResult: Schemas["OutcomeRequest"] = { status: "suspended", result: 1 };

// Enums are enums.
// @ts-expect-error: "complete" is not a status
export const misspelt: Schemas["OutcomeRequest"] = { status: "complete" };
// @ts-expect-error: a schedule catches up latest, all or none
export const catchUp: Schemas["ScheduleBody"]["catchUp"] = "some";

// A terminal record has its outcome; a live one has none.
export function outcomeOf(rec: Schemas["ExecutionRecord"]): Schemas["Outcome"] | undefined {
  switch (rec.status) {
    case "completed":
    case "failed":
    case "cancelled":
      return rec.outcome; // no undefined to rule out
    case "admitted":
    case "suspended":
      // @ts-expect-error: a live record has no outcome
      return rec.outcome;
  }
}

// A lease goes back as its execution and token.
export const ack: Schemas["AcknowledgeBody"] = { lease: { executionId: "order-42", token: 1 }, outcome: { status: "suspended" } };

// A step lookup says whether the step was saved; only a saved one has a value.
export function stepValue(a: Answer<"/v1/executions/{id}/steps/{key}", "get", 200>): Schemas["JSONValue"] | undefined {
  if (a.saved) {
    return a.value;
  }
  // @ts-expect-error: a step not saved has no value
  return a.value;
}

// Each route's errors are its own.
export const conflict: Answer<"/v1/executions", "post", 409> = { code: "EXECUTION_ID_CONFLICT", message: "in use", sameEvent: true };
// @ts-expect-error: renewing a lease cannot conflict with an execution ID
export const renewConflict: Answer<"/v1/leases/renew", "post", 409> = { code: "EXECUTION_ID_CONFLICT", message: "in use" };
export const unauthorized: Answer<"/v1/claims", "post", 401> = { code: "UNAUTHORIZED", message: "missing token" };
