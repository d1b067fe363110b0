"""Stray parts of a run: spans of a turn another instance publishes, handed over to it.

Behind a balancer that does not route OTLP by trace id, one run's spans reach several
replicas. The first to publish one of its events owns the turn's log (one writer per
log); another replica that gets a part of that run (typically the run's root span, whose
end says how the run ended) publishes nothing of it (:mod:`relay.ingest.received_turns`,
``published_elsewhere``). Dropped there, the root's end would never reach the owner: its
record would stay ``running`` and readers of the turn, on any replica, would wait
forever for a terminal event.

So the stray part is handed over, spans and all, to the instance that publishes the turn
(:class:`StrayRuns`, over :class:`relay.bus.redis_handoffs.HandoffChannel`): that
instance feeds them to its own receiver as if they had come to it over OTLP. Its one
mapping then makes of the whole run exactly what a single receiver would (the terminal
event the root's end says, ``turn_completed`` / ``paused`` / ``error``, after the node
events the stray spans close), publishes it into the log it writes (one writer, seq
order, a span handed twice dropped as any retried span is) and ends the turn's record
through its own record writer: once, for every reader on every replica (they read that
one log). Spans rather than the events mapped from them, because the stray part's events
are numbered by nobody and may depend on what only the owner's mapping knows (the spans
it got, the runs it follows); nothing is made up that the spans do not say. Nothing of
this is on the span path: the handing is a task of its own per stray batch.

When no instance takes the part within :data:`relay.bus.redis_handoffs.WAIT_S` (the
owner died, or its listener is away) and the part holds the run's end, the instance
that got it ends the run itself, if the turn's record still says that run is
``running`` (its ``root_trace_id`` is this trace): it takes up the turn's shared log
(:meth:`relay.bus.redis.RedisBus.adopt`), publishes the terminal event its own mapping
made of the root's end after the log's last event, unless the log has one already, and
writes the record's end from it (:func:`relay.turns.foreign.end_changes`). When Redis
cannot be reached, it says so and still ends the record (PostgreSQL), from the root's
end: the turn's stream cannot get its end while Redis is away, which is logged.
Counted in the receiver's stats: ``handed_over`` (spans another instance took),
``ended_here`` (runs ended here because none did).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING

from relay.bus.base import AdoptingBus, BusUnavailable
from relay.events import Event
from relay.spans import SpanRecord
from relay.store.codec import from_row, to_row
from relay.turns.foreign import end_changes, may_change
from relay.turns.records import RUNNING

if TYPE_CHECKING:
    from relay.bus.base import Bus
    from relay.bus.redis_handoffs import HandoffChannel
    from relay.turns.records import TurnStore

log = logging.getLogger("relay.receiver")

#: handoffs on their way at once; past it, a stray part stays here (stored) and is logged
MAX_PENDING = 1000


def encode_spans(spans: Sequence[SpanRecord]) -> str:
    """Spans as one JSON text (each as the store's row: :func:`relay.store.codec.to_row`)."""
    return json.dumps([to_row(span) for span in spans])


def decode_spans(text: str) -> list[SpanRecord]:
    """What :func:`encode_spans` made."""
    return [from_row(row) for row in json.loads(text)]


class StrayRuns:
    """Hands stray parts of runs to the instance that publishes their turn (:meth:`hand`)
    and takes the parts other instances hand here (:meth:`heard`)."""

    def __init__(
        self,
        channel: HandoffChannel | None,
        bus: Bus,
        turns: TurnStore,
        users: Mapping[str, str],
        stats: MutableMapping[str, int],
        *,
        takes: Callable[[str, str], bool],
        take: Callable[[list[SpanRecord]], Awaitable[None]],
        wait_s: float | None = None,
    ) -> None:
        """``takes(turn_id, trace_id)``: whether this instance publishes that run (then a
        part handed here is its); ``take(spans)``: feed them to this instance's receiver;
        ``users``: the user each run's root names, by trace id; ``stats``: the receiver's
        counts; ``wait_s``: how long a handoff waits to be taken (None: the channel's
        own ``WAIT_S``; this module never imports the Redis channel, which needs the
        ``redis`` extra)."""
        self.channel = channel
        self.bus = bus
        self.turns = turns
        self.users = users
        self.stats = stats
        self.takes = takes
        self.take = take
        self.wait_s = wait_s
        self._tasks: set[asyncio.Task[None]] = set()
        #: set when the receiver stops: what is handed here then is no longer taken
        self.closed = False
        if channel is not None:
            channel.on_request = self.heard

    # -- the instance that got the stray part ----------------------------------------------

    def hand(
        self, turn_id: str, trace_id: str, spans: Sequence[SpanRecord], end: Event | None
    ) -> None:
        """Hand ``spans`` (of run ``trace_id`` of ``turn_id``, which another instance
        publishes) over, in the background; ``end``: the run's terminal event as this
        instance mapped it, when the part holds the root's end (ended here if nobody
        takes the part)."""
        if not spans:
            return
        if len(self._tasks) >= MAX_PENDING:
            log.error(
                "relay: too many span handoffs on their way: %d span(s) of trace %s (turn "
                "%s) stay here (stored), not handed to the instance that publishes the turn",
                len(spans),
                trace_id,
                turn_id,
            )
            return
        self._spawn(self._hand(turn_id, trace_id, list(spans), end))

    async def _hand(
        self, turn_id: str, trace_id: str, spans: list[SpanRecord], end: Event | None
    ) -> None:
        redis_away = False
        taken = False
        if self.channel is not None:
            try:
                body = encode_spans(spans)
                taken = (
                    await self.channel.hand(turn_id, trace_id, body)
                    if self.wait_s is None
                    else await self.channel.hand(turn_id, trace_id, body, self.wait_s)
                )
            except BusUnavailable as exc:
                redis_away = True
                log.error(
                    "relay: %d span(s) of trace %s (turn %s, published by another "
                    "instance) cannot be handed to it: %s",
                    len(spans),
                    trace_id,
                    turn_id,
                    exc,
                )
        if taken:
            self.stats["handed_over"] += len(spans)
            return
        if end is None:
            if not redis_away:
                log.warning(
                    "relay: no instance took %d span(s) of trace %s (turn %s): they stay "
                    "here (stored), not streamed",
                    len(spans),
                    trace_id,
                    turn_id,
                )
            return
        try:
            await self._end_here(turn_id, trace_id, end, redis_away)
        except Exception:  # a task: nobody above it to answer (the spans are stored)
            log.exception("relay: ending run %s of turn %s here failed", trace_id, turn_id)

    async def _end_here(self, turn_id: str, trace_id: str, end: Event, redis_away: bool) -> None:
        """No instance took the run's end: end the run here, if its record still says it
        runs (see the module)."""
        record = await self.turns.get(turn_id)
        if (
            record is None
            or record.status != RUNNING
            or record.root_trace_id != trace_id
            or not may_change(record, self.users.get(trace_id, ""))
        ):
            log.info(
                "relay: the end of run %s (turn %s) was taken by no instance, and the "
                "turn's record does not say that run is running: left as it is",
                trace_id,
                turn_id,
            )
            return
        stamped: Event | None = None
        bus = self.bus
        if not redis_away and bus.shared and isinstance(bus, AdoptingBus):
            try:
                last, terminal = await bus.adopt(turn_id)
                if terminal is None or terminal.trace_id != trace_id:
                    bus.open_turn(turn_id, last)
                    stamped = bus.publish(end)
                else:  # its end reached the log after all (the owner, late)
                    stamped = terminal
            except BusUnavailable as exc:
                redis_away = True
                log.error("relay: the shared log of turn %s cannot be ended: %s", turn_id, exc)
        changes = end_changes(stamped if stamped is not None else end)
        if stamped is None:  # not in the log: the record keeps the last seq it had
            del changes["last_seq"]
        await self.turns.update(turn_id, **changes)
        self.stats["ended_here"] += 1
        log.warning(
            "relay: the instance that published run %s of turn %s did not take its end "
            "(gone?): ended here, %s, from its root span%s",
            trace_id,
            turn_id,
            changes["status"],
            ": Redis is away, so the turn's stream does not get its end"
            if redis_away
            else f", its {end.type} event at seq {stamped.seq if stamped else '?'}",
        )

    # -- the instance that publishes the turn ---------------------------------------------

    def heard(self, turn_id: str, trace_id: str, body: str) -> bool:
        """Another instance hands spans of run ``trace_id`` of ``turn_id``: taken (fed to
        this instance's receiver in the background) when this instance publishes that
        run."""
        if self.closed or not self.takes(turn_id, trace_id):
            return False
        self._spawn(self._take(turn_id, trace_id, body))
        return True

    async def _take(self, turn_id: str, trace_id: str, body: str) -> None:
        try:
            await self.take(decode_spans(body))
        except Exception:  # a listener must outlive one part it could not take
            log.exception(
                "relay: taking spans of trace %s (turn %s) handed here", trace_id, turn_id
            )

    # -- tasks ----------------------------------------------------------------------------

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, timeout: float) -> None:
        """Wait (up to ``timeout``) for the handoffs on their way."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
