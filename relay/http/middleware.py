"""Middleware and dependencies the relay's routes rely on: ``nosniff`` on every answer
(and, in a worker of ``serve --workers N``, ``X-Relay-Worker``: which one answered),
CORS, memory given back after a large body (relay/http/memory.py), and a 503 while the
shared bus is down.

CORS is one middleware with one policy (:func:`cors_policy`): langgraph.json's
``http.cors`` when ``serve --config`` has one (Starlette's ``CORSMiddleware`` keyword
arguments, its defaults for the keys left out, as the Agent Server applies it), with
``RELAY_CORS_ORIGINS`` filling ``allow_origins`` when ``http.cors`` leaves it out (as the
Agent Server's ``CORS_ALLOW_ORIGINS`` does); else the relay's own policy for the origins
``RELAY_CORS_ORIGINS`` lists (off by default)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.middleware.cors import CORSMiddleware

from relay.errors import ApiError
from relay.http.memory import GiveBack
from relay.settings import ConfigError, RelaySettings

#: http.cors's keys (langgraph-cli's CorsConfig) and the type each must have
CORS_KEYS: dict[str, type] = {
    "allow_origins": list,
    "allow_methods": list,
    "allow_headers": list,
    "allow_credentials": bool,
    "allow_origin_regex": str,
    "expose_headers": list,
    "max_age": int,
}


_KIND_WORDS = {list: "a list", bool: "true or false", str: "a string", int: "a whole number"}


def install_middleware(
    app: Any, settings: RelaySettings, cors: Mapping[str, Any] | None = None
) -> None:
    app.add_middleware(GiveBack)  # memory back to the system after a large body
    app.add_middleware(NoSniff, worker=settings.worker)
    policy = cors_policy(settings, cors)
    if policy is not None:
        app.add_middleware(CORSMiddleware, **policy)


def cors_policy(
    settings: RelaySettings, configured: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The CORSMiddleware arguments for ``configured`` (langgraph.json's ``http.cors``)
    or, without it, for RELAY_CORS_ORIGINS; None: no CORS. A ConfigError names a key of
    the wrong name or type, and refuses ``"*"`` with RELAY_API_TOKEN (any site could use
    the token)."""
    if configured is None:
        if not settings.cors_origins:
            return None
        return {
            "allow_origins": list(settings.cors_origins),
            # PATCH, PUT, DELETE: the Agent Server API's thread and store routes
            "allow_methods": ["GET", "POST", "PATCH", "PUT", "DELETE"],
            # X-Api-Key: what LangGraph's SDKs send their api_key as (an @auth.authenticate
            # may read it)
            "allow_headers": [
                "Authorization",
                "Content-Type",
                "Accept",
                "Last-Event-ID",
                "Prefer",
                "X-Api-Key",
            ],
            # Content-Location: the run a stream is of, which LangGraph's JS SDK reads
            "expose_headers": ["Location", "Content-Location"],
        }
    policy: dict[str, Any] = {}
    for key, value in configured.items():
        kind = CORS_KEYS.get(key)
        if kind is None:
            raise ConfigError(
                f"langgraph.json: http.cors.{key} is not a CORS setting; use "
                + ", ".join(CORS_KEYS)
            )
        if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
            raise ConfigError(f"langgraph.json: http.cors.{key} must be {_KIND_WORDS[kind]}")
        if isinstance(value, list):
            if not all(isinstance(item, str) for item in value):
                raise ConfigError(f"langgraph.json: http.cors.{key} must be a list of strings")
            value = list(value)
        policy[key] = value
    if "allow_origins" not in policy and settings.cors_origins:
        policy["allow_origins"] = list(settings.cors_origins)
    if "*" in policy.get("allow_origins", ()) and settings.api_token:
        raise ConfigError(
            "langgraph.json: http.cors.allow_origins ['*'] with RELAY_API_TOKEN would let "
            "any site use the token; list the allowed origins instead"
        )
    return policy


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
