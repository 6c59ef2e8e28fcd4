// Typed errors for every answer of execstore's HTTP API that is not a
// success: one class per kind of failure a caller handles differently, each
// carrying the server's code, status and message.
import type { components } from "./schema.js";

/** The error body the server answers: `{code, message}` and, for some codes, more. */
export type ErrorBody = components["schemas"]["ErrorBody"];
/** Every error code the server sends. */
export type ErrorCode = ErrorBody["code"];

/** Any error answer from the server. */
export class ExecstoreError extends Error {
  /** The HTTP status. */
  readonly status: number;
  /** The stable code (see the OpenAPI document's table). */
  readonly code: ErrorCode;
  /** The whole error body. */
  readonly body: ErrorBody;

  constructor(status: number, body: ErrorBody) {
    super(body.message);
    this.name = new.target.name;
    this.status = status;
    this.code = body.code;
    this.body = body;
  }
}

/** 400: the request is malformed (`INVALID_ARGUMENT`, `INVALID_EXECUTION_EVENT`). */
export class InvalidArgumentError extends ExecstoreError {}
/** 401: the server wants a token the request did not carry (`UNAUTHORIZED`). */
export class UnauthorizedError extends ExecstoreError {}
/** 404: what the request names does not exist. */
export class NotFoundError extends ExecstoreError {}
/** 405: the path does not take the method (`METHOD_NOT_ALLOWED`). */
export class MethodNotAllowedError extends ExecstoreError {}
/** 408: an await ran out of time before the execution was terminal (`TIMEOUT`). */
export class AwaitTimeoutError extends ExecstoreError {}
/** 409: the lease is no longer current (`LEASE_LOST`); nothing was written. */
export class LeaseLostError extends ExecstoreError {}
/** 409: a step key started a different child before (`START_REQUEST_MISMATCH`). */
export class StartRequestMismatchError extends ExecstoreError {}
/** 413 or 422: the request is over a documented limit (`LIMIT_EXCEEDED`). */
export class LimitExceededError extends ExecstoreError {}
/** 500: a bug in the server (`INTERNAL`). */
export class InternalError extends ExecstoreError {}

/** 409: the execution ID was ever used (`EXECUTION_ID_CONFLICT`). */
export class ExecutionIdConflictError extends ExecstoreError {
  /**
   * Whether the execution holding the ID was admitted with this request's
   * workflow, params (canonical form), context and maxAttempts: true means a
   * first attempt of this very admission was the one admitted.
   */
  readonly sameEvent: boolean;

  constructor(status: number, body: ErrorBody) {
    super(status, body);
    this.sameEvent = body.sameEvent === true;
  }
}

/**
 * 503: the store is unavailable for now: it failed a write
 * (`STORAGE_FAILED`), is closed (`CLOSED`), the request ended first
 * (`CANCELLED`), no leader is known (`NOT_LEADER`: nothing was done), or the
 * leader lost its leadership after it took the request (`OUTCOME_UNKNOWN`:
 * it may have taken effect).
 */
export class UnavailableError extends ExecstoreError {
  /** Milliseconds the server asked to wait before a retry (`Retry-After`), if it said. */
  readonly retryAfterMs: number | undefined;

  constructor(status: number, body: ErrorBody, retryAfterMs?: number) {
    super(status, body);
    this.retryAfterMs = retryAfterMs;
  }
}

/** The request did not reach the server, or its answer did not come back. */
export class NetworkError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "NetworkError";
  }
}

/** The error for an answer with status and body. */
export function errorOf(status: number, body: ErrorBody, retryAfterMs?: number): ExecstoreError {
  switch (body.code) {
    case "INVALID_ARGUMENT":
    case "INVALID_EXECUTION_EVENT":
      return new InvalidArgumentError(status, body);
    case "UNAUTHORIZED":
      return new UnauthorizedError(status, body);
    case "EXECUTION_NOT_FOUND":
    case "SCHEDULE_NOT_FOUND":
    case "KEY_NOT_FOUND":
    case "ROUTE_NOT_FOUND":
      return new NotFoundError(status, body);
    case "METHOD_NOT_ALLOWED":
      return new MethodNotAllowedError(status, body);
    case "TIMEOUT":
      return new AwaitTimeoutError(status, body);
    case "LEASE_LOST":
      return new LeaseLostError(status, body);
    case "START_REQUEST_MISMATCH":
      return new StartRequestMismatchError(status, body);
    case "EXECUTION_ID_CONFLICT":
      return new ExecutionIdConflictError(status, body);
    case "LIMIT_EXCEEDED":
      return new LimitExceededError(status, body);
    case "STORAGE_FAILED":
    case "CLOSED":
    case "CANCELLED":
    case "NOT_LEADER":
    case "OUTCOME_UNKNOWN":
      return new UnavailableError(status, body, retryAfterMs);
    case "INTERNAL":
      return new InternalError(status, body);
  }
  return new ExecstoreError(status, body);
}
