"""Errors as the API answers them: ``{"error": {"code", "message"}}`` with a 4xx status."""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse


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
