"""The error answers of the HTTP surface: every :class:`~relay.errors.ApiError` as
``{"error": {"code", "message"}}``, FastAPI's validation errors in the same shape, and a
database that went away as ``503 store_unavailable`` with ``Retry-After``, never a bare
500. :func:`install_error_handlers` registers them all on an app."""

from __future__ import annotations

import logging
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse

from relay.errors import ApiError, StoreUnavailable

log = logging.getLogger("relay.errors")

#: ``Retry-After`` while a database is unavailable: a pool replaces a dead connection on
#: its next checkout, so a retry a couple of seconds later is worth it
STORE_RETRY_AFTER_S = 2


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


async def api_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.headers)


async def store_unavailable_handler(request: Request, exc: Exception) -> JSONResponse:
    """503 JSON for :class:`StoreUnavailable`, and for a driver error (psycopg's
    OperationalError, the pool's timeout) that reached a route untranslated: a database
    that went away is a reason to retry, never a bare 500. The message names the part,
    not the reason: the reason can carry a host and port, which is for the log."""
    if not isinstance(exc, StoreUnavailable):
        exc = StoreUnavailable("database", " ".join(str(exc).split())[:200])
    log.warning("relay: %s %s answered 503: %s", request.method, request.url.path, exc)
    return error_response(
        503,
        "store_unavailable",
        f"The relay's database ({exc.what}) is unavailable right now; retry shortly.",
        headers={"Retry-After": str(STORE_RETRY_AFTER_S)},
    )


class _ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """The body of every 4xx/5xx answer: ``{"error": {"code", "message"}}``."""

    error: _ErrorDetail


_REASONS = {
    400: "Malformed request",
    401: "Missing or wrong bearer token",
    404: "Unknown turn",
    406: "Unacceptable Accept",
    409: "Conflict",
    410: "No longer retained",
    413: "Body too large",
    422: "Invalid field",
    429: "Rate limited",
    503: "Not ready",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the error answers a route can give."""
    return {
        code: {"model": ErrorBody, "description": _REASONS.get(code, "Error")} for code in codes
    }


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's parameter validation errors, in our error shape."""
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("query", "path"))
    message = f"{where}: {first.get('msg', 'invalid value')}" if where else "invalid request"
    return error_response(422, "invalid_request", message)


def install_error_handlers(app: Any) -> None:
    """Our error shape for every route of ``app``: API errors, validation errors, and a
    database that is away (also a driver error no store translated)."""
    app.add_exception_handler(ApiError, api_error_handler)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(StoreUnavailable, store_unavailable_handler)
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the embedded default has no PostgreSQL
        return
    app.add_exception_handler(psycopg.OperationalError, store_unavailable_handler)
