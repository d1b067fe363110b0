"""``GET /turns/{id}/events``: a turn's stream (DESIGN.md §4), live from the bus, or what
is left of it when its log is gone: the rest from the stored spans, its end from its
record, ``204`` once the reader has the end; ``?source=spans`` re-derives the whole turn
from its stored spans (relay/http/replay.py), ``?format=agui`` writes AG-UI events and
``?wait=S`` waits for a turn that has not arrived yet.

:class:`TurnEvents` is the route: the turn found and its reader checked, then the stream
from the bus (:meth:`TurnEvents.on_the_bus`) or, when the bus no longer holds its log,
from the record (:meth:`TurnEvents.off_the_bus`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from relay.auth import User
from relay.bus.base import BusUnavailable, CursorExpired
from relay.delivery.agui import AGUIEncoder, agui_query
from relay.delivery.negotiation import NDJSON, SSE, stream_media
from relay.errors import ApiError, StoreUnavailable
from relay.events import TURN_TERMINAL
from relay.http.errors import error_responses
from relay.http.identity import check_owner, user_of
from relay.http.langgraph_auth import authorize_thread
from relay.http.parts import RelayParts
from relay.http.replay import replay_response, stored_catch_up
from relay.http.requests import MAX_EVENT_ID, parse_cursor
from relay.http.turn_logs import ENDED_BY_RUN, ended_off_the_bus, follows_lost_log
from relay.turns.records import PAUSED, TurnRecord, id_key
from relay.turns.recovery import outcome_delivered, settle_outcome, terminal_event

#: the longest ``?wait=`` of ``GET /turns/{id}/events``, in seconds
MAX_WAIT_S = 300.0
#: how often a waiting reader looks again for a turn another instance may have begun
WAIT_RECHECK_S = 0.5

#: the route's answers, as the OpenAPI document lists them
RESPONSES: dict[int | str, dict[str, Any]] = {
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
}


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


def _bus_unavailable(exc: BusUnavailable) -> ApiError:
    return ApiError(503, "bus_unavailable", str(exc), headers={"Retry-After": "2"})


class TurnEvents:
    """The route ``GET /turns/{id}/events`` over ``relay``'s parts."""

    def __init__(self, relay: RelayParts) -> None:
        self.relay = relay

    def add_to(self, router: APIRouter, auth: Sequence[Any]) -> None:
        """Put the route on ``router``, behind the ``auth`` dependencies."""
        router.add_api_route(
            "/turns/{turn_id}/events",
            self.turn_events,
            methods=["GET"],
            dependencies=list(auth),
            tags=["turns"],
            responses=RESPONSES,
        )

    # (no docstring: it would become the operation's description in the OpenAPI document)
    async def turn_events(
        self,
        request: Request,
        turn_id: str,
        after: int | None = Query(default=None, ge=0, le=MAX_EVENT_ID),
        wait: float = Query(default=0, ge=0, le=MAX_WAIT_S),
    ) -> Response:
        relay = self.relay
        user = user_of(request)
        cursor = parse_cursor(request)  # (after, as sent: plain digits only)
        agui = agui_query(request)  # ?format=agui: AG-UI 1.0 events (relay/delivery/agui.py)
        if wait:  # ?wait=S: a turn that has not arrived yet (its spans are on their way)
            await turn_arrival(relay, turn_id, wait)
        record = await self.record_of(user, turn_id)
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
            raise _bus_unavailable(exc) from None
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
            ended = await self.off_the_bus(record, turn_id, cursor, media, encoder)
            if ended is not None:
                return ended
        return await self.on_the_bus(request, record, turn_id, cursor, media, encoder)

    async def record_of(self, user: User | None, turn_id: str) -> TurnRecord | None:
        """The turn's record (the id in any spelling of a UUID). While the turn records
        are away (a database restarting), a turn the bus still holds streams on
        regardless (None); only one it does not is a 503 (and any turn, when its owner
        cannot be checked)."""
        relay = self.relay
        try:
            return await relay.turns.get(turn_id)
        except StoreUnavailable:
            with contextlib.suppress(BusUnavailable):
                await relay.bus.lookup(turn_id)
            if user is not None or not relay.bus.has_turn(turn_id):
                raise
            return None

    async def off_the_bus(
        self,
        record: TurnRecord | None,
        turn_id: str,
        cursor: int,
        media: str,
        encoder: AGUIEncoder | None,
    ) -> Response | None:
        """A turn whose log the bus does not hold: 404 without a record, what the reader
        lacks from the stored spans, the end its record says, or, for a pause that
        outlived its log, the log opened again (None: stream it from the bus)."""
        relay = self.relay
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
        return None

    async def on_the_bus(
        self,
        request: Request,
        record: TurnRecord | None,
        turn_id: str,
        cursor: int,
        media: str,
        encoder: AGUIEncoder | None,
    ) -> Response:
        """A turn whose log the bus holds: its end (from the record when the log holds
        none), the rest of the log once the reader has the terminal event, or the log
        live from the cursor."""
        relay = self.relay
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
