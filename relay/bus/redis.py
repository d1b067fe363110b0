"""The Redis Streams bus (``RELAY_BUS=redis://host:port/db``): turn logs that every
instance can read, so a turn running on instance A streams (and resumes, with
``Last-Event-ID``) from instance B.

A :class:`RedisBus` is made of parts, one job each:

- the local log, a :class:`~relay.bus.memory.MemoryBus` the bus holds: the owner
  instance's write-through cache, so the hot path and the owner's own readers stay as
  fast as with the memory bus. ``publish`` (sync, never blocks) appends to it, which
  stamps the ``seq``;
- the writer (:mod:`relay.bus.redis_writer`): one task that copies what Redis lacks from
  the local log;
- the readers (:mod:`relay.bus.redis_readers`): the local log while a turn runs here,
  Redis otherwise;
- the connection and its health (:mod:`relay.bus.redis_health`). Redis unreachable:
  :meth:`RedisBus.unavailable` says why (readiness fails, requests that need the bus get
  503); the writer writes what the local logs hold when Redis is back. The local logs are
  bounded as the memory bus's are (``RELAY_BUS_MAX_EVENTS`` per turn,
  ``RELAY_BUS_MAX_TURNS`` finished turns for ``RELAY_BUS_RETENTION_S``): events that left
  them before Redis came back are counted in ``lost`` and logged, and readers of the
  shared log meet the gap as :class:`CursorExpired`, never a silent one.

This module holds the bus itself: what runs here, and what is known of turns that run
elsewhere (:meth:`RedisBus.lookup`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any

from relay.bus.base import BusUnavailable, CursorExpired, LogReader, UnknownTurn
from relay.bus.memory import MemoryBus
from relay.bus.redis_health import REDIS_ERRORS, RedisHealth
from relay.bus.redis_readers import RedisReader, TieredReader, decode
from relay.bus.redis_writer import LIVE_TTL_S, RedisWriter
from relay.events import Event

#: entries read from the shared log per round trip by :meth:`RedisBus.history`
HISTORY_BATCH = 500

log = logging.getLogger("relay.bus.redis")

PREFIX = "relay:turn:"
#: how long a looked-up remote turn's facts are trusted
REMOTE_TTL_S = 2.0


class RedisBus:
    shared = True

    def __init__(
        self,
        url: str,
        *,
        max_events_per_turn: int = 10_000,
        max_finished_turns: int = 1_000,
        retention_s: float = 3600.0,
        prefix: str = PREFIX,
        max_connections: int = 1000,
    ) -> None:
        self.url = url
        self.prefix = prefix
        #: the local log: this instance's turns, a write-through cache of Redis
        self.local = MemoryBus(
            max_events_per_turn=max_events_per_turn,
            max_finished_turns=max_finished_turns,
            retention_s=retention_s,
        )
        self.health = RedisHealth(
            url, max_connections=max_connections, epoch_key=prefix.rstrip(":") + "-epoch"
        )
        self.writer = RedisWriter(
            self.local,
            self.health,
            self.key,
            max_events_per_turn=max_events_per_turn,
            retention_s=retention_s,
        )
        self.health.on_back = self.writer.poke
        # Redis lost its data: write again what the local logs hold (the turns that run
        # here, and those that ended here lately), so that readers catch up with no gap
        self.health.on_lost = lambda: self.writer.rewrite(self.local.turn_ids())
        self._tasks: list[asyncio.Task[None]] = []
        self._active: set[str] = set()  # turns with a run in progress here
        self._remote: OrderedDict[str, tuple[float, int, int | None]] = OrderedDict()
        #: turns another instance took over from this one (:meth:`disown`): what their
        #: run still publishes here is dropped, until a run of theirs starts here again
        self._disowned: set[str] = set()

    def key(self, turn_id: str) -> str:
        return self.prefix + turn_id

    @property
    def client(self) -> Any:
        """The Redis client (None before start and after stop)."""
        return self.health.client

    @client.setter
    def client(self, client: Any) -> None:
        self.health.client = client

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self.health.connect()
        self.writer.arm()
        await self.health.check()
        if self.health.problem:
            log.error("relay: the Redis bus is unavailable at start: %s", self.health.problem)
        self._tasks = [
            asyncio.create_task(self.writer.run(), name="redis bus writer"),
            asyncio.create_task(self.health.monitor(), name="redis bus monitor"),
        ]
        self.writer.monitored = True

    async def stop(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        await self.writer.drain(deadline)
        if self.writer.unwritten_turns:
            log.error("relay: %d event(s) not written to Redis at shutdown", self.unwritten())
        for task in self._tasks:
            task.cancel()
        if self._tasks:  # bounded: a task stuck in a client call must not hold the stop
            _, stuck = await asyncio.wait(
                self._tasks, timeout=max(deadline - time.monotonic(), 1.0)
            )
            if stuck:
                log.error("relay: %d Redis bus task(s) did not stop in time", len(stuck))
        self._tasks = []
        self.writer.monitored = False
        await self.health.close()

    # -- health ---------------------------------------------------------------------------

    def unavailable(self) -> str | None:
        """Why the shared bus cannot be used now, or None."""
        return self.health.problem

    async def problems(self) -> list[str]:
        """For readiness: a live check, not only the last known state."""
        await self.health.check()
        problem = self.health.problem
        return [f"bus (Redis): {problem}"] if problem else []

    @property
    def backlog(self) -> int:
        """Events published here and not in Redis yet."""
        return self.writer.backlog

    @property
    def lost(self) -> int:
        """Events that left the local log before they reached Redis."""
        return self.writer.lost

    @property
    def losses(self) -> int:
        """Times Redis was found to have lost its data (relay/bus/redis_health.py)."""
        return self.health.losses

    @property
    def written(self) -> int:
        return self.writer.written

    def unwritten(self) -> int:
        """How many events published here are not in Redis yet."""
        return self.writer.backlog

    # -- writing (the Bus API is sync; the writer task does the I/O) -----------------------

    def open_turn(self, turn_id: str, last_seq: int = 0) -> None:
        local = self.local
        if local.has_turn(turn_id) and local.last_seq(turn_id) < last_seq:
            # another instance ran this turn since (a resume elsewhere): start afresh
            # after what it handed out, never reusing a seq
            self.writer.forget(turn_id)
            local.drop(turn_id)
        local.open_turn(turn_id, last_seq)
        self._disowned.discard(turn_id)
        self._active.add(turn_id)
        self._remote.pop(turn_id, None)

    def publish(self, event: Event) -> Event:
        if self._disowned and event.turn_id in self._disowned:
            return event  # taken over: its log is another instance's now
        stamped = self.local.publish(event)
        if stamped.is_run_terminal:
            self._active.discard(stamped.turn_id)
        else:
            self._active.add(stamped.turn_id)
        # the writer copies from the local log: nothing to queue, nothing to overflow
        self.writer.published(stamped)
        return stamped

    # -- reading --------------------------------------------------------------------------

    def active_here(self, turn_id: str) -> bool:
        return turn_id in self._active

    def has_turn(self, turn_id: str) -> bool:
        return self.local.has_turn(turn_id) or self._remote_facts(turn_id) is not None

    def last_seq(self, turn_id: str) -> int:
        if self.local.has_turn(turn_id):
            return self.local.last_seq(turn_id)
        facts = self._remote_facts(turn_id)
        return facts[0] if facts else 0

    def finished(self, turn_id: str) -> bool:
        if self.local.has_turn(turn_id):
            return self.local.finished(turn_id)
        facts = self._remote_facts(turn_id)
        return bool(facts and facts[1] is not None)

    def terminal_seq(self, turn_id: str) -> int | None:
        if self.local.has_turn(turn_id):
            return self.local.terminal_seq(turn_id)
        facts = self._remote_facts(turn_id)
        return facts[1] if facts else None

    def reader_count(self, turn_id: str) -> int:
        return self.local.reader_count(turn_id)

    def turn_count(self) -> int:
        return self.local.turn_count()

    def _remote_facts(self, turn_id: str) -> tuple[int, int | None] | None:
        """(last seq, seq of the turn-terminal event or None) of a turn held elsewhere."""
        entry = self._remote.get(turn_id)
        if entry is None or time.monotonic() - entry[0] > REMOTE_TTL_S:
            return None
        return entry[1], entry[2]

    async def lookup(self, turn_id: str) -> None:
        """A turn this instance does not hold: its last seq and whether it finished."""
        if self.local.has_turn(turn_id):
            return
        decoded = await self._tail(turn_id)
        if not decoded:
            self._remote.pop(turn_id, None)
            return
        seq = decoded[0][0]
        terminal = next((s for s, e in decoded if e.is_turn_terminal), None)
        self._remote[turn_id] = (time.monotonic(), seq, terminal)
        self._remote.move_to_end(turn_id)
        while len(self._remote) > 10_000:
            self._remote.popitem(last=False)

    def disown(self, turn_id: str) -> None:
        """Another instance took the turn over while this one hung (relay/turns/leases.py):
        this instance writes nothing more to its shared log (the end its run is about to
        publish would follow the claimer's). What it had not written yet is dropped."""
        self._disowned.add(turn_id)
        self.writer.forget(turn_id)
        self.local.drop(turn_id)
        self._active.discard(turn_id)

    async def adopt(self, turn_id: str) -> tuple[int, Event | None]:
        """Take up the log of a turn whose owner is gone (relay/turns/leases.py): what
        this instance holds of it is stale, so it is dropped, and the shared log says
        where the turn stands: (its last seq, its last turn-terminal event or None).
        Raises :class:`BusUnavailable` when Redis cannot be reached."""
        self.writer.forget(turn_id)
        self.local.drop(turn_id)
        self._active.discard(turn_id)
        self._remote.pop(turn_id, None)
        decoded = await self._tail(turn_id)
        terminal = next((e for _, e in decoded if e.is_turn_terminal), None)
        return (decoded[0][0] if decoded else 0), terminal

    async def history(self, turn_id: str, after: int) -> list[Event] | None:
        """The turn's events after seq ``after``, in order, as the shared log holds them
        (relay/turns/recovering.py judges a cut run by them); None when the log does not
        hold them all: gone (Redis lost it, or its TTL ran out), or trimmed past
        ``after``. BusUnavailable when Redis cannot be reached."""
        client = self.health.client
        if client is None:
            raise BusUnavailable("the Redis bus is not started")
        events: list[Event] = []
        start = f"({after}-0"
        try:
            while True:
                entries = (
                    await client.xrange(self.key(turn_id), start, "+", count=HISTORY_BATCH) or []
                )
                events += [decode(fields)[1] for _, fields in entries]
                if len(entries) < HISTORY_BATCH:
                    break
                start = f"({events[-1].seq}-0"
        except REDIS_ERRORS as exc:
            self.health.down(exc)
            raise BusUnavailable(
                f"the shared event log is unavailable: {self.health.problem}"
            ) from None
        if not events or events[0].seq != after + 1:
            return None  # nothing after it, or a gap: the log is not whole
        return events

    async def _tail(self, turn_id: str) -> list[tuple[int, Event]]:
        """The last two events of the turn's shared log, newest first, as ``(seq,
        event)`` (two: the terminal event may be followed by the answer's
        ``message_saved``); [] when Redis holds none. BusUnavailable when Redis cannot be
        reached."""
        client = self.health.client
        if client is None:
            raise BusUnavailable("the Redis bus is not started")
        try:
            entries = await client.xrevrange(self.key(turn_id), "+", "-", count=2)
        except REDIS_ERRORS as exc:
            self.health.down(exc)
            raise BusUnavailable(
                f"the shared event log is unavailable: {self.health.problem}"
            ) from None
        return [decode(fields) for _, fields in entries or ()]

    def reader(self, turn_id: str, after: int = 0) -> LogReader:
        try:  # the local log, while it holds the cursor
            local = self.local.reader(turn_id, after)
        except (UnknownTurn, CursorExpired):
            return self._shared_reader(turn_id, after)
        return TieredReader(
            turn_id,
            local,
            self.local,
            self.active_here,
            lambda cursor: self._shared_reader(turn_id, cursor),
        )

    def _shared_reader(self, turn_id: str, after: int) -> RedisReader:
        return RedisReader(self.health, self.key(turn_id), turn_id, after)

    # -- the writer's bookkeeping, as the tests drive it ---------------------------------

    async def _write(self, batch: list[Event]) -> None:
        await self.writer.write(batch)

    def _next_batch(self) -> list[Event]:
        return self.writer.next_batch()

    def _mark_written(self, batch: list[Event]) -> None:
        self.writer.mark_written(batch)

    async def _check(self) -> None:
        await self.health.check()

    @property
    def _written(self) -> dict[str, int]:
        return self.writer.written_seq

    @property
    def _unwritten(self) -> OrderedDict[str, int]:
        return self.writer.unwritten_turns

    @property
    def _logs(self) -> dict[str, Any]:
        return self.local._logs


__all__ = ["LIVE_TTL_S", "PREFIX", "REMOTE_TTL_S", "RedisBus"]
