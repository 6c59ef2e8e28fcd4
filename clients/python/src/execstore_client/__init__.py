"""execstore-client: a client for execstore's HTTP API and a worker that runs
executions by the rules of a durable dispatcher, on the standard library."""

from .client import Client, lease_ref
from .errors import (AwaitTimeoutError, ExecstoreError, ExecutionIdConflictError, InternalError,
                     InvalidArgumentError, LeaseLostError, LimitExceededError, MethodNotAllowedError,
                     NetworkError, NotFoundError, StartRequestMismatchError, UnauthorizedError,
                     UNAVAILABLE_CODES, UnavailableError)
from .worker import SUSPENDED, Delivery, ExitWithoutReply, Failure, Worker, error_info

__all__ = [
    "AwaitTimeoutError", "Client", "Delivery", "ExecstoreError", "ExecutionIdConflictError",
    "ExitWithoutReply", "Failure", "InternalError", "InvalidArgumentError", "LeaseLostError",
    "LimitExceededError", "MethodNotAllowedError", "NetworkError", "NotFoundError",
    "StartRequestMismatchError", "SUSPENDED", "UNAVAILABLE_CODES", "UnauthorizedError", "UnavailableError", "Worker",
    "error_info", "lease_ref",
]
