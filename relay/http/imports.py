"""``POST /imports``: a trace file (OTLP JSON, Jaeger v2 API, Jaeger UI JSON) stored as
replayable turns, listed in ``GET /turns``."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from relay import conventions as c
from relay.errors import ApiError
from relay.http.parts import RelayParts
from relay.ingest.tracefile import TraceFileError, parse_trace_file
from relay.mapping.feed import TurnSpans, group_turns, replay_events
from relay.turns.records import TurnExists, TurnRecord
from relay.turns.response import STATUSES


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, or 413 naming the limit (checked while reading, not after)."""
    too_large = ApiError(413, "import_too_large",
                         f"The trace file is over the import limit of {limit} bytes "
                         "(RELAY_IMPORT_MAX_BYTES).")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_large
    return bytes(body)


def _turn_summary(turn: TurnSpans) -> dict[str, Any]:
    last = turn.last_root
    return {
        "turn_id": turn.turn_id,
        "thread_id": turn.thread_id,
        "trace_ids": turn.trace_ids,
        "spans": len(turn.spans),
        "outcome": last.attributes.get(c.TURN_OUTCOME),
        "events_url": f"/turns/{turn.turn_id}/events?source=spans",
    }


async def import_response(relay: RelayParts, request: Request) -> JSONResponse:
    """``POST /imports``: store a trace file's turns; each can then be replayed."""
    body = await read_body(request, relay.settings.import_max_bytes)
    try:
        fmt, records = parse_trace_file(body)
    except TraceFileError as exc:
        raise ApiError(exc.status, exc.code, str(exc)) from None
    turns = group_turns(records)
    if not turns:
        raise ApiError(422, "no_turns", "No span in the file carries relay.turn.id, so it "
                       "holds no turn to replay (the run root span of each turn carries it).")
    spans = [s for t in turns for s in t.spans]
    await asyncio.to_thread(relay.store.write, spans, source="import")
    for turn in turns:
        await _remember_turn(relay, turn)
    return JSONResponse({
        "format": fmt,
        "spans": len(spans),
        "ignored_spans": len(records) - len(spans),
        "turns": [_turn_summary(t) for t in turns],
    }, status_code=201)


async def _remember_turn(relay: RelayParts, turn: TurnSpans) -> None:
    """List an imported turn in GET /turns (past turns), unless this relay knows it."""
    if await relay.turns.get(turn.turn_id) is not None:
        return
    chat = next((r for r in sorted(turn.roots, key=lambda r: r.start_ns)
                 if c.TURN_MESSAGE in r.attributes), None)
    last = turn.last_root
    outcome = str(last.attributes.get(c.TURN_OUTCOME, "error"))
    status = outcome if outcome in STATUSES else "error"
    response = last.attributes.get(c.TURN_RESPONSE)
    ended = max((r.end_ns or r.start_ns) for r in turn.roots) / 1e6
    record = TurnRecord(
        turn_id=turn.turn_id, thread_id=turn.thread_id, status=status,
        message=str(chat.attributes[c.TURN_MESSAGE]) if chat is not None else "",
        started_at=turn.started_ns / 1e6,
        ended_at=None if status == "paused" else ended,
        paused_at=ended if status == "paused" else None,
        response=response if isinstance(response, str) else None,
        root_trace_id=last.trace_id, root_span_id=last.span_id,
        last_seq=len(replay_events(turn.spans)),  # the replay's seqs, 1..last_seq
    )
    try:
        await relay.turns.create(record)
    except TurnExists:
        pass
