"""``POST /imports``: a trace file (OTLP JSON, Jaeger v2 API, Jaeger UI JSON) stored as
replayable turns, listed in ``GET /turns``. The file comes as ``application/json`` (or
``application/x-ndjson``, one object a line); another type is ``415``. A file whose
spans cannot be mapped to events (relay/mapping/unmappable.py) is ``422
unmappable_spans``, refused whole before anything is stored.

:class:`ImportRoute` is the route; :func:`import_response` its work."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import JSONResponse

from relay import conventions as c
from relay.errors import ApiError
from relay.http.errors import error_responses
from relay.http.identity import user_key, user_of
from relay.http.langgraph_auth import authorize
from relay.http.parts import RelayParts
from relay.http.requests import is_json, read_body, require_media_type
from relay.ingest.tracefile import TraceFileError, parse_trace_file
from relay.mapping.feed import TurnSpans, group_turns, replay_events
from relay.mapping.unmappable import UNMAPPABLE_SPANS, UnmappableSpans
from relay.store import RunIndex
from relay.turns.foreign import imported_runs, record_imported_turn


def _turn_summary(turn: TurnSpans, runs: list[RunIndex]) -> dict[str, Any]:
    last = turn.last_root
    outcome = last.attributes.get(c.TURN_OUTCOME)
    if turn.foreign:  # another instrumentation's: its outcome is its last run's
        outcome = next((r.outcome for r in reversed(runs) if r.outcome), None)
    return {
        "turn_id": turn.turn_id,
        "thread_id": turn.thread_id,
        "trace_ids": turn.trace_ids,
        "spans": len(turn.spans),
        "outcome": outcome,
        "events_url": f"/turns/{turn.turn_id}/events?source=spans",
    }


def _trace_file_type(media_type: str) -> bool:
    """A trace file's types: JSON, or JSON lines (the Collector's file exporter)."""
    return is_json(media_type) or media_type in ("application/x-ndjson", "application/jsonl")


async def import_response(
    relay: RelayParts, request: Request, user_id: str | None = None
) -> JSONResponse:
    """``POST /imports``: store a trace file's turns; each can then be replayed, by the
    importer (``user_id``, when requests have users) only. A file that holds a turn
    another user can see here is refused whole: its spans would join that turn's."""
    require_media_type(
        request,
        "a trace file sent as JSON (Content-Type: application/json, or "
        "application/x-ndjson for one object a line)",
        _trace_file_type,
    )
    limit = relay.settings.import_max_bytes
    body = await read_body(
        request,
        limit,
        lambda: ApiError(
            413,
            "import_too_large",
            f"The trace file is over the import limit of {limit} bytes (RELAY_IMPORT_MAX_BYTES).",
        ),
    )
    try:
        fmt, records = parse_trace_file(body)
    except TraceFileError as exc:
        raise ApiError(exc.status, exc.code, str(exc)) from None
    finally:
        del body  # up to RELAY_IMPORT_MAX_BYTES: not held while the spans are stored
    try:  # every turn mapped (our turns' replays counted) before anything is stored
        turns = group_turns(records)
        seqs = {t.turn_id: len(replay_events(t.spans)) for t in turns if not t.foreign}
    except UnmappableSpans as exc:
        raise ApiError(422, UNMAPPABLE_SPANS, f"The file cannot be imported: {exc}") from None
    if not turns:
        raise ApiError(
            422,
            "no_turns",
            "No span in the file carries relay.turn.id, and no "
            "trace in it is a graph run another instrumentation traced "
            "(OpenInference, OpenLLMetry, GenAI invoke_agent): it holds no turn "
            "to replay.",
        )
    if user_id is not None:
        for turn in turns:
            known = await relay.turns.get(turn.turn_id)
            if known is not None and known.user_id != user_id:
                raise ApiError(
                    409,
                    "import_conflict",
                    f"Turn {turn.turn_id} of this file "
                    "is already known to this relay; it cannot be imported.",
                )
    spans = [s for t in turns for s in t.spans]
    await asyncio.to_thread(relay.store.write, spans, source="import")
    runs = {t.turn_id: imported_runs(t) if t.foreign else [] for t in turns}
    foreign = [entry for entries in runs.values() for entry in entries]
    if foreign:
        await asyncio.to_thread(relay.store.index_runs, foreign, source="import")
    for turn in turns:
        await record_imported_turn(relay.turns, turn, user_id or "", seqs.get(turn.turn_id))
    return JSONResponse(
        {
            "format": fmt,
            "spans": len(spans),
            "ignored_spans": len(records) - len(spans),
            "turns": [_turn_summary(t, runs[t.turn_id]) for t in turns],
        },
        status_code=201,
    )


#: the route's body, as the OpenAPI document describes it
OPENAPI_EXTRA: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object", "minProperties": 1}}},
    }
}


class ImportRoute:
    """The route ``POST /imports`` over ``relay``'s parts."""

    def __init__(self, relay: RelayParts) -> None:
        self.relay = relay

    def add_to(self, router: APIRouter, auth: Sequence[Any]) -> None:
        """Put the route on ``router``, behind the ``auth`` dependencies."""
        router.add_api_route(
            "/imports",
            self.imports,
            methods=["POST"],
            dependencies=list(auth),
            tags=["turns"],
            openapi_extra=OPENAPI_EXTRA,
            responses=error_responses(400, 401, 413, 415, 422),
        )

    async def imports(self, request: Request) -> JSONResponse:
        """A trace file (OTLP JSON, Jaeger v2 API, Jaeger UI JSON) -> stored, replayable
        turns (relay/http/imports.py), the importer's."""
        value: dict[str, Any] = {"thread_id": None, "metadata": {}, "if_exists": "raise"}
        await authorize(self.relay.langgraph_auth, request, "threads", "create", value)
        return await import_response(self.relay, request, user_key(user_of(request)))
