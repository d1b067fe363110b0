"""Errors as the API answers them: ``{"error": {"code", "message"}}`` with a 4xx status
(or 503 while something the relay depends on is away)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse

log = logging.getLogger("relay.errors")

#: ``Retry-After`` while a database is unavailable: a pool replaces a dead connection on
#: its next checkout, so a retry a couple of seconds later is worth it
STORE_RETRY_AFTER_S = 2


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers

    def response(self) -> JSONResponse:
        return error_response(self.status, self.code, self.message, self.headers)


def error_response(status: int, code: str, message: str,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status,
                        headers=headers)


async def api_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return exc.response()


class StoreUnavailable(Exception):
    """A database the relay needs (``what``: turn records, thread locks, span store,
    checkpoints) cannot be reached now. Raised by the PostgreSQL stores in place of the
    driver's errors (relay/pg_pool.py); answered ``503 store_unavailable`` with
    ``Retry-After`` by :func:`store_unavailable_handler`."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what}: {reason}")
        self.what = what
        self.reason = reason


async def store_unavailable_handler(request: Request, exc: Exception) -> JSONResponse:
    """503 JSON for :class:`StoreUnavailable`, and for a driver error (psycopg's
    OperationalError, the pool's timeout) that reached a route untranslated: a database
    that went away is a reason to retry, never a bare 500. The message names the part,
    not the reason: the reason can carry a host and port, which is for the log."""
    if not isinstance(exc, StoreUnavailable):
        exc = StoreUnavailable("database", " ".join(str(exc).split())[:200])
    log.warning("relay: %s %s answered 503: %s", request.method, request.url.path, exc)
    return error_response(503, "store_unavailable",
                          f"The relay's database ({exc.what}) is unavailable right now; "
                          "retry shortly.",
                          headers={"Retry-After": str(STORE_RETRY_AFTER_S)})


class _ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """The body of every 4xx/5xx answer: ``{"error": {"code", "message"}}``."""

    error: _ErrorDetail


_REASONS = {400: "Malformed request", 401: "Missing or wrong bearer token",
            404: "Unknown turn", 406: "Unacceptable Accept", 409: "Conflict",
            410: "No longer retained", 413: "Body too large", 422: "Invalid field",
            429: "Rate limited", 503: "Not ready"}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error answers a route can give."""
    return {code: {"model": ErrorBody, "description": _REASONS.get(code, "Error")}
            for code in codes}


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's parameter validation errors, in our error shape."""
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("query", "path"))
    message = f"{where}: {first.get('msg', 'invalid value')}" if where else "invalid request"
    return error_response(422, "invalid_request", message)
