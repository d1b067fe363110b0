"""``GET /turns/{id}/events?source=spans``: a stored turn, re-derived from its spans by the
live path's mapping and sent by the live stream's writer, at its original pace
(``&speed=S``, ``&max_gap_s=G``), as our events or AG-UI's (``&format=agui``).

The events are sent while they are derived (relay/delivery/replay.py): the answer waits
only until the event after the cursor exists, so a turn of any size starts at once; the
cursor checks (``400`` past the end, ``204`` at it) wait for the derivation to reach the
cursor, not for the whole turn. A turn whose spans cannot be mapped is ``422
unmappable_spans`` (relay/mapping/unmappable.py)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from relay.bus.static import Derived
from relay.delivery.negotiation import NDJSON, stream_media
from relay.delivery.replay import MAX_SPEED, replay_stream, start_derivation
from relay.delivery.streaming import NDJSONEncoder, SSEEncoder
from relay.errors import ApiError
from relay.http.parts import RelayParts
from relay.mapping.unmappable import UNMAPPABLE_SPANS, UnmappableSpans


def parse_speed(raw: str | None) -> float:
    if raw is None or raw == "":
        return 1.0
    try:
        speed = float(raw)
    except ValueError:
        speed = math.nan
    if not math.isfinite(speed) or not 0 <= speed <= MAX_SPEED:
        raise ApiError(
            400,
            "invalid_speed",
            f"speed={raw!r}: use a number from 0 (all at "
            f"once) to {MAX_SPEED:g}; 1 keeps the original pacing.",
        )
    return speed


def _max_gap(raw: str | None) -> float | None:
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ApiError(
            400,
            "invalid_max_gap",
            f"max_gap_s={raw!r}: use a number of "
            "seconds >= 0 (the longest pause the replay keeps).",
        )
    return value


async def load_turn_events(relay: RelayParts, turn_id: str) -> Derived:
    """The turn's replayed events, being derived (read, ordered and mapped in a worker
    thread, batch by batch), or the API error that says why there are none."""
    store = relay.store
    if relay.runs.running(turn_id):
        raise ApiError(
            409,
            "turn_running",
            "This turn is still running; its spans are stored as they end. "
            "Follow it live without ?source=spans, or replay it once it has "
            "finished.",
        )
    processor = relay.store_processor
    if processor is not None:  # spans that ended a moment ago reach the store now
        await asyncio.to_thread(processor.force_flush, 5000)
    state, stream = await asyncio.to_thread(store.turn_span_stream, turn_id)
    if stream is not None:  # stored: its state and first chunk are read
        return start_derivation(stream, stream, relay.resume_route, close=stream.close)
    retention = (
        f"RELAY_STORE_RETENTION_S={relay.settings.store_retention_s:g}, "
        f"RELAY_STORE_MAX_TURNS={relay.settings.store_max_turns}"
    )
    if state == "expired":
        raise ApiError(
            410,
            "turn_expired",
            f"The spans of this turn are no longer stored: retention ({retention}) "
            "dropped them. GET /turns/{turn_id} still has its result.",
        )
    if await relay.turns.get(turn_id) is None:
        raise ApiError(404, "unknown_turn", "There is no such turn.")
    raise ApiError(
        410,
        "turn_expired",
        f"The span store holds no spans of this turn: they expired ({retention}) "
        "or were never stored. GET /turns/{turn_id} still has its result.",
    )


async def replay_response(
    relay: RelayParts, request: Request, turn_id: str, cursor: int, encoder: Any = None
) -> Response:
    """``GET /turns/{turn_id}/events?source=spans[&speed=S][&max_gap_s=G]``."""
    source = request.query_params.get("source")
    if source != "spans":
        raise ApiError(
            400,
            "invalid_source",
            f"source={source!r}: use source=spans (replay from stored spans) or "
            "leave it out (the live stream).",
        )
    speed = parse_speed(request.query_params.get("speed"))
    max_gap_s = _max_gap(request.query_params.get("max_gap_s"))
    derived = await load_turn_events(relay, turn_id)
    try:
        await derived.until(cursor)  # the event after the cursor, or the end
    except BaseException:
        derived.cancelled = True
        raise
    events = derived.events
    if len(events) <= cursor:  # the derivation ended there
        if isinstance(derived.failure, UnmappableSpans):
            raise ApiError(422, UNMAPPABLE_SPANS, str(derived.failure))
        if derived.failure is not None:
            raise derived.failure  # (a 500, as before the first byte of any replay)
        if cursor > len(events):
            raise ApiError(
                400,
                "invalid_cursor",
                f"Event {cursor} does not exist in the "
                f"replay of this turn (its last event is {len(events)}).",
            )
        if events:  # the reader has it all: EventSource, stop
            return Response(status_code=204)
    media = stream_media(request.headers.get("accept"))
    if encoder is None:
        encoder = NDJSONEncoder() if media == NDJSON else SSEEncoder(relay.settings.retry_ms)
    return replay_stream(
        derived,
        encoder,
        after=cursor,
        speed=speed,
        heartbeat_s=relay.settings.heartbeat_s,
        send_timeout_s=relay.settings.send_timeout_s,
        max_gap_s=max_gap_s,
        max_duration_s=relay.settings.server_timeout_s,
        closing=relay.closing,
    )


async def stored_catch_up(
    relay: RelayParts, turn_id: str, last_seq: int, cursor: int, media: str, encoder: Any = None
) -> Response | None:
    """A turn that ended while the bus no longer holds its log (its TTL ran out; Redis
    lost it): what a reader at ``cursor`` lacks, re-derived from the turn's stored spans
    and sent at once, when they give back its whole log (``last_seq`` events, numbered
    from 1, its terminal event among them); 204 when the reader has it all. None when
    they do not (no spans stored, retention, a mapping that fails): the caller answers
    from the record."""
    try:
        derived = await load_turn_events(relay, turn_id)
    except ApiError:
        return None
    while not derived.done:
        await derived.until(len(derived.events))
    events = derived.events
    whole = (
        derived.failure is None
        and len(events) == last_seq
        and all(event.seq == n for n, event in enumerate(events, 1))
        and any(event.is_turn_terminal for event in events[-2:])
    )
    if not whole:
        return None
    if cursor >= len(events):
        return Response(status_code=204)  # the reader has it all: EventSource, stop
    if encoder is None:
        encoder = NDJSONEncoder() if media == NDJSON else SSEEncoder(relay.settings.retry_ms)
    return replay_stream(
        events,
        encoder,
        after=cursor,
        speed=0,
        heartbeat_s=relay.settings.heartbeat_s,
        send_timeout_s=relay.settings.send_timeout_s,
    )
