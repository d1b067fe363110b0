"""The Redis Streams bus (``RELAY_BUS=redis://host:port/db``): turn logs that every
instance can read, so a turn running on instance A streams (and resumes, with
``Last-Event-ID``) from instance B.

The owner instance keeps its in-process log as a write-through cache, so the hot path
and the owner's own readers stay as fast as with the memory bus:

- ``publish`` (sync, never blocks) appends to the local log, which stamps the ``seq``,
  and marks the turn unwritten. The writer task copies what Redis lacks from the local
  logs (there is no second queue to overflow), pipelining ``XADD`` in seq order, with an
  explicit entry id ``{seq}-0`` and the ``seq`` and the event JSON in the entry,
  ``MAXLEN ~`` bounding the stream, and one ``EXPIRE`` per stream and batch
  (``RELAY_BUS_RETENTION_S`` once the turn has finished, a day while it lives).
  Explicit ids make a retried write idempotent and make two writers of one ``seq``
  fail loudly instead of interleaving.
- A reader of a turn running here reads the local log; once the local log rests at a
  pause (the next run may start on any instance) it follows Redis from its cursor.
  A reader of a turn not known here is a :class:`RedisReader`: ``XRANGE`` from its cursor
  to catch up, then ``XREAD BLOCK`` from the last entry id it saw (never ``$``). A gap in
  the ``seq`` (the stream was trimmed, or Redis lost data) is :class:`CursorExpired`, a
  broken connection :class:`BusUnavailable`: the stream ends with an explicit frame.
- Redis unreachable: :meth:`unavailable` says why (readiness fails, requests that need
  the bus get 503); the writer writes what the local logs hold when Redis is back. The
  local logs are bounded as the memory bus's are (``RELAY_BUS_MAX_EVENTS`` per turn,
  ``RELAY_BUS_MAX_TURNS`` finished turns for ``RELAY_BUS_RETENTION_S``): events that left
  them before Redis came back are counted in ``lost`` and logged, and readers of the
  shared log meet the gap as :class:`CursorExpired`, never a silent one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, deque
from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from relay.bus.base import BusUnavailable, CursorExpired
from relay.bus.memory import MemoryBus, MemoryReader
from relay.events import Event

log = logging.getLogger("relay.bus.redis")

PREFIX = "relay:turn:"
#: TTL of a live turn's stream (refreshed by every write): a crashed owner's turn goes too
LIVE_TTL_S = 24 * 3600
WRITE_BATCH = 500
READ_BATCH = 256
#: the longest one XREAD BLOCK waits (a reader's wait is cut into these)
MAX_BLOCK_S = 5.0
#: how long a looked-up remote turn's facts are trusted
REMOTE_TTL_S = 2.0


class RedisBus(MemoryBus):
    def __init__(self, url: str, *, max_events_per_turn: int = 10_000,
                 max_finished_turns: int = 1_000, retention_s: float = 3600.0,
                 prefix: str = PREFIX, max_connections: int = 1000) -> None:
        super().__init__(max_events_per_turn=max_events_per_turn,
                         max_finished_turns=max_finished_turns, retention_s=retention_s)
        self.url = url
        self.prefix = prefix
        self.max_connections = max_connections
        self.client: aioredis.Redis | None = None
        #: turns with events not yet in Redis: turn id -> the last seq published here
        self._unwritten: OrderedDict[str, int] = OrderedDict()
        #: turn id -> the last seq in Redis, for the turns in ``_unwritten``
        self._written: dict[str, int] = {}
        self._wake: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._active: set[str] = set()  # turns with a run in progress here
        self._remote: OrderedDict[str, tuple[float, int, bool]] = OrderedDict()
        self._problem: str | None = "not connected to Redis yet"
        self._was_down = False
        self.lost = 0  # events that left the local log before they reached Redis
        self.written = 0
        self.backlog = 0  # events published here and not in Redis yet (an int: metrics
        # read it from their own thread)

    def key(self, turn_id: str) -> str:
        return self.prefix + turn_id

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self.client = aioredis.from_url(
            self.url, socket_connect_timeout=2.0, socket_timeout=MAX_BLOCK_S + 5.0,
            max_connections=self.max_connections, retry_on_timeout=False)
        self._wake = asyncio.Event()
        await self._check()
        if self._problem:
            log.error("relay: the Redis bus is unavailable at start: %s", self._problem)
        self._tasks = [asyncio.create_task(self._writer(), name="redis bus writer"),
                       asyncio.create_task(self._monitor(), name="redis bus monitor")]

    async def stop(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while self._unwritten and self._problem is None and time.monotonic() < deadline:
            assert self._wake is not None
            self._wake.set()
            await asyncio.sleep(0.02)
        if self._unwritten:
            log.error("relay: %d event(s) not written to Redis at shutdown", self.unwritten())
        for task in self._tasks:
            task.cancel()
        if self._tasks:  # bounded: a task stuck in a client call must not hold the stop
            _, stuck = await asyncio.wait(self._tasks, timeout=max(deadline - time.monotonic(),
                                                                   1.0))
            if stuck:
                log.error("relay: %d Redis bus task(s) did not stop in time", len(stuck))
        self._tasks = []
        if self.client is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2.0):
                    await self.client.aclose()
            self.client = None

    # -- health ---------------------------------------------------------------------------

    def unavailable(self) -> str | None:
        """Why the shared bus cannot be used now, or None."""
        return self._problem

    async def problems(self) -> list[str]:
        """For readiness: a live check, not only the last known state."""
        await self._check()
        problem = self._problem
        return [f"bus (Redis): {problem}"] if problem else []

    async def _check(self) -> None:
        client = self.client
        if client is None:
            self._problem = "not started"
            return
        try:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel
            # that lands as the ping completes, and the monitor would outlive stop()
            async with asyncio.timeout(2.0):
                await client.ping()
        except (RedisError, OSError, TimeoutError) as exc:
            self._down(exc)
        else:
            if self._problem is not None:
                if self._was_down:
                    log.warning("relay: the Redis bus is reachable again")
                self._problem = None
                self._was_down = False
                if self._unwritten and self._wake is not None:
                    self._wake.set()

    def _down(self, exc: BaseException) -> None:
        problem = f"Redis at {_safe_url(self.url)} is unreachable ({type(exc).__name__}: {exc})"
        if self._problem is None:
            log.error("relay: %s", problem)
        self._problem = problem
        self._was_down = True

    async def _monitor(self) -> None:
        while True:
            await asyncio.sleep(0.5 if self._problem else 2.0)
            await self._check()

    # -- writing (the Bus API is sync; the writer task does the I/O) -----------------------

    def open_turn(self, turn_id: str, last_seq: int = 0) -> None:
        log_ = self._logs.get(turn_id)
        if log_ is not None and log_.last_seq < last_seq:
            # another instance ran this turn since (a resume elsewhere): start afresh
            # after what it handed out, never reusing a seq
            self._forget_unwritten(turn_id)
            del self._logs[turn_id]
            self._finished.pop(turn_id, None)
        super().open_turn(turn_id, last_seq)
        self._active.add(turn_id)
        self._remote.pop(turn_id, None)

    def publish(self, event: Event) -> Event:
        stamped = super().publish(event)
        turn_id = stamped.turn_id
        if stamped.is_run_terminal:
            self._active.discard(turn_id)
        else:
            self._active.add(turn_id)
        # the writer copies from the local log: nothing to queue, nothing to overflow
        written = self._written.get(turn_id)
        if written is not None and written >= stamped.seq:
            # the turn's local log began again (it had expired): what the old one did
            # not hand to Redis is gone with it
            self._forget_unwritten(turn_id)
            written = None
        if written is None:
            self._written[turn_id] = stamped.seq - 1
        self._unwritten[turn_id] = stamped.seq
        self.backlog += 1
        if self._wake is not None:
            self._wake.set()
        return stamped

    def unwritten(self) -> int:
        """How many events published here are not in Redis yet."""
        return self.backlog

    def _forget_unwritten(self, turn_id: str) -> None:
        last = self._unwritten.pop(turn_id, None)
        written = self._written.pop(turn_id, None)
        if last is not None and written is not None and last > written:
            self.lost += last - written
            self.backlog -= last - written
            log.error("relay: events %d..%d of turn %s left this instance before they "
                      "reached Redis", written + 1, last, turn_id)

    def _next_batch(self) -> list[Event]:
        """Up to WRITE_BATCH events not yet in Redis, each turn's in seq order, from the
        local logs. Events a log no longer holds (trimmed, or the log expired while Redis
        was down) are counted in ``lost``: readers elsewhere meet the gap, loudly."""
        batch: list[Event] = []
        for turn_id in list(self._unwritten):
            written = self._written[turn_id]
            log_ = self._logs.get(turn_id)
            if log_ is None:
                self._forget_unwritten(turn_id)
                continue
            if written < log_.base:
                self.lost += log_.base - written
                self.backlog -= log_.base - written
                log.error("relay: events %d..%d of turn %s were trimmed from the local log "
                          "before they reached Redis", written + 1, log_.base, turn_id)
                written = self._written[turn_id] = log_.base
            start = written - log_.base
            events = log_.events[start:start + WRITE_BATCH - len(batch)]
            if not events:  # nothing of this log is unwritten: never spin on it
                self._forget_unwritten(turn_id)
                continue
            batch += events
            if len(batch) >= WRITE_BATCH:
                break
        return batch

    def _mark_written(self, batch: list[Event]) -> None:
        """The batch is in Redis. A turn forgotten meanwhile (its log replaced by a run on
        another instance while the batch was in flight) has been accounted for already."""
        for event in batch:
            written = self._written.get(event.turn_id)
            if written is not None and event.seq > written:
                self._written[event.turn_id] = event.seq
                self.backlog -= 1
        for turn_id in {event.turn_id for event in batch}:
            last = self._unwritten.get(turn_id)
            if last is not None and last <= self._written[turn_id]:
                del self._unwritten[turn_id]
                del self._written[turn_id]

    async def _writer(self) -> None:
        assert self._wake is not None
        backoff = 0.1
        while True:
            if not self._unwritten:
                self._wake.clear()
                await self._wake.wait()
                continue
            if self._problem is not None and self._tasks:
                # wait for the monitor to see Redis back (or retry after a while)
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff):
                        await self._wake.wait()
                backoff = min(backoff * 2, 2.0)
                if self._problem is not None:
                    await self._check()
                    if self._problem is not None:
                        continue
            batch = self._next_batch()
            if not batch:
                continue
            try:
                await self._write(batch)
            except (RedisError, OSError, TimeoutError) as exc:
                self._down(exc)
                continue
            except Exception:  # never let the one writer die: the events stay unwritten
                log.exception("relay: writing %d event(s) to Redis failed", len(batch))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            backoff = 0.1
            self._mark_written(batch)
            self.written += len(batch)

    async def _write(self, batch: list[Event]) -> None:
        assert self.client is not None
        pipe = self.client.pipeline(transaction=False)
        ttl: dict[str, int] = {}  # one EXPIRE per stream, set by its last event here
        for event in batch:
            key = self.key(event.turn_id)
            pipe.xadd(key, {"seq": event.seq, "e": event.to_json()}, id=f"{event.seq}-0",
                      maxlen=self.max_events_per_turn, approximate=True)
            ttl[key] = int(self.retention_s) if event.is_turn_terminal else LIVE_TTL_S
        for key, seconds in ttl.items():
            pipe.expire(key, seconds)
        results = await pipe.execute(raise_on_error=False)
        for event, result in zip(batch, results[:len(batch)], strict=True):
            if isinstance(result, ResponseError):
                if "equal or smaller" in str(result):
                    continue  # written before (a retried batch): idempotent
                self.lost += 1
                log.error("relay: Redis refused event %s of turn %s: %s", event.seq,
                          event.turn_id, result)
            elif isinstance(result, Exception):
                raise result

    # -- reading --------------------------------------------------------------------------

    def active_here(self, turn_id: str) -> bool:
        return turn_id in self._active

    def has_turn(self, turn_id: str) -> bool:
        return super().has_turn(turn_id) or self._remote_facts(turn_id) is not None

    def last_seq(self, turn_id: str) -> int:
        if super().has_turn(turn_id):
            return super().last_seq(turn_id)
        facts = self._remote_facts(turn_id)
        return facts[0] if facts else 0

    def finished(self, turn_id: str) -> bool:
        if super().has_turn(turn_id):
            return super().finished(turn_id)
        facts = self._remote_facts(turn_id)
        return bool(facts and facts[1] is not None)

    def terminal_seq(self, turn_id: str) -> int | None:
        if super().has_turn(turn_id):
            return super().terminal_seq(turn_id)
        facts = self._remote_facts(turn_id)
        return facts[1] if facts else None

    def _remote_facts(self, turn_id: str) -> tuple[int, int | None] | None:
        """(last seq, seq of the turn-terminal event or None) of a turn held elsewhere."""
        entry = self._remote.get(turn_id)
        if entry is None or time.monotonic() - entry[0] > REMOTE_TTL_S:
            return None
        return entry[1], entry[2]

    async def lookup(self, turn_id: str) -> None:
        """A turn this instance does not hold: its last seq and whether it finished."""
        if super().has_turn(turn_id):
            return
        if self.client is None:
            raise BusUnavailable("the Redis bus is not started")
        try:
            # the last two: the terminal event may be followed by the answer's message_saved
            entries = await self.client.xrevrange(self.key(turn_id), "+", "-", count=2)
        except (RedisError, OSError, TimeoutError) as exc:
            self._down(exc)
            raise BusUnavailable(f"the shared event log is unavailable: {self._problem}") \
                from None
        if not entries:
            self._remote.pop(turn_id, None)
            return
        decoded = [_decode(fields) for _, fields in entries]
        seq = decoded[0][0]
        terminal = next((s for s, e in decoded if e.is_turn_terminal), None)
        self._remote[turn_id] = (time.monotonic(), seq, terminal)
        self._remote.move_to_end(turn_id)
        while len(self._remote) > 10_000:
            self._remote.popitem(last=False)

    def reader(self, turn_id: str, after: int = 0) -> Any:
        log_ = self._logs.get(turn_id)
        if log_ is not None and after >= log_.base:
            return TieredReader(self, turn_id, super().reader(turn_id, after))
        return RedisReader(self, turn_id, after)


class RedisReader:
    """A reader of the shared log: ``wait`` does the I/O and fills what ``take`` returns."""

    def __init__(self, bus: RedisBus, turn_id: str, after: int) -> None:
        self.bus = bus
        self.turn_id = turn_id
        self.cursor = after
        self._last_id = f"{after}-0"
        self._expected = after + 1
        self._buffer: deque[Event] = deque()
        self._error: Exception | None = None
        self._caught_up = False

    def take(self, limit: int = 256) -> list[Event]:
        if not self._buffer and self._error is not None:
            raise self._error
        batch = [self._buffer.popleft() for _ in range(min(limit, len(self._buffer)))]
        if batch:
            self.cursor = batch[-1].seq
        return batch

    async def wait(self, timeout: float | None) -> bool:
        if self._buffer or self._error is not None:
            return True
        client = self.bus.client
        key = self.bus.key(self.turn_id)
        try:
            if client is None:
                raise BusUnavailable("the Redis bus is not started")
            if not self._caught_up:
                entries = await client.xrange(key, f"({self._last_id}", "+", count=READ_BATCH)
                self._caught_up = len(entries) < READ_BATCH
            else:
                block_s = MAX_BLOCK_S if timeout is None else min(max(timeout, 0.0),
                                                                  MAX_BLOCK_S)
                block_ms = int(block_s * 1000)
                found = await client.xread({key: self._last_id}, count=READ_BATCH,
                                           block=block_ms if block_ms >= 1 else None)
                entries = found[0][1] if found else []
            self._fill(entries)
        except CursorExpired as exc:
            self._error = exc
        except BusUnavailable as exc:
            self._error = exc
        except (RedisError, OSError, TimeoutError) as exc:
            self.bus._down(exc)
            self._error = BusUnavailable(
                f"the shared event log became unavailable ({type(exc).__name__}); "
                f"reconnect with Last-Event-ID: {self._expected - 1} when the relay is ready")
        return bool(self._buffer) or self._error is not None

    def _fill(self, entries: list[Any]) -> None:
        for entry_id, fields in entries:
            seq, event = _decode(fields)
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
    """The local log while this instance runs the turn; the shared log once it rests."""

    def __init__(self, bus: RedisBus, turn_id: str, local: MemoryReader) -> None:
        self.bus = bus
        self.turn_id = turn_id
        self._local: MemoryReader | None = local
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
            bus = self.bus
            local_log = bus._logs.get(self.turn_id)
            if local_log is not None and local_log.last_seq > local.cursor:
                return True
            if local_log is not None and (bus.active_here(self.turn_id)
                                          or local_log.finished_at is not None):
                return await local.wait(timeout)
            # the turn rests here (paused, or its log went): its next run may start on
            # any instance, so follow the shared log from here on
            self._remote = RedisReader(bus, self.turn_id, local.cursor)
            local.close()
            self._local = None
        return await self._remote.wait(timeout)

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
            self._local = None
        if self._remote is not None:
            self._remote.close()


def _decode(fields: dict[Any, Any]) -> tuple[int, Event]:
    raw = fields.get(b"e", fields.get("e"))
    data = orjson.loads(raw)
    event = Event.from_dict(data)
    return event.seq, event


def _safe_url(url: str) -> str:
    """The URL without a password."""
    if "@" in url:
        scheme, _, rest = url.partition("://")
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url
