"""The error answers of the HTTP surface: every :class:`~relay.errors.ApiError` as
``{"error": {"code", "message"}}``, and everything else in the same shape: FastAPI's
validation errors, Starlette's ``HTTPException`` (the 404 of an unknown route, or of an
unknown graph's ``/graphs/{name}/...``; the 405 of a wrong method, with its ``Allow``),
an unhandled exception (``500 internal_error``), and a database that went away
(``503 store_unavailable`` with ``Retry-After``, never a bare 500).
:func:`install_error_handlers` registers them all on an app."""

from __future__ import annotations

import logging
import re
from http import HTTPStatus
from typing import Any

from fastapi import exception_handlers as fastapi_defaults
from fastapi.exceptions import RequestValidationError
from fastapi.utils import is_body_allowed_for_status_code
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from relay.errors import ApiError, StoreUnavailable
from relay.turns.refusals import STATUS as REFUSAL_STATUS
from relay.turns.refusals import Refused

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


async def refused_handler(request: Request, exc: Exception) -> JSONResponse:
    """A start or resume the turn's rules refused (relay/turns/admission.py): its kind's
    status, its code and message."""
    assert isinstance(exc, Refused)
    return error_response(REFUSAL_STATUS[exc.kind], exc.code, exc.message)


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
    415: "Not JSON (send Content-Type: application/json)",
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
    message = f"{where}: {first.get('msg', 'invalid value')}." if where else "Invalid request."
    return error_response(422, "invalid_request", message)


#: the code of a Starlette HTTPException is its status's phrase (``not_found``,
#: ``method_not_allowed``, ``gone``), but where the relay has its own word for it
_HTTP_CODES = {413: "body_too_large"}
_GRAPH_ROUTE = re.compile(r"^/graphs/([A-Za-z0-9_-]{1,64})/")


def _unknown_graph(request: Request) -> str | None:
    """The graph an unknown ``/graphs/{name}/...`` route names, when no such graph is
    served by the relay on this app."""
    match = _GRAPH_ROUTE.match(request.url.path)
    relay = getattr(request.app.state, "relay", None)
    if match is None or relay is None or match.group(1) in relay.agents:
        return None
    served = ", ".join(relay.agents)
    return f"No graph named {match.group(1)!r} is served here{'; try ' + served if served else ''}."


def _phrase_code(status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:  # a status Python does not name
        return "http_error"
    return re.sub(r"\W+", "_", phrase.lower()).strip("_")


async def http_error_handler(request: Request, exc: Exception) -> Response:
    """Starlette's HTTPException (an unknown route, a wrong method, an app's own
    ``raise HTTPException(...)``) in our error shape; its headers (``Allow``) kept."""
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if not is_body_allowed_for_status_code(status):
        return Response(status_code=status, headers=exc.headers)
    code = _HTTP_CODES.get(status) or _phrase_code(status)
    message = str(exc.detail)
    if status == 404 and message == "Not Found":
        graph = _unknown_graph(request)
        if graph is not None:
            return error_response(404, "unknown_graph", graph)
        # the path is not repeated: an answer never reflects what a request wrote
        spec = getattr(request.app, "openapi_url", None)
        message = "There is no such route here" + (
            f" (they are listed at {spec})." if spec else "."
        )
    elif status == 405 and message == "Method Not Allowed":
        allowed = (exc.headers or {}).get("Allow") or (exc.headers or {}).get("allow")
        message = f"This route does not take {request.method}" + (
            f"; use {allowed}." if allowed else "."
        )
    if not message.endswith((".", "?", "!")):
        message += "."
    headers = dict(exc.headers) if exc.headers else None
    return error_response(status, code, message, headers)


async def internal_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """An exception no handler took: ``500 internal_error`` in our error shape (Starlette
    logs it with its traceback after this answer); the message says nothing of it."""
    return error_response(
        500,
        "internal_error",
        "The request failed on the server; the server's log says why.",
    )


#: (exception class, our handler, FastAPI's default for it): our handler replaces
#: FastAPI's, never one the app set itself
_HANDLERS: tuple[tuple[Any, Any, Any], ...] = (
    (ApiError, api_error_handler, None),
    (Refused, refused_handler, None),
    (
        RequestValidationError,
        validation_error_handler,
        fastapi_defaults.request_validation_exception_handler,
    ),
    (HTTPException, http_error_handler, fastapi_defaults.http_exception_handler),
    (Exception, internal_error_handler, None),
    (StoreUnavailable, store_unavailable_handler, None),
)


def install_error_handlers(app: Any) -> None:
    """Our error shape for every route of ``app``: API errors, validation errors,
    Starlette's HTTPException (404, 405), an unhandled exception (500), and a database
    that is away (also a driver error no store translated). A handler the app set itself
    (for HTTPException, validation errors or Exception) is kept: only FastAPI's defaults
    are replaced."""
    for kind, handler, default in _HANDLERS:
        current = app.exception_handlers.get(kind)
        if current is None or current is default or kind in (ApiError, Refused, StoreUnavailable):
            app.add_exception_handler(kind, handler)
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the embedded default has no PostgreSQL
        return
    app.add_exception_handler(psycopg.OperationalError, store_unavailable_handler)
