"""The relay's HTTP surface (DESIGN.md §5), as a FastAPI router over a :class:`Relay`.

Routes: ``GET /turns/{id}/events`` (the turn's stream), ``GET /turns/{id}``,
``GET /turns``, ``POST /turns/{id}/cancel``, ``GET /graph``, ``GET /config``,
``GET /healthz``, ``GET /readyz`` and the SPA's files at ``/``. The run endpoints
(``POST /chat``, ``/chat/resume``) belong to the app that owns the agent; they use
:func:`read_json_object`, :func:`require_token` and :meth:`Relay.stream` from here.
"""

from __future__ import annotations

import contextlib
import hmac
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import FileResponse, JSONResponse, Response

from relay.agui import AGUIEncoder, agui_query
from relay.agui import replay_response as agui_replay_response
from relay.bus.base import BusUnavailable, CursorExpired
from relay.errors import ApiError, StoreUnavailable, error_responses
from relay.events import TURN_TERMINAL
from relay.imports import import_response
from relay.messages import RATINGS
from relay.negotiation import NDJSON, SSE
from relay.receiver.http import add_receiver_routes
from relay.replay import replay_response
from relay.turns import PAUSED

if TYPE_CHECKING:
    from relay.facade import Relay

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
_SPA_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
              ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml",
              ".png": "image/png", ".ico": "image/x-icon", ".json": "application/json"}


# -- request helpers shared with the app's run endpoints ---------------------------------

async def read_json_object(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object, or a 4xx that says what is wrong with it."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "body_too_large", f"The request body is over {limit} bytes.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, "body_too_large", f"The request body is over {limit} bytes.")
    if not body:
        raise ApiError(400, "invalid_json", "The request body is empty; send a JSON object.")
    try:
        value = json.loads(bytes(body))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ApiError(400, "invalid_json", f"The request body is not valid JSON: {exc}.") \
            from None
    if not isinstance(value, dict):
        raise ApiError(400, "invalid_json", "The request body must be a JSON object.")
    return value


def token_checker(token: str | None):
    """A dependency that requires ``Authorization: Bearer <token>`` when a token is set."""
    expected = token.encode() if token else None

    async def require_token(request: Request) -> None:
        if expected is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(),
                                                                  expected):
            raise ApiError(401, "unauthorized",
                           "This API needs an 'Authorization: Bearer <token>' header.",
                           headers={"WWW-Authenticate": "Bearer"})

    return require_token


def parse_cursor(request: Request, after: int | None) -> int:
    """The reader's cursor: ``Last-Event-ID`` wins over ``?after``; both non-negative ints."""
    raw = request.headers.get("last-event-id")
    if raw is not None:
        raw = raw.strip()
        if not raw.isdigit():
            raise ApiError(400, "invalid_cursor",
                           f"Last-Event-ID {raw!r} is not a non-negative event number.")
        return int(raw)
    if after is not None and after < 0:
        raise ApiError(400, "invalid_cursor", "after must be a non-negative event number.")
    return after or 0


def stream_media(request: Request) -> str:
    accept = request.headers.get("accept", "")
    return NDJSON if NDJSON in accept and SSE not in accept else SSE


# -- the router ------------------------------------------------------------------------

def build_router(relay: Relay) -> APIRouter:
    router = APIRouter()
    auth = [Depends(relay.require_token)]

    @router.get("/turns/{turn_id}/events", dependencies=auth, tags=["turns"],
                responses={200: {"description": "The turn's events (SSE, or NDJSON)",
                                 "content": {SSE: {"schema": {"type": "string"}},
                                             NDJSON: {"schema": {"type": "string"}}}},
                           204: {"description": "The reader already has the turn's end "
                                 "(its terminal event and what follows it): stop "
                                 "reconnecting"},
                           **error_responses(400, 401, 404, 410, 422)})
    async def turn_events(request: Request, turn_id: str,
                          after: int | None = Query(default=None, ge=0)) -> Response:
        cursor = parse_cursor(request, after)
        agui = agui_query(request)  # ?format=agui: AG-UI 1.0 events (relay/agui.py)
        try:
            record = await relay.turns.get(turn_id)  # the id in any spelling of a UUID
        except StoreUnavailable:
            # the turn records are away (a database restarting): a turn the bus still
            # holds streams on regardless; only one it does not is a 503
            with contextlib.suppress(BusUnavailable):
                await relay.bus.lookup(turn_id)
            if not relay.bus.has_turn(turn_id):
                raise
            record = None
        if record is not None:
            turn_id = record.turn_id  # its own spelling: its key on the bus and in the store
        if request.query_params.get("source") not in (None, "", "live"):  # ?source=spans
            if agui:
                return await agui_replay_response(relay, request, turn_id, cursor)
            return await replay_response(relay, request, turn_id, cursor)  # relay/replay.py
        media = stream_media(request)
        encoder = AGUIEncoder() if agui else None
        try:  # a turn another instance runs (RELAY_BUS=redis://)
            await relay.bus.lookup(turn_id)
        except BusUnavailable as exc:
            raise ApiError(503, "bus_unavailable", str(exc),
                           headers={"Retry-After": "2"}) from None
        if not relay.bus.has_turn(turn_id):
            if record is None:
                raise ApiError(404, "unknown_turn", "There is no such turn.")
            if record.status != PAUSED:  # over, or died with its process: say how it ended
                record = await relay.settle_outcome(record, cursor)
                if relay.outcome_delivered(record, cursor):
                    return Response(status_code=204)  # EventSource: stop reconnecting
                return relay.outcome_stream(record, cursor, media, encoder=encoder)
            relay.bus.open_turn(turn_id, record.last_seq)  # a pause outlived its log
            if cursor < record.last_seq:
                raise ApiError(410, "cursor_expired",
                               f"Events up to {record.last_seq} of this turn are no longer "
                               f"retained; reconnect with Last-Event-ID: {record.last_seq}, "
                               "or replay them with ?source=spans.")
        last = relay.bus.last_seq(turn_id)
        if cursor > last:
            raise ApiError(400, "invalid_cursor",
                           f"Event {cursor} does not exist in this turn "
                           f"(its last event is {last}).")
        terminal = relay.bus.terminal_seq(turn_id)
        if terminal is not None and cursor >= terminal:
            # the reader has the terminal event: the rest of the log (the answer's
            # message_saved), or 204 once it has that too, the WHATWG answer that makes
            # a browser's EventSource stop reconnecting (DESIGN.md §4)
            await relay.runs.settle(turn_id)  # the run may still be saving the answer
            if cursor >= relay.bus.last_seq(turn_id):
                return Response(status_code=204)
            return relay.tail_stream(turn_id, cursor, media, encoder=encoder)
        try:
            return relay.stream(turn_id, cursor, media, stop_at=TURN_TERMINAL,
                                on_disconnect=request.query_params.get("on_disconnect",
                                                                        "continue"),
                                encoder=encoder)
        except CursorExpired as exc:
            raise ApiError(410, "cursor_expired", str(exc)) from None

    @router.get("/turns/{turn_id}", dependencies=auth, tags=["turns"],
                responses=error_responses(401, 404))
    async def turn(turn_id: str) -> JSONResponse:
        record = await relay.turns.get(turn_id)  # the id in any spelling of a UUID
        if record is None:
            raise ApiError(404, "unknown_turn", "There is no such turn.")
        return JSONResponse(record.public())

    @router.get("/turns", dependencies=auth, tags=["turns"],
                responses=error_responses(401, 422))
    async def turns(thread_id: str | None = None,
                    limit: int = Query(default=20, ge=1, le=200),
                    before: float | None = None) -> JSONResponse:
        records = await relay.turns.list(thread_id, limit, before)
        return JSONResponse({"turns": [r.public() for r in records],
                             # the next page: ?before=next_before (None on the last page)
                             "next_before": records[-1].started_at
                             if len(records) == limit else None})

    @router.post("/imports", dependencies=auth, tags=["turns"],
                 openapi_extra={"requestBody": {"required": True, "content": {
                     "application/json": {"schema": {"type": "object", "minProperties": 1}}}}},
                 responses=error_responses(400, 401, 413, 422))
    async def imports(request: Request) -> JSONResponse:
        """A trace file (OTLP JSON, Jaeger v2 API, Jaeger UI JSON) -> stored, replayable
        turns (relay/imports.py)."""
        return await import_response(relay, request)

    @router.post("/turns/{turn_id}/cancel", dependencies=auth, tags=["turns"],
                 responses={202: {"description": "Cancelling"},
                            **error_responses(401, 404)})
    async def cancel(turn_id: str) -> JSONResponse:
        record = await relay.turns.get(turn_id)
        if record is None:
            raise ApiError(404, "unknown_turn", "There is no such turn.")
        cancelled = relay.runs.cancel(record.turn_id)
        status = "cancelling" if cancelled else record.status
        return JSONResponse({"turn_id": record.turn_id, "cancelled": cancelled,
                             "status": status},
                            status_code=202 if cancelled else 200)

    @router.post("/messages/{message_id}/feedback", dependencies=auth, tags=["turns"],
                 openapi_extra={"requestBody": {"required": True, "content": {
                     "application/json": {"schema": {
                         "type": "object", "required": ["rating"],
                         "properties": {"rating": {"enum": ["up", "down"]},
                                        "comment": {"type": "string", "maxLength": 2000}}}}}}},
                 responses=error_responses(400, 401, 404, 413, 422))
    async def feedback(request: Request, message_id: str) -> JSONResponse:
        """Thumbs up or down on a saved answer (the id of its ``message_saved`` event)."""
        body = await read_json_object(request, relay.settings.max_body_bytes)
        rating, comment = body.get("rating"), body.get("comment")
        if rating not in RATINGS:
            raise ApiError(422, "invalid_rating", "'rating' must be \"up\" or \"down\".")
        if comment is not None and (not isinstance(comment, str) or len(comment) > 2000):
            raise ApiError(422, "invalid_comment",
                           "'comment' must be a string of at most 2000 characters.")
        if not await relay.messages.rate(message_id, rating, comment):
            raise ApiError(404, "unknown_message", "There is no such message.")
        return JSONResponse({"message_id": message_id, "rating": rating})

    @router.get("/graph", dependencies=auth, tags=["graph"],
                responses=error_responses(401, 404))
    async def graph() -> JSONResponse:
        if relay.topology is None:
            raise ApiError(404, "no_graph", "This relay serves no graph of its own.")
        return JSONResponse(relay.topology)

    @router.get("/config", tags=["ui"])
    async def config() -> JSONResponse:
        return JSONResponse({"trace_url": relay.settings.trace_url,
                             "auth_required": relay.settings.api_token is not None})

    @router.get("/healthz", tags=["ops"])
    async def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok"})

    @router.get("/readyz", tags=["ops"], responses={503: {"description": "Not ready"}})
    async def readyz() -> JSONResponse:
        problems = await relay.readiness_problems()
        if problems:
            return JSONResponse({"status": "not ready", "problems": problems}, status_code=503)
        return JSONResponse({"status": "ready"})

    add_receiver_routes(router, relay, auth)  # POST /v1/traces (RELAY_OTLP_HTTP)
    if relay.metrics.enabled:
        @router.get("/metrics", tags=["ops"], include_in_schema=False)
        async def metrics() -> Response:
            from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

            return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    _add_spa_routes(router, relay.settings.resolved_spa_dir())
    return router


def _add_spa_routes(router: APIRouter, spa_dir: Path | None) -> None:
    """Serve the SPA's files by name (no path is ever joined from a request)."""
    if spa_dir is None:
        return
    headers = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
               "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}
    for path in sorted(spa_dir.iterdir()):
        if not path.is_file() or path.suffix not in _SPA_TYPES:
            continue
        route = "/" if path.name == "index.html" else f"/{path.name}"
        router.add_api_route(route, _file_endpoint(path, _SPA_TYPES[path.suffix], headers),
                             methods=["GET"], include_in_schema=False)


def _file_endpoint(path: Path, media_type: str, headers: dict[str, str]):
    async def serve() -> FileResponse:
        return FileResponse(path, media_type=media_type, headers=headers)

    return serve
