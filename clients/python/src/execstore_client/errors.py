"""Typed errors for every answer of execstore's HTTP API that is not a success."""

from __future__ import annotations

from typing import Any, Dict, Optional


class ExecstoreError(Exception):
    """Any error answer from the server: its HTTP status, stable code and body."""

    def __init__(self, status: int, body: Dict[str, Any]):
        super().__init__(body.get("message", ""))
        self.status = status
        self.code: str = body.get("code", "")
        self.message: str = body.get("message", "")
        self.body = body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status}, {self.code!r}, {self.message!r})"


class InvalidArgumentError(ExecstoreError):
    """400: the request is malformed (INVALID_ARGUMENT, INVALID_EXECUTION_EVENT)."""


class UnauthorizedError(ExecstoreError):
    """401: the server wants a token the request did not carry."""


class NotFoundError(ExecstoreError):
    """404: what the request names does not exist."""


class MethodNotAllowedError(ExecstoreError):
    """405: the path does not take the method."""


class AwaitTimeoutError(ExecstoreError):
    """408: an await ran out of time before the execution was terminal."""


class LeaseLostError(ExecstoreError):
    """409: the lease is no longer current; nothing was written."""


class StartRequestMismatchError(ExecstoreError):
    """409: the step key started a different child before."""


class ExecutionIdConflictError(ExecstoreError):
    """409: the execution ID was ever used.

    ``same_event`` says whether the execution holding the ID was admitted with
    this request's workflow, params (canonical form), context and maxAttempts.
    """

    def __init__(self, status: int, body: Dict[str, Any]):
        super().__init__(status, body)
        self.same_event: bool = body.get("sameEvent") is True


class LimitExceededError(ExecstoreError):
    """413 or 422: the request is over a documented limit."""


class UnavailableError(ExecstoreError):
    """503: the store failed, is closed, the request ended first, no leader is
    known (NOT_LEADER: nothing was done), or the leader lost its leadership
    after it took the request (OUTCOME_UNKNOWN: it may have taken effect)."""

    def __init__(self, status: int, body: Dict[str, Any], retry_after: Optional[float] = None):
        super().__init__(status, body)
        self.retry_after = retry_after


class InternalError(ExecstoreError):
    """500: a bug in the server."""


class NetworkError(Exception):
    """The request did not reach the server, or its answer did not come back."""


_BY_CODE = {
    "INVALID_ARGUMENT": InvalidArgumentError,
    "INVALID_EXECUTION_EVENT": InvalidArgumentError,
    "UNAUTHORIZED": UnauthorizedError,
    "EXECUTION_NOT_FOUND": NotFoundError,
    "SCHEDULE_NOT_FOUND": NotFoundError,
    "KEY_NOT_FOUND": NotFoundError,
    "ROUTE_NOT_FOUND": NotFoundError,
    "METHOD_NOT_ALLOWED": MethodNotAllowedError,
    "TIMEOUT": AwaitTimeoutError,
    "LEASE_LOST": LeaseLostError,
    "START_REQUEST_MISMATCH": StartRequestMismatchError,
    "EXECUTION_ID_CONFLICT": ExecutionIdConflictError,
    "LIMIT_EXCEEDED": LimitExceededError,
    "INTERNAL": InternalError,
}
UNAVAILABLE_CODES = frozenset({"STORAGE_FAILED", "CLOSED", "CANCELLED", "NOT_LEADER", "OUTCOME_UNKNOWN"})
"""The codes of a 503, alone or as one acknowledgement's answer in a batch:
the store could not take it now, and sending it again is how to find out."""


def error_of(status: int, body: Dict[str, Any], retry_after: Optional[float] = None) -> ExecstoreError:
    """The error for an answer with status and body."""
    code = body.get("code", "")
    if code in UNAVAILABLE_CODES:
        return UnavailableError(status, body, retry_after)
    return _BY_CODE.get(code, ExecstoreError)(status, body)
