"""Middleware and dependencies the relay's routes rely on: ``nosniff`` on every answer
(and, in a worker of ``serve --workers N``, ``X-Relay-Worker``: which one answered),
CORS for the origins ``RELAY_CORS_ORIGINS`` lists (off by default), and a 503 while the
shared bus is down."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.middleware.cors import CORSMiddleware

from relay.errors import ApiError
from relay.settings import RelaySettings


def install_middleware(app: Any, settings: RelaySettings) -> None:
    app.add_middleware(NoSniff, worker=settings.worker)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Accept", "Last-Event-ID", "Prefer"],
            expose_headers=["Location"],
        )


def bus_dependency(problem: Callable[[], str | None]) -> Callable[[], Awaitable[None]]:
    """A dependency for endpoints that need the bus: 503 while the shared bus is down
    (a turn started then could not be streamed by the other instances)."""

    async def require_bus() -> None:
        why = problem()
        if why is not None:
            raise ApiError(
                503,
                "bus_unavailable",
                f"The relay's shared event bus is unavailable ({why}); retry shortly.",
                headers={"Retry-After": "2"},
            )

    return require_bus


class NoSniff:
    """ASGI middleware: ``X-Content-Type-Options: nosniff`` on every response, so no
    answer (an error that quotes input, say) is ever sniffed into HTML; in a worker of
    ``serve --workers N``, ``X-Relay-Worker: {index}`` too."""

    def __init__(self, app: Any, worker: int | None = None) -> None:
        self.app = app
        self.extra = [(b"x-content-type-options", b"nosniff")]
        if worker is not None:
            self.extra.append((b"x-relay-worker", str(worker).encode()))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    h
                    for h in message.get("headers", [])
                    if h[0].lower() != b"x-content-type-options"
                ]
                headers += self.extra
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)
