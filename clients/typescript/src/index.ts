// @execstore/client: a typed client for execstore's HTTP API and a worker
// that runs executions by the rules of a durable dispatcher.
export * from "./client.js";
export * from "./errors.js";
export * from "./worker.js";
export type { components, paths } from "./schema.js";
