"""Stored spans -> events: the replay of a turn, by the same mapping as the live path.

A turn's spans (all its runs: the chat and every resume) are cut into phases (each span's
start, its span events and its end), put in the order the live processor saw them, and
fed one by one to :func:`relay.mapping.map_span` (``map_span_event`` for span events)
with a fresh :class:`~relay.mapping.MappingState`. The
result equals the live stream event for event, payload for payload (``ts`` included,
since it comes from span times); only ``seq`` is new, numbered from 1.

The order (docs/events.md, "Replay"): phases sorted by their time (start time for a
start, end time for an end); at equal times, ends before starts, a child's end before
its parent's, a parent's start before its child's, and a zero-duration span's start
right before its end. The live processor sees the same order because the SDK stamps a
span's time just before it calls the processor.

:class:`ReplayStream` sends the events as SSE or NDJSON with the original pacing scaled
by ``speed`` (1 = as it happened, 0 = at once, 4 = four times faster), with heartbeats
through long gaps.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from relay import conventions as c
from relay.bus.static import StaticReader
from relay.errors import ApiError
from relay.events import Event
from relay.mapping import MappingState, map_span, map_span_event
from relay.negotiation import NDJSON
from relay.spans import SpanRecord
from relay.streaming import EventStream, NDJSONEncoder, SSEEncoder

if TYPE_CHECKING:
    from relay.facade import Relay

#: the largest speed factor the API accepts (0 means "no pacing at all")
MAX_SPEED = 1000.0

#: how far a child's end may pass its parent's and still count as nested (time cut to
#: microseconds, as Jaeger's UI JSON does, moves an end back by up to 2 us)
NESTING_SLACK_NS = 2_000

START, EVENT, END = "start", "event", "end"
#: (span, kind, the span event for an EVENT phase): what the live processor handed over
Phase = tuple[SpanRecord, str, dict[str, Any] | None]
_Key = tuple[int, int, int]  # (span index, 0 start / 1 event / 2 end, event index)


# -- order ------------------------------------------------------------------------------

def ordered_phases(records: Sequence[SpanRecord]) -> list[Phase]:
    """Every span's start, span events and end, in the order the live processor saw them."""
    spans = sorted(records, key=lambda r: (r.start_ns, r.trace_id, r.span_id))
    index = {(r.trace_id, r.span_id): i for i, r in enumerate(spans)}
    parent = [index.get((r.trace_id, r.parent_span_id or "")) for r in spans]
    depth = [_depth(i, parent) for i in range(len(spans))]
    ends = _nested_ends(spans, parent, depth)
    groups: dict[int, list[_Key]] = {}
    for i, r in enumerate(spans):
        groups.setdefault(r.start_ns, []).append((i, 0, 0))
        end = ends[i]
        for k, event in enumerate(r.events):  # within the span's life, as live
            t = max(int(event.get("time_ns") or r.start_ns), r.start_ns)
            groups.setdefault(t if end is None else min(t, end), []).append((i, 1, k))
        if end is not None:
            groups.setdefault(end, []).append((i, 2, 0))
    phases: list[Phase] = []
    for t in sorted(groups):
        for i, kind, k in _order_group(groups[t], spans, parent, depth):
            record = spans[i]
            if kind == 1:
                phases.append((record, EVENT, record.events[k]))
            else:
                phases.append((record, END if kind == 2 else START, None))
    return phases


def _nested_ends(spans: list[SpanRecord], parent: list[int | None],
                 depth: list[int]) -> list[int | None]:
    """End times for ordering: a child that ends at most NESTING_SLACK_NS after its parent
    (microsecond times cut separately, as in Jaeger's JSON) is taken to end with it."""
    ends: list[int | None] = [None if r.end_ns is None else max(r.end_ns, r.start_ns)
                              for r in spans]
    for i in sorted(range(len(spans)), key=lambda k: depth[k]):
        p = parent[i]
        end, parent_end = ends[i], ends[p] if p is not None else None
        if end is not None and parent_end is not None \
                and 0 < end - parent_end <= NESTING_SLACK_NS:
            ends[i] = max(parent_end, spans[i].start_ns)
    return ends


def _depth(i: int, parent: list[int | None]) -> int:
    depth, seen, p = 0, {i}, parent[i]
    while p is not None and p not in seen:
        seen.add(p)
        depth += 1
        p = parent[p]
    return depth


def _order_group(group: list[_Key], spans: list[SpanRecord], parent: list[int | None],
                 depth: list[int]) -> list[_Key]:
    """Phases at one instant: a topological order of the nesting, ends first."""
    if len(group) == 1:
        return group
    members = set(group)
    after: dict[_Key, list[_Key]] = {p: [] for p in group}
    waiting = dict.fromkeys(group, 0)

    def edge(first: _Key, then: _Key) -> None:
        if first in members:
            after[first].append(then)
            waiting[then] += 1

    for phase in group:
        i, kind, k = phase
        p = parent[i]
        if kind == 0:
            if p is not None:
                edge((p, 0, 0), phase)  # a parent starts before its child
        elif kind == 1:
            edge((i, 0, 0), phase)  # a span's events come after its start
            edge((i, 1, k - 1), phase)  # and in their order
        else:
            edge((i, 0, 0), phase)  # a zero-duration span: start, then end
            for other in group:
                if other[0] == i and other[1] == 1:
                    edge(other, phase)  # its events before its end
            if p is not None and (p, 2, 0) in members:
                edge(phase, (p, 2, 0))  # a child ends before its parent

    def priority(phase: _Key) -> tuple[Any, ...]:
        i, kind, k = phase
        if kind == 2:
            return (0, -depth[i], i)  # ends first, deepest first
        if kind == 1:
            return (1, i, k)  # then span events
        zero = spans[i].end_ns is not None and spans[i].end_ns <= spans[i].start_ns
        return (2, 0 if zero else 1, depth[i], i)  # then starts, shallowest first

    ready = [(priority(p), p) for p in group if waiting[p] == 0]
    heapq.heapify(ready)
    out: list[_Key] = []
    while ready:
        _, phase = heapq.heappop(ready)
        out.append(phase)
        for then in after[phase]:
            waiting[then] -= 1
            if waiting[then] == 0:
                heapq.heappush(ready, (priority(then), then))
    if len(out) < len(group):  # a cycle (malformed parents): the rest by priority
        done = set(out)
        out += sorted((p for p in group if p not in done), key=priority)
    return out


# -- events -----------------------------------------------------------------------------

def replay_events(records: Sequence[SpanRecord]) -> list[Event]:
    """The events of these spans (one turn's), numbered from 1."""
    state = MappingState()
    events: list[Event] = []
    for record, kind, span_event in ordered_phases(records):
        if kind == EVENT:
            derived = map_span_event(state, record.at_start(), span_event or {})
        elif kind == END:
            derived = map_span(state, record, True)
        else:
            derived = map_span(state, record.at_start(), False)
        for event in derived:
            events.append(event.with_seq(len(events) + 1))
    return events


@dataclass(slots=True)
class TurnSpans:
    """A turn found among spans (a trace file): its id, thread and spans, in all runs."""

    turn_id: str
    thread_id: str
    trace_ids: list[str]
    spans: list[SpanRecord]
    roots: list[SpanRecord]

    @property
    def started_ns(self) -> int:
        return min(r.start_ns for r in self.roots)

    @property
    def last_root(self) -> SpanRecord:
        return max(self.roots, key=lambda r: r.start_ns)


def group_turns(records: Sequence[SpanRecord]) -> list[TurnSpans]:
    """Turns among ``records``, oldest first: a turn's spans are those of the traces
    whose root carries its ``relay.turn.id``. Spans of other traces belong to no turn."""
    turns: dict[str, TurnSpans] = {}
    trace_turn: dict[str, str] = {}
    for r in records:
        if c.TURN_ID in r.attributes:
            turn_id = str(r.attributes[c.TURN_ID])
            turn = turns.get(turn_id)
            if turn is None:
                turn = turns[turn_id] = TurnSpans(
                    turn_id, str(r.attributes.get(c.CONVERSATION_ID, "")), [], [], [])
            turn.roots.append(r)
            if r.trace_id not in trace_turn:
                turn.trace_ids.append(r.trace_id)
                trace_turn[r.trace_id] = turn_id
    for r in records:
        turn_id = trace_turn.get(r.trace_id)
        if turn_id is not None:
            turns[turn_id].spans.append(r)
    ordered = sorted(turns.values(), key=lambda t: t.started_ns)
    for turn in ordered:
        turn.trace_ids.sort(key=lambda tid: min(r.start_ns for r in turn.roots
                                                if r.trace_id == tid))
    return ordered


# -- pacing -----------------------------------------------------------------------------

def schedule(events: Sequence[Event], speed: float,
             max_gap_s: float | None = None) -> list[float]:
    """Seconds after the stream starts at which each event is due."""
    if not events or speed == 0:
        return [0.0] * len(events)
    due, at, previous = [], 0.0, events[0].ts
    for event in events:
        gap = max(0.0, (event.ts - previous) / 1000.0)
        if max_gap_s is not None:
            gap = min(gap, max_gap_s)
        at += gap / speed
        previous = event.ts
        due.append(at)
    return due


def replay_stream(events: Sequence[Event], encoder: SSEEncoder | NDJSONEncoder, *,
                  after: int = 0, speed: float = 1.0, heartbeat_s: float = 15.0,
                  send_timeout_s: float = 30.0, max_gap_s: float | None = None,
                  max_duration_s: float | None = None,
                  closing: asyncio.Event | None = None) -> EventStream:
    """The live stream's writer over replayed events, paced by their own ``ts``: same
    framing, heartbeats, send timeout and ``reconnect`` on shutdown."""
    reader = StaticReader(events, after, due=schedule(events, speed, max_gap_s))
    return EventStream(reader, encoder, stop_at=frozenset(), heartbeat_s=heartbeat_s,
                       send_timeout_s=send_timeout_s, max_duration_s=max_duration_s,
                       closing=closing, extra_headers=[(b"x-relay-source", b"spans")])


def parse_speed(raw: str | None) -> float:
    if raw is None or raw == "":
        return 1.0
    try:
        speed = float(raw)
    except ValueError:
        speed = math.nan
    if not math.isfinite(speed) or not 0 <= speed <= MAX_SPEED:
        raise ApiError(400, "invalid_speed", f"speed={raw!r}: use a number from 0 (all at "
                       f"once) to {MAX_SPEED:g}; 1 keeps the original pacing.")
    return speed


def _max_gap(raw: str | None) -> float | None:
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ApiError(400, "invalid_max_gap", f"max_gap_s={raw!r}: use a number of "
                       "seconds >= 0 (the longest pause the replay keeps).")
    return value


async def load_turn_events(relay: Relay, turn_id: str) -> list[Event]:
    """The turn's replayed events, or the API error that says why there are none."""
    store = relay.store
    if relay.runs.running(turn_id):
        raise ApiError(409, "turn_running",
                       "This turn is still running; its spans are stored as they end. "
                       "Follow it live without ?source=spans, or replay it once it has "
                       "finished.")
    processor = getattr(relay, "store_processor", None)
    if processor is not None:  # spans that ended a moment ago reach the store now
        await asyncio.to_thread(processor.force_flush, 5000)
    state, spans = await asyncio.to_thread(store.turn_spans, turn_id)
    if state == "stored":
        return replay_events(spans)
    retention = (f"RELAY_STORE_RETENTION_S={relay.settings.store_retention_s:g}, "
                 f"RELAY_STORE_MAX_TURNS={relay.settings.store_max_turns}")
    if state == "expired":
        raise ApiError(410, "turn_expired",
                       f"The spans of this turn are no longer stored: retention ({retention}) "
                       "dropped them. GET /turns/{turn_id} still has its result.")
    if await relay.turns.get(turn_id) is None:
        raise ApiError(404, "unknown_turn", "There is no such turn.")
    raise ApiError(410, "turn_expired",
                   f"The span store holds no spans of this turn: they expired ({retention}) "
                   "or were never stored. GET /turns/{turn_id} still has its result.")


async def replay_response(relay: Relay, request: Request, turn_id: str,
                          cursor: int, encoder: Any = None) -> Response:
    """``GET /turns/{turn_id}/events?source=spans[&speed=S][&max_gap_s=G]``."""
    source = request.query_params.get("source")
    if source != "spans":
        raise ApiError(400, "invalid_source",
                       f"source={source!r}: use source=spans (replay from stored spans) or "
                       "leave it out (the live stream).")
    speed = parse_speed(request.query_params.get("speed"))
    max_gap_s = _max_gap(request.query_params.get("max_gap_s"))
    events = await load_turn_events(relay, turn_id)
    if cursor > len(events):
        raise ApiError(400, "invalid_cursor", f"Event {cursor} does not exist in the replay "
                       f"of this turn (its last event is {len(events)}).")
    if events and cursor == len(events):  # the reader has it all: EventSource, stop
        return Response(status_code=204)
    from relay.http import stream_media  # the live stream's negotiation, exactly

    media = stream_media(request)
    if encoder is None:
        encoder = NDJSONEncoder() if media == NDJSON else SSEEncoder(relay.settings.retry_ms)
    return replay_stream(events, encoder, after=cursor, speed=speed,
                         heartbeat_s=relay.settings.heartbeat_s,
                         send_timeout_s=relay.settings.send_timeout_s, max_gap_s=max_gap_s,
                         max_duration_s=relay.settings.server_timeout_s,
                         closing=relay.closing)


# -- span-relay replay FILE -------------------------------------------------------------

def replay_file(path: str, *, turn: str | None = None, ndjson: bool = False,
                speed: float = 0.0, out: IO[str] | None = None,
                err: IO[str] | None = None) -> int:
    """Print the events of a trace file's turns as SSE frames (or NDJSON lines).

    Each turn is replayed on its own (``seq`` from 1), oldest first. Exit status 0, or 2
    with a message on stderr when the file cannot be read or holds no such turn.
    """
    from relay.imports import TraceFileError, parse_trace_file

    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    if not math.isfinite(speed) or speed < 0:
        print(f"span-relay replay: --speed {speed!r}: use a number >= 0", file=err)
        return 2
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        _, records = parse_trace_file(data)
    except OSError as exc:
        print(f"span-relay replay: {exc}", file=err)
        return 2
    except TraceFileError as exc:
        print(f"span-relay replay: {path}: {exc}", file=err)
        return 2
    turns = [t for t in group_turns(records) if turn is None or t.turn_id == turn]
    if not turns:
        which = f"turn {turn}" if turn else "a turn (no span carries relay.turn.id)"
        print(f"span-relay replay: {path} holds no {which}", file=err)
        return 2
    encoder: SSEEncoder | NDJSONEncoder = NDJSONEncoder() if ndjson else SSEEncoder(0)
    for found in turns:
        events = replay_events(found.spans)
        start = time.monotonic()
        for event, due in zip(events, schedule(events, speed), strict=True):
            delay = start + due - time.monotonic()
            if delay > 0:
                out.flush()
                time.sleep(delay)
            out.write(encoder.event(event).decode())
        out.flush()
    return 0
