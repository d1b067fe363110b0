"""A thread's events, turn after turn, as LangGraph's streaming protocol streams them
(``POST /threads/{thread_id}/stream/events``; the shapes and ids:
relay/agent_server/protocol_events.py).

:class:`ThreadEvents` follows one thread for one connection: its turns in the order they
started (the turn store's records, on every replica alike), each turn's log from the bus
(this replica's, or another's through the shared Redis bus) or, once the bus no longer
holds it (its retention, a restart), from the turn's stored spans; each turn re-encoded
from its first event, so that every replica makes the same events with the same ids,
and only those after the connection's cursor are sent.

- With a cursor (the ``seq`` of the last event the client has, from ``since`` or
  ``Last-Event-ID``) the stream starts right after it, in whichever turn it is: a
  reconnect gets what it missed and nothing twice, from any replica, after a restart.
- Without one it starts at the thread's latest turn (the run just started, or the last
  one), from that turn's first event: what a client opening the stream after
  ``run.start`` needs, never older turns.

Then it goes on live: the turn's log as it grows (a paused turn's resume continues the
same turn, as every resume of span-relay does), then the next turn as soon as the turn
feed (relay/turns/feed.py, every replica's turns over Redis) or a look at the store
shows one. A turn the relay did not run (received over OTLP) has no graph and makes no
events; it keeps its place. The stream sends a heartbeat comment when it has been quiet
for ``heartbeat_s`` and ends when the client leaves, the server closes, or the bus is
lost (the client reconnects with its cursor).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from relay.agent_server.protocol_events import (
    StreamRequest,
    TurnEncoder,
    event_seq,
    position_of,
    sse_all,
)
from relay.bus.base import Bus, BusLost, BusUnavailable, CursorExpired
from relay.errors import ApiError
from relay.events import MESSAGE_SAVED, Event
from relay.turns.feed import TurnFeed, Watcher
from relay.turns.records import PAUSED, RUNNING, TurnRecord, TurnStore, id_key
from relay.turns.recovery import terminal_event

#: the turns of a thread looked at, at most
MAX_TURNS = 10_000
#: how often a stream with nothing to send looks again (a resume, a turn's record)
POLL_S = 0.5
#: how often a waiting stream lists the thread's turns unasked (the turn feed tells it of
#: a new turn at once; this is the fallback for one the feed did not carry)
LOOK_S = 5.0
#: a relay event batch read at once
BATCH = 64
HEARTBEAT = b": heartbeat\n\n"

#: a turn's whole stored log re-derived from its spans (None: not available)
StoredLog = Callable[[str], Awaitable[list[Event] | None]]


class ThreadEvents:
    """The event streams of threads, over the relay's turn store, bus and turn feed.
    ``graphs``: a served graph's name -> its compiled graph; ``stored``: a turn's log from
    its stored spans."""

    def __init__(
        self,
        turns: TurnStore,
        bus: Bus,
        feed: TurnFeed,
        graphs: Mapping[str, Any],
        stored: StoredLog,
        heartbeat_s: float,
        closing: asyncio.Event,
    ) -> None:
        self.turns = turns
        self.bus = bus
        self.feed = feed
        self.graphs = graphs
        self.stored = stored
        self.heartbeat_s = heartbeat_s
        self.closing = closing

    async def ordered(self, thread_id: str) -> list[TurnRecord]:
        """The thread's turns in the order they started (a turn's ordinal is its place
        here, from 1)."""
        found = await self.turns.list(thread_id, MAX_TURNS)
        return sorted(found, key=lambda r: (r.started_at, r.turn_key))

    async def cursor_of(self, thread_id: str, since: int | None) -> int:
        """Where a connection starts (it gets the events after this ``seq``): its cursor,
        or, without one, just before the thread's latest turn. Fixed when the request is
        answered, before the stream's first byte. A cursor in a turn the thread does not
        have is a ``400 invalid_cursor``."""
        turns = await self.ordered(thread_id)
        if since is None:
            return event_seq(max(len(turns), 1), 0, 0) - 1
        if position_of(since)[0] > len(turns):
            raise ApiError(
                400,
                "invalid_cursor",
                f"Event {since} is not one of this thread's: it has {len(turns)} turns.",
            )
        return since

    async def stream(
        self, thread_id: str, request: StreamRequest, cursor: int
    ) -> AsyncIterator[bytes]:
        """The connection's SSE bytes from ``cursor`` on (see the module docstring)."""
        key = id_key(thread_id)
        with self.feed.watch(lambda record: record.thread_key == key) as watcher:
            ordinal = max(position_of(cursor)[0], 1)
            follow = _Follow(self, thread_id, request, cursor, watcher)
            while not self.closing.is_set():
                turns = await follow.turns()
                if ordinal > len(turns):
                    if not await follow.idle():
                        return
                    yield follow.take()
                    continue
                async for chunk in follow.turn(ordinal, turns[ordinal - 1]):
                    yield chunk
                if follow.ended:
                    return
                ordinal += 1


class _Follow:
    """One connection's walk through a thread: what it sends, when it last sent."""

    def __init__(
        self,
        events: ThreadEvents,
        thread_id: str,
        request: StreamRequest,
        cursor: int,
        watcher: Watcher,
    ) -> None:
        self.events = events
        self.thread_id = thread_id
        self.filter = request.filter
        self.cursor = cursor
        self.watcher = watcher
        self.sent_at = time.monotonic()
        self.pending = b""
        #: the stream is over (the bus was lost, the server closes)
        self.ended = False
        #: the thread's turns as last listed, and when; whether the feed told of a change
        self._turns: list[TurnRecord] = []
        self._looked_at = -LOOK_S
        self._heard = True

    async def turns(self) -> list[TurnRecord]:
        """The thread's turns in order, listed again when the turn feed told of a change
        of one of them, or :data:`LOOK_S` after the last listing."""
        if self._heard or time.monotonic() - self._looked_at >= LOOK_S:
            self._heard = False
            self._looked_at = time.monotonic()
            self._turns = await self.events.ordered(self.thread_id)
        return self._turns

    def take(self) -> bytes:
        out, self.pending = self.pending, b""
        return out

    async def idle(self, wait: bool = True) -> bool:
        """Wait a while for something to happen (a turn, an event: ``wait``, unless the
        caller waited already); a heartbeat in :attr:`pending` when the stream has been
        quiet long enough. False: stop."""
        if self.events.closing.is_set():
            return False
        if await self.watcher.next(POLL_S if wait else 0):
            self._heard = True
        if time.monotonic() - self.sent_at >= self.events.heartbeat_s:
            self.pending += HEARTBEAT
            self.sent_at = time.monotonic()
        return True

    def _send(self, made: list[dict[str, Any]]) -> bytes:
        fresh = [e for e in made if e["seq"] > self.cursor and self.filter.matches(e)]
        if made:
            self.cursor = max(self.cursor, made[-1]["seq"])
        if fresh:
            self.sent_at = time.monotonic()
        return sse_all(fresh)

    async def turn(self, ordinal: int, record: TurnRecord) -> AsyncIterator[bytes]:
        """The turn's events after the cursor, live until the turn ends, or pauses while
        a newer turn exists."""
        graph = self.events.graphs.get(record.graph)
        if graph is None:
            return  # not a run of a served graph (a turn received over OTLP): no events
        encoder = TurnEncoder(ordinal, record.turn_id, self.thread_id, record.graph, graph)
        bus = self.events.bus
        read = 0  # the relay seq encoded so far
        last: Event | None = None
        try:
            await bus.lookup(record.turn_id)
        except BusUnavailable:
            self.ended = True
            return
        if not bus.has_turn(record.turn_id):
            for event in await self._off_the_bus(record):
                yield self._send(await encoder.encode(event))
                read, last = event.seq, _latest(last, event)
            if last is not None and last.is_turn_terminal:
                return
        while not self.events.closing.is_set():
            if last is not None and last.is_turn_terminal:
                return
            if not bus.has_turn(record.turn_id):
                with contextlib.suppress(BusUnavailable):
                    await bus.lookup(record.turn_id)  # a paused turn resumed elsewhere
            waited = False
            if bus.has_turn(record.turn_id):
                reader = bus.reader(record.turn_id, read)
                try:
                    while not self.events.closing.is_set():
                        if batch := reader.take(BATCH):
                            for event in batch:
                                yield self._send(await encoder.encode(event))
                                read, last = event.seq, _latest(last, event)
                            if last is not None and last.is_turn_terminal:
                                return
                            continue
                        waited = True  # (a reader over I/O learns of events by waiting)
                        if not await reader.wait(POLL_S):
                            break  # quiet: look at the thread and the record, heartbeat
                except CursorExpired:
                    if read > 0:
                        self.ended = True
                        return
                    for event in await self._off_the_bus(record):  # the log's start is gone
                        yield self._send(await encoder.encode(event))
                        read, last = event.seq, _latest(last, event)
                    continue
                except (BusLost, BusUnavailable):
                    self.ended = True
                    return
                finally:
                    reader.close()
            if last is not None and last.is_run_terminal:
                if len(await self.turns()) > ordinal:
                    return  # paused, and a newer turn started: go on to it
            elif not bus.has_turn(record.turn_id):
                latest = await self.events.turns.get(record.turn_id) or record
                if latest.status not in (RUNNING, PAUSED):  # over, its log gone: its end
                    yield self._send(await encoder.encode(terminal_event(latest, read)))
                    return
            if not await self.idle(wait=not waited):
                return
            yield self.take()

    async def _off_the_bus(self, record: TurnRecord) -> list[Event]:
        """A turn's log the bus does not hold: from its stored spans, or its end alone."""
        stored = await self.events.stored(record.turn_id)
        if stored:
            return stored
        return [terminal_event(record, 0)] if record.status not in (RUNNING, PAUSED) else []


def _latest(last: Event | None, event: Event) -> Event | None:
    """The event that says where the turn is: the newest but a trailing
    ``message_saved`` (the answer's, after the turn's end)."""
    return last if event.type == MESSAGE_SAVED else event
