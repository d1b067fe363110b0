"""Errors as the API answers them: ``{"error": {"code", "message"}}`` with a 4xx status
(or 503 while something the relay depends on is away). These are plain exceptions that
any layer may raise; :mod:`relay.http.errors` turns them into answers."""

from __future__ import annotations


class ApiError(Exception):
    """An answer for the client: ``status`` (4xx, or 503), a stable ``code``, a
    ``message`` safe to show, and optional headers (``Retry-After``, ``WWW-Authenticate``)."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


class StoreUnavailable(Exception):
    """A database the relay needs (``what``: turn records, thread locks, span store,
    checkpoints) cannot be reached now. Raised by the PostgreSQL stores in place of the
    driver's errors (relay/store/pool.py); answered ``503 store_unavailable`` with
    ``Retry-After`` by :func:`store_unavailable_handler`."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what}: {reason}")
        self.what = what
        self.reason = reason
