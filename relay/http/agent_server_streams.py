"""A run's stream as LangGraph's SSE (relay/agent_server/stream.py's encoder), from wherever
the run's events are: the bus (live, or the log of a run that ended a moment ago, on this
instance or another), or, once the bus no longer holds its log, the turn's stored spans
replayed (the same events: the same frames, the same ids), or at least the end its record
says. Shared by ``POST /threads/{id}/runs/stream`` (relay/http/agent_server.py) and the
join stream ``GET /threads/{id}/runs/{run_id}/stream`` (relay/http/agent_server_runs.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlencode

from starlette.responses import Response

from relay.agent_server.stream import RunStreamEncoder
from relay.bus.base import BusUnavailable
from relay.delivery.negotiation import SSE
from relay.errors import ApiError
from relay.events import RUN_TERMINAL
from relay.http.parts import RelayParts
from relay.http.replay import load_turn_events
from relay.turns.records import TurnRecord
from relay.turns.recovery import terminal_event


def run_location(record: TurnRecord) -> str:
    """The run's path (``Content-Location``), as LangGraph's server names it."""
    return f"/threads/{record.thread_id}/runs/{record.turn_id}"


def join_location(record: TurnRecord, modes: Sequence[str], subgraphs: bool) -> str:
    """The run's join stream with a stream's modes (``Location``: LangGraph's SDKs reconnect
    there and send only the query it lacks), and ``stream_subgraphs`` when it asked."""
    query = [("stream_mode", mode) for mode in modes]
    if subgraphs:
        query.append(("stream_subgraphs", "true"))
    return f"{run_location(record)}/stream?{urlencode(query)}"


async def run_stream(
    relay: RelayParts,
    record: TurnRecord,
    encoder: RunStreamEncoder,
    *,
    on_disconnect: str,
    headers: list[tuple[bytes, bytes]],
) -> Response:
    """The run's frames after ``encoder.start`` (those after its cursor written)."""
    turn_id = record.turn_id
    after = encoder.start
    try:  # a turn another instance runs (RELAY_BUS=redis://)
        await relay.bus.lookup(turn_id)
    except BusUnavailable as exc:
        raise ApiError(503, "bus_unavailable", str(exc), headers={"Retry-After": "2"}) from None
    if relay.runs.running(turn_id) or relay.bus.has_turn(turn_id):
        return relay.streams.live(
            turn_id,
            after,
            SSE,
            stop_at=RUN_TERMINAL,
            on_disconnect=on_disconnect,
            encoder=encoder,
            frames=encoder.frames,
            headers=headers,
        )
    latest = await relay.turns.get(turn_id) or record
    events = []
    try:  # its log is gone: the turn's stored spans give back its events
        derived = await load_turn_events(relay, turn_id)
        while not derived.done:
            await derived.until(len(derived.events))
        if derived.failure is None:
            events = [event for event in derived.events if event.seq > after]
    except ApiError:  # no spans stored (retention, never stored): the end its record says
        events = []
    ended = next((n for n, event in enumerate(events) if event.type in RUN_TERMINAL), None)
    if ended is None:
        events = [terminal_event(latest, after)]
    else:
        events = events[: ended + 1]
    return relay.streams.fixed(
        events, after, SSE, encoder=encoder, frames=encoder.frames, headers=headers
    )
