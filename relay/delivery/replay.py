"""The paced replay of a stored turn: its events, sent by the live stream's writer at the
original pace scaled by ``speed`` (1 = as it happened, 0 = at once, 4 = four times
faster), with heartbeats through long gaps."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from relay.bus.static import StaticReader
from relay.delivery.streaming import Encoder, EventStream
from relay.events import Event

#: the largest speed factor the API accepts (0 means "no pacing at all")
MAX_SPEED = 1000.0


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


def replay_stream(events: Sequence[Event], encoder: Encoder, *,
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
