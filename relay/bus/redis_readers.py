"""The Redis bus's readers.

- :class:`RedisReader` reads the shared log: ``XRANGE`` from its cursor to catch up, then
  ``XREAD BLOCK`` from the last entry id it saw (never ``$``). A gap in the ``seq`` (the
  stream was trimmed, or Redis lost data) is :class:`CursorExpired`, a broken connection
  :class:`BusUnavailable`: the stream ends with an explicit frame.
- :class:`TieredReader` reads a turn running here from the local log; once the local
  log rests at a pause (the next run may start on any instance) it follows Redis from
  its cursor.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson

from relay.bus.base import BusLost, BusUnavailable, CursorExpired
from relay.bus.memory import MemoryBus, MemoryReader
from relay.bus.redis_health import MAX_BLOCK_S, REDIS_ERRORS, RedisHealth
from relay.events import Event

READ_BATCH = 256


class RedisReader:
    """A reader of the shared log: ``wait`` does the I/O and fills what ``take`` returns."""

    #: a live log's reader: more may always come
    exhausted = False

    def __init__(self, health: RedisHealth, key: str, turn_id: str, after: int) -> None:
        self.health = health
        self.key = key
        self.turn_id = turn_id
        self.cursor = after
        self._last_id = f"{after}-0"
        self._expected = after + 1
        self._buffer: deque[Event] = deque()
        self._error: Exception | None = None
        self._caught_up = False
        #: the reader lost the bus and has not said so yet (:class:`BusLost`, once)
        self._lost = False
        self._losses = health.losses

    def take(self, limit: int = 256) -> list[Event]:
        if self._lost:
            self._lost = False
            raise BusLost(self.turn_id, self.cursor)
        if not self._buffer and self._error is not None:
            raise self._error
        batch = [self._buffer.popleft() for _ in range(min(limit, len(self._buffer)))]
        if batch:
            self.cursor = batch[-1].seq
        return batch

    async def wait(self, timeout: float | None) -> bool:
        if self.health.losses != self._losses:  # Redis lost its data meanwhile
            self._losses = self.health.losses
            self._lost = True
        if self._buffer or self._error is not None or self._lost:
            return True
        if self.health.problem is not None and self.health.client is not None:
            # the bus is away: wait for the monitor to see it back (heartbeats go on),
            # then read on from the cursor (the owner writes its log again)
            await asyncio.sleep(min(0.5, timeout if timeout is not None else 0.5))
            return False
        client = self.health.client
        key = self.key
        entries: Any  # [(entry id, fields)]
        found: Any  # [[key, entries]]
        try:
            if client is None:
                raise BusUnavailable("the Redis bus is not started")
            if not self._caught_up:
                entries = await client.xrange(key, f"({self._last_id}", "+", count=READ_BATCH)
                self._caught_up = len(entries) < READ_BATCH
            else:
                block_s = MAX_BLOCK_S if timeout is None else min(max(timeout, 0.0), MAX_BLOCK_S)
                block_ms = int(block_s * 1000)
                found = await client.xread(
                    {key: self._last_id},
                    count=READ_BATCH,
                    block=block_ms if block_ms >= 1 else None,
                )
                entries = found[0][1] if found else []
            self._fill(entries)
        except CursorExpired as exc:
            self._error = exc
        except BusUnavailable as exc:
            self._error = exc
        except REDIS_ERRORS as exc:
            # a note, not an end: read again from the cursor once the bus is back
            self.health.down(exc)
            self._lost = True
            self._caught_up = False
        return bool(self._buffer) or self._error is not None or self._lost

    def _fill(self, entries: list[Any]) -> None:
        for entry_id, fields in entries:
            seq, event = decode(fields)
            self._last_id = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
            if seq < self._expected:
                continue
            if seq > self._expected:
                raise CursorExpired(self.turn_id, self._expected - 1, seq)
            self._buffer.append(event)
            self._expected = seq + 1

    def close(self) -> None:
        self._buffer.clear()


class TieredReader:
    """The local log while this instance runs the turn; the shared log once it rests.

    ``active_here``: does a run of the turn go on on this instance; ``shared``: a reader
    of the shared log from a cursor."""

    exhausted = False

    def __init__(
        self,
        turn_id: str,
        local: MemoryReader,
        local_logs: MemoryBus,
        active_here: Callable[[str], bool],
        shared: Callable[[int], RedisReader],
    ) -> None:
        self.turn_id = turn_id
        self._local: MemoryReader | None = local
        self._local_logs = local_logs
        self._active_here = active_here
        self._shared = shared
        self._remote: RedisReader | None = None
        self._cursor = local.cursor

    @property
    def cursor(self) -> int:
        if self._remote is not None:
            return self._remote.cursor
        return self._local.cursor if self._local is not None else self._cursor

    @cursor.setter
    def cursor(self, value: int) -> None:
        self._cursor = value

    def take(self, limit: int = 256) -> list[Event]:
        if self._remote is not None:
            return self._remote.take(limit)
        assert self._local is not None
        return self._local.take(limit)

    async def wait(self, timeout: float | None) -> bool:
        if self._remote is None:
            local = self._local
            assert local is not None
            logs = self._local_logs
            turn_id = self.turn_id
            held = logs.has_turn(turn_id)
            if held and logs.last_seq(turn_id) > local.cursor:
                return True
            if held and (self._active_here(turn_id) or logs.finished(turn_id)):
                return await local.wait(timeout)
            # the turn rests here (paused, or its log went): its next run may start on
            # any instance, so follow the shared log from here on
            self._remote = self._shared(local.cursor)
            local.close()
            self._local = None
        return await self._remote.wait(timeout)

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
            self._local = None
        if self._remote is not None:
            self._remote.close()


def decode(fields: Any) -> tuple[int, Event]:
    """An entry of a turn's stream: its seq and its event."""
    raw = fields.get(b"e", fields.get("e"))
    data = orjson.loads(raw)
    event = Event.from_dict(data)
    return event.seq, event
