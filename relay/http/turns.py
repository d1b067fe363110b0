"""The turn API (DESIGN.md §5), as a FastAPI router over the relay's parts.

Routes: ``GET /turns/{id}/events`` (the turn's stream, live or re-derived from stored
spans), ``GET /turns/{id}``, ``GET /turns``, ``POST /turns/{id}/cancel``,
``POST /messages/{id}/feedback``, ``POST /imports``, ``GET /graph``; on the same router,
``GET /graphs`` (relay/http/graphs.py), ``GET /config``, ``GET /healthz``,
``GET /readyz`` and ``GET /metrics`` (relay/http/operations.py), ``POST /v1/traces``
(when the OTLP receiver is on) and the SPA's files at ``/``. The run endpoints
(``POST /chat``, ``/chat/resume``, ``/agui``) belong to the app that owns the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.responses import JSONResponse, Response

from relay.bus.base import BusUnavailable, CursorExpired
from relay.delivery.agui import AGUIEncoder, agui_query
from relay.delivery.negotiation import NDJSON, SSE, stream_media
from relay.errors import ApiError, StoreUnavailable
from relay.events import TURN_TERMINAL
from relay.http.errors import error_responses
from relay.http.graphs import add_graph_routes
from relay.http.identity import check_owner, user_key, user_of
from relay.http.imports import import_response
from relay.http.langgraph_auth import authorize, authorize_graph, authorize_thread, thread_filter
from relay.http.operations import add_operation_routes
from relay.http.otlp import add_receiver_routes
from relay.http.parts import RelayParts
from relay.http.replay import replay_response, stored_catch_up
from relay.http.requests import MAX_EVENT_ID, parse_cursor, read_json_object
from relay.http.spa import add_spa_routes
from relay.http.turn_feed import feed_response
from relay.http.turn_logs import ENDED_BY_RUN, ended_off_the_bus, follows_lost_log
from relay.turns.access import may_see
from relay.turns.messages import RATINGS
from relay.turns.records import PAUSED, RUNNING, TurnRecord, id_key
from relay.turns.recovery import outcome_delivered, settle_outcome, terminal_event

#: the longest ``?wait=`` of ``GET /turns/{id}/events``, in seconds
MAX_WAIT_S = 300.0
#: how often a waiting reader looks again for a turn another instance may have begun
WAIT_RECHECK_S = 0.5


async def turn_arrival(relay: RelayParts, turn_id: str, wait_s: float) -> None:
    """Return once the turn exists (its record, or its log on the bus), or after
    ``wait_s``. Woken by the turn feed as this instance records the turn; looks again
    every :data:`WAIT_RECHECK_S` for one another instance records (a shared store)."""
    key = id_key(turn_id)
    deadline = asyncio.get_running_loop().time() + wait_s
    with relay.feed.watch(lambda record: record.turn_key == key) as watcher:
        while True:
            if relay.bus.has_turn(turn_id):
                return
            with contextlib.suppress(StoreUnavailable):
                if await relay.turns.get(turn_id) is not None:
                    return
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            await watcher.next(min(left, WAIT_RECHECK_S))


# -- the router ------------------------------------------------------------------------


def build_router(relay: RelayParts) -> APIRouter:
    router = APIRouter()
    auth = [Depends(relay.identify)]  # the user (RELAY_AUTH): a turn is only its owner's

    @router.get(
        "/turns/{turn_id}/events",
        dependencies=auth,
        tags=["turns"],
        responses={
            200: {
                "description": "The turn's events (SSE, or NDJSON)",
                "content": {
                    SSE: {"schema": {"type": "string"}},
                    NDJSON: {"schema": {"type": "string"}},
                },
            },
            204: {
                "description": "The reader already has the turn's end "
                "(its terminal event and what follows it): stop "
                "reconnecting"
            },
            **error_responses(400, 401, 404, 410, 422),
        },
    )
    async def turn_events(
        request: Request,
        turn_id: str,
        after: int | None = Query(default=None, ge=0, le=MAX_EVENT_ID),
        wait: float = Query(default=0, ge=0, le=MAX_WAIT_S),
    ) -> Response:
        user = user_of(request)
        cursor = parse_cursor(request)  # (after, as sent: plain digits only)
        agui = agui_query(request)  # ?format=agui: AG-UI 1.0 events (relay/delivery/agui.py)
        if wait:  # ?wait=S: a turn that has not arrived yet (its spans are on their way)
            await turn_arrival(relay, turn_id, wait)
        try:
            record = await relay.turns.get(turn_id)  # the id in any spelling of a UUID
        except StoreUnavailable:
            # the turn records are away (a database restarting): a turn the bus still
            # holds streams on regardless; only one it does not is a 503 (and any turn,
            # when its owner cannot be checked)
            with contextlib.suppress(BusUnavailable):
                await relay.bus.lookup(turn_id)
            if user is not None or not relay.bus.has_turn(turn_id):
                raise
            record = None
        if record is not None:
            check_owner(user, record)
            turn_id = record.turn_id  # its own spelling: its key on the bus and in the store
        await authorize_thread(
            relay.langgraph_auth,
            request,
            "read",
            record,
            {"thread_id": record.thread_id if record else None, "run_id": turn_id},
            ApiError(404, "unknown_turn", "There is no such turn."),
        )
        # (no record: no user's turn, as a user's run records its turn before it starts; a
        # turn received over OTLP that has not settled, say: everyone's)
        if request.query_params.get("source") not in (None, "", "live"):  # ?source=spans
            return await replay_response(
                relay, request, turn_id, cursor, encoder=AGUIEncoder() if agui else None
            )
        media = stream_media(request.headers.get("accept"))
        encoder = AGUIEncoder() if agui else None
        try:  # a turn another instance runs (RELAY_BUS=redis://)
            await relay.bus.lookup(turn_id)
        except BusUnavailable as exc:
            raise ApiError(503, "bus_unavailable", str(exc), headers={"Retry-After": "2"}) from None
        if follows_lost_log(relay, record, turn_id, cursor):
            # running by its record, its log not (yet) on the shared bus (Redis lost it;
            # its owner writes it again): follow it from the cursor, never make up an end
            return relay.streams.live(
                turn_id,
                cursor,
                media,
                stop_at=TURN_TERMINAL,
                on_disconnect="continue",
                encoder=encoder,
            )
        if not relay.bus.has_turn(turn_id):
            if record is None:
                raise ApiError(
                    404,
                    "unknown_turn",
                    "There is no such turn. (A turn received over OTLP appears "
                    "when its first spans have come and settled: ?wait=S waits "
                    "up to S seconds for it.)",
                )
            if record.status in ENDED_BY_RUN and 0 < cursor < record.last_seq:
                # its log is gone (the bus's TTL, a Redis that lost it): what the reader
                # lacks, from the stored spans, with the seqs it had
                caught_up = await stored_catch_up(
                    relay, turn_id, record.last_seq, cursor, media, encoder
                )
                if caught_up is not None:
                    return caught_up
            if record.status != PAUSED:  # over, or died with its process: say how it ended
                record = await settle_outcome(relay.turns, record, cursor)
                if outcome_delivered(record, cursor):
                    return Response(status_code=204)  # EventSource: stop reconnecting
                return relay.streams.outcome(
                    terminal_event(record, cursor), cursor, media, encoder=encoder
                )
            relay.bus.open_turn(turn_id, record.last_seq)  # a pause outlived its log
            if cursor < record.last_seq:
                raise ApiError(
                    410,
                    "cursor_expired",
                    f"Events up to {record.last_seq} of this turn are no longer "
                    f"retained; reconnect with Last-Event-ID: {record.last_seq}, "
                    "or replay them with ?source=spans.",
                )
        last = relay.bus.last_seq(turn_id)
        if record is not None and ended_off_the_bus(relay, record, turn_id):
            record = await settle_outcome(relay.turns, record, max(cursor, last))
            if outcome_delivered(record, cursor):
                return Response(status_code=204)
            return relay.streams.outcome(
                terminal_event(record, cursor), cursor, media, encoder=encoder
            )
        if cursor > last:
            raise ApiError(
                400,
                "invalid_cursor",
                f"Event {cursor} does not exist in this turn (its last event is {last}).",
            )
        terminal = relay.bus.terminal_seq(turn_id)
        if terminal is not None and cursor >= terminal:
            # the reader has the terminal event: the rest of the log (the answer's
            # message_saved), or 204 once it has that too, the WHATWG answer that makes
            # a browser's EventSource stop reconnecting (DESIGN.md §4)
            await relay.runs.settle(turn_id)  # the run may still be saving the answer
            if cursor >= relay.bus.last_seq(turn_id):
                return Response(status_code=204)
            rest = await relay.streams.tail(turn_id, cursor, media, encoder=encoder)
            return rest if rest is not None else Response(status_code=204)
        try:
            return relay.streams.live(
                turn_id,
                cursor,
                media,
                stop_at=TURN_TERMINAL,
                on_disconnect=request.query_params.get("on_disconnect", "continue"),
                encoder=encoder,
            )
        except CursorExpired as exc:
            raise ApiError(410, "cursor_expired", str(exc)) from None

    @router.get(
        "/turns/{turn_id}", dependencies=auth, tags=["turns"], responses=error_responses(401, 404)
    )
    async def turn(request: Request, turn_id: str) -> JSONResponse:
        user = user_of(request)
        record = await relay.turns.get(turn_id)  # the id in any spelling of a UUID
        # a client reads the record the moment it has the run's terminal event (a pause):
        # the run's end is written a moment later; wait for it, then read it again
        if (
            record is not None
            and record.status == RUNNING
            and await relay.runs.settle(record.turn_id)
        ):
            record = await relay.turns.get(turn_id)
        record = check_owner(user, record)
        await authorize_thread(
            relay.langgraph_auth,
            request,
            "read",
            record,
            {"thread_id": record.thread_id, "run_id": record.turn_id},
            ApiError(404, "unknown_turn", "There is no such turn."),
        )
        return JSONResponse(record.public())

    @router.get(
        "/turns",
        dependencies=auth,
        tags=["turns"],
        responses={
            200: {
                "description": "The turns (JSON); with Accept: "
                "text/event-stream, the list and then each change, live",
                "content": {SSE: {"schema": {"type": "string"}}},
            },
            **error_responses(401, 422),
        },
    )
    async def turns(
        request: Request,
        thread_id: str | None = None,
        limit: int = Query(default=20, ge=1, le=200),
        before: float | None = None,
        graph: str | None = None,
        status: str | None = Query(
            default=None, pattern="^(running|paused|answered|refused|error|cancelled|interrupted)$"
        ),
    ) -> Response:
        """The turns the asker may see, newest first; with ``Accept: text/event-stream``,
        the same list and then every change of a turn's status, live
        (relay/http/turn_feed.py)."""
        user = user_of(request)
        # LangGraph's Auth: a thread's turns are threads.read, every turn threads.search
        allowed = await thread_filter(
            relay.langgraph_auth,
            request,
            "read" if thread_id else "search",
            {"thread_id": thread_id, "run_id": None}
            if thread_id
            else {"metadata": {}, "status": None, "limit": limit, "offset": 0, "thread_id": None},
        )

        async def page() -> list[TurnRecord]:
            return await relay.turns.list(
                thread_id, limit, before, graph=graph or None, status=status, user_id=user_key(user)
            )

        async def listed() -> list[TurnRecord]:
            return [record for record in await page() if allowed(record)]

        if SSE in (request.headers.get("accept") or ""):

            def accepts(record: TurnRecord) -> bool:
                return (
                    may_see(user, record)
                    and allowed(record)
                    and (thread_id is None or record.thread_key == id_key(thread_id))
                    and (not graph or record.graph == graph)
                    and (status is None or record.status == status)
                )

            return feed_response(
                relay.feed,
                listed,
                accepts,
                heartbeat_s=relay.settings.heartbeat_s,
                retry_ms=relay.settings.retry_ms,
                closing=relay.closing,
            )
        records = await page()
        return JSONResponse(
            {
                # a filter of LangGraph's Auth may leave a page short: the next one is
                # where the unfiltered page ended
                "turns": [r.public() for r in records if allowed(r)],
                # the next page: ?before=next_before (None on the last page)
                "next_before": records[-1].started_at if len(records) == limit else None,
            }
        )

    @router.post(
        "/imports",
        dependencies=auth,
        tags=["turns"],
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"type": "object", "minProperties": 1}}},
            }
        },
        responses=error_responses(400, 401, 413, 415, 422),
    )
    async def imports(request: Request) -> JSONResponse:
        """A trace file (OTLP JSON, Jaeger v2 API, Jaeger UI JSON) -> stored, replayable
        turns (relay/http/imports.py), the importer's."""
        value: dict[str, Any] = {"thread_id": None, "metadata": {}, "if_exists": "raise"}
        await authorize(relay.langgraph_auth, request, "threads", "create", value)
        return await import_response(relay, request, user_key(user_of(request)))

    @router.post(
        "/turns/{turn_id}/cancel",
        dependencies=auth,
        tags=["turns"],
        responses={202: {"description": "Cancelling"}, **error_responses(401, 404)},
    )
    async def cancel(request: Request, turn_id: str) -> JSONResponse:
        record = check_owner(user_of(request), await relay.turns.get(turn_id))
        await authorize_thread(
            relay.langgraph_auth,
            request,
            "update",
            record,
            {"thread_id": record.thread_id, "action": "interrupt"},
            ApiError(404, "unknown_turn", "There is no such turn."),
        )
        cancelled = relay.runs.cancel(record.turn_id)
        if not cancelled and record.status == RUNNING and relay.cancels is not None:
            try:  # another instance runs it (a replica, a worker): its owner cancels it
                own = 1 if relay.cancels.listening.is_set() else 0  # hears itself too
                cancelled = await relay.cancels.request(record.turn_id) > own
            except BusUnavailable as exc:
                raise ApiError(
                    503, "bus_unavailable", str(exc), headers={"Retry-After": "2"}
                ) from None
        status = "cancelling" if cancelled else record.status
        return JSONResponse(
            {"turn_id": record.turn_id, "cancelled": cancelled, "status": status},
            status_code=202 if cancelled else 200,
        )

    @router.post(
        "/messages/{message_id}/feedback",
        dependencies=auth,
        tags=["turns"],
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "required": ["rating"],
                            "properties": {
                                "rating": {"enum": ["up", "down"]},
                                "comment": {"type": "string", "maxLength": 2000},
                            },
                        }
                    }
                },
            }
        },
        responses=error_responses(400, 401, 404, 413, 415, 422),
    )
    async def feedback(request: Request, message_id: str) -> JSONResponse:
        """Thumbs up or down on a saved answer (the id of its ``message_saved`` event), by
        the user whose turn it answered."""
        user = user_of(request)
        body = await read_json_object(request, relay.settings.max_body_bytes)
        rating = body.get("rating")
        comment = body.get("comment")
        if rating not in RATINGS:
            raise ApiError(422, "invalid_rating", '\'rating\' must be "up" or "down".')
        if comment is not None and (not isinstance(comment, str) or len(comment) > 2000):
            raise ApiError(
                422, "invalid_comment", "'comment' must be a string of at most 2000 characters."
            )
        if user is not None:  # whose answer it is: its turn's user
            message = await relay.messages.get(message_id)
            record = await relay.turns.get(message.turn_id) if message is not None else None
            record = check_owner(user, record, "There is no such message.", "unknown_message")
            await authorize_thread(
                relay.langgraph_auth,
                request,
                "update",
                record,
                {"thread_id": record.thread_id, "metadata": {}, "action": None},
                ApiError(404, "unknown_message", "There is no such message."),
            )
        if not await relay.messages.rate(message_id, rating, comment):
            raise ApiError(404, "unknown_message", "There is no such message.")
        return JSONResponse({"message_id": message_id, "rating": rating})

    @router.get("/graph", dependencies=auth, tags=["graph"], responses=error_responses(401, 404))
    async def graph(request: Request) -> JSONResponse:
        missing = ApiError(404, "no_graph", "This relay serves no graph of its own.")
        if relay.topology is None:
            raise missing
        first = next(iter(relay.agents), "")
        await authorize_graph(relay.langgraph_auth, request, first, missing)
        return JSONResponse(relay.topology)

    add_graph_routes(
        router, relay.agents, auth, relay.langgraph_auth
    )  # GET /graphs, GET /graphs/{name}
    add_operation_routes(router, relay)  # GET /config, /healthz, /readyz, /metrics
    # POST /v1/traces (RELAY_OTLP_HTTP): the receiver keeps its own credential
    add_receiver_routes(router, relay, [Depends(relay.require_token)])
    add_spa_routes(router, relay.settings.resolved_spa_dir())
    return router
