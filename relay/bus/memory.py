"""The in-process bus (the default): per-turn logs in memory, bounded in every direction.

- a log holds at most ``max_events_per_turn`` events; past that the oldest go, and a
  reader whose cursor points before them gets :class:`CursorExpired`, never a silent gap;
- finished logs (a turn-terminal event seen) are kept for ``retention_s`` seconds and at
  most ``max_finished_turns`` of them; running turns are never dropped;
- readers share the log: a slow reader costs a cursor, not a queue.

Everything here runs on the event loop thread; nothing locks.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from relay.bus.base import CursorExpired, UnknownTurn
from relay.events import TURN_TERMINAL, Event


class _TurnLog:
    __slots__ = (
        "base",
        "events",
        "finished_at",
        "readers",
        "terminal_seq",
        "turn_id",
        "waiters",
        "watchers",
    )

    def __init__(self, turn_id: str, last_seq: int) -> None:
        self.turn_id = turn_id
        self.base = last_seq  # seq of the event before events[0]
        self.events: list[Event] = []
        self.waiters: set[asyncio.Future[bool]] = set()
        #: streams to call back once (MemoryReader.watch), by reader
        self.watchers: dict[MemoryReader, Callable[[], None]] = {}
        self.finished_at: float | None = None
        self.terminal_seq: int | None = None  # the turn-terminal event's seq, once there
        self.readers = 0

    @property
    def last_seq(self) -> int:
        return self.base + len(self.events)

    def wake(self) -> None:
        """Wake every reader waiting for this log, once: a woken reader is disarmed, so
        the rest of a burst (more events before it runs) costs nothing here, and it
        takes them all at its next ``take``."""
        if self.waiters:
            for waiter in self.waiters:
                if not waiter.done():
                    waiter.set_result(True)
            self.waiters.clear()
        if self.watchers:
            watchers = self.watchers
            self.watchers = {}
            for wake in watchers.values():
                wake()


def _time_out(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


class MemoryReader:
    #: a live log's reader: more may always come
    exhausted = False

    def __init__(self, log: _TurnLog, after: int, on_close: Callable[[], None]) -> None:
        self._log = log
        self.cursor = after
        self._closed = False
        self._on_close = on_close
        self._waiter: asyncio.Future[bool] | None = None  # its last wait(None)
        log.readers += 1

    def take(self, limit: int = 256) -> list[Event]:
        log = self._log
        if self.cursor < log.base:
            raise CursorExpired(log.turn_id, self.cursor, log.base + 1)
        start = self.cursor - log.base
        batch = log.events[start : start + limit]
        if batch:
            self.cursor = batch[-1].seq
        return batch

    def wait(self, timeout: float | None) -> Awaitable[bool]:
        """Without a timeout (``Relay.subscribe``'s wait), the future itself that publish
        resolves: no coroutine around it. A cancelled one stays in the log's waiters until
        the next publish, this reader's next wait or its close."""
        log = self._log
        if timeout is not None or log.base + len(log.events) > self.cursor:
            return self._wait(timeout)
        waiters = log.waiters
        if self._waiter is not None:
            waiters.discard(self._waiter)
        waiter = self._waiter = asyncio.Future(loop=asyncio.get_running_loop())
        waiters.add(waiter)
        return waiter

    async def _wait(self, timeout: float | None) -> bool:
        log = self._log
        if log.last_seq > self.cursor:
            return True
        # One future, resolved by publish (True) or by the timer (False): the reader's task
        # wakes one loop iteration after the publish, and nothing else is allocated
        # (asyncio.wait would add a future, callbacks and sets, and an iteration).
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        log.waiters.add(waiter)
        timer = loop.call_later(timeout, _time_out, waiter) if timeout is not None else None
        try:
            return await waiter
        finally:
            log.waiters.discard(waiter)
            if timer is not None:
                timer.cancel()

    def watch(self, wake: Callable[[], None]) -> bool:
        """Call ``wake()`` once when an event after the cursor is published (the push
        half of :class:`relay.bus.base.PushReader`); False when one is already there, or
        the cursor has expired (``take`` says so)."""
        log = self._log
        if log.last_seq > self.cursor or self.cursor < log.base:
            return False
        log.watchers[self] = wake
        return True

    def unwatch(self) -> None:
        self._log.watchers.pop(self, None)

    def close(self) -> None:
        self.unwatch()
        if self._waiter is not None:
            self._log.waiters.discard(self._waiter)
        if not self._closed:
            self._closed = True
            self._log.readers -= 1
            if self._log.readers == 0 and self._log.finished_at is not None:
                self._on_close()


class MemoryBus:
    #: the logs live in this process only: no writer backlog, nothing lost on the way
    shared = False
    backlog = 0
    lost = 0
    losses = 0

    def __init__(
        self,
        max_events_per_turn: int = 10_000,
        max_finished_turns: int = 1_000,
        retention_s: float = 3600.0,
    ) -> None:
        self.max_events_per_turn = max_events_per_turn
        self.max_finished_turns = max_finished_turns
        self.retention_s = retention_s
        self._logs: dict[str, _TurnLog] = {}
        self._finished: OrderedDict[str, float] = OrderedDict()

    # -- writing ----------------------------------------------------------------------

    def open_turn(self, turn_id: str, last_seq: int = 0) -> None:
        log = self._logs.get(turn_id)
        if log is None:
            self._logs[turn_id] = _TurnLog(turn_id, last_seq)
            self._expire()
        elif log.finished_at is not None:
            # a finished turn runs again (a resume after an error is refused upstream,
            # but a paused turn is not finished): keep its log, make it live again
            log.finished_at = None
            log.terminal_seq = None
            self._finished.pop(turn_id, None)

    def publish(self, event: Event) -> Event:
        log = self._logs.get(event.turn_id)
        if log is None:
            log = self._logs[event.turn_id] = _TurnLog(event.turn_id, 0)
        events = log.events
        seq = log.base + len(events) + 1
        if event.seq == 0 and event._json is None and event._frame is None:
            event.seq = seq  # fresh from the mapping: numbered in place (Event.stamped)
        else:
            event = event.with_seq(seq)
        events.append(event)
        if len(events) > self.max_events_per_turn:
            drop = len(events) - self.max_events_per_turn
            del events[:drop]
            log.base += drop
        if event.type in TURN_TERMINAL:
            log.terminal_seq = seq
            log.finished_at = time.monotonic()
            self._finished[log.turn_id] = log.finished_at
            self._finished.move_to_end(log.turn_id)
            if len(self._finished) > self.max_finished_turns:
                self._expire()
        if log.waiters or log.watchers:
            log.wake()
        return event

    # -- reading ----------------------------------------------------------------------

    def turn_ids(self) -> list[str]:
        """The turns whose logs this bus holds."""
        return list(self._logs)

    def has_turn(self, turn_id: str) -> bool:
        return turn_id in self._logs

    def last_seq(self, turn_id: str) -> int:
        log = self._logs.get(turn_id)
        return log.last_seq if log else 0

    def terminal_seq(self, turn_id: str) -> int | None:
        """The seq of the turn's terminal event, once it has one (a ``message_saved`` may
        follow it)."""
        log = self._logs.get(turn_id)
        return log.terminal_seq if log is not None and log.finished_at is not None else None

    def finished(self, turn_id: str) -> bool:
        """True once the turn's log holds a turn-terminal event (until a new run opens it)."""
        log = self._logs.get(turn_id)
        return log is not None and log.finished_at is not None

    def reader(self, turn_id: str, after: int = 0) -> MemoryReader:
        log = self._logs.get(turn_id)
        if log is None:
            raise UnknownTurn(turn_id)
        if after < log.base:
            raise CursorExpired(turn_id, after, log.base + 1)
        return MemoryReader(log, after, self._expire)

    def reader_count(self, turn_id: str) -> int:
        log = self._logs.get(turn_id)
        return log.readers if log else 0

    def turn_count(self) -> int:
        return len(self._logs)

    async def lookup(self, turn_id: str) -> None:
        """Nothing to learn: an in-process bus only knows its own turns."""

    def held(self, turn_id: str, after: int, limit: int) -> tuple[int, list[Event]] | None:
        """What the turn's log holds now without a reader: ``(base, events)``, ``base`` the
        seq before its oldest event and ``events`` up to ``limit`` of them after
        ``max(after, base)``; None when there is no log. (The Redis writer copies from
        here.)"""
        log = self._logs.get(turn_id)
        if log is None:
            return None
        start = max(after, log.base) - log.base
        return log.base, log.events[start : start + limit]

    def drop(self, turn_id: str) -> None:
        """Forget the turn's log now (another instance ran the turn since: its next log
        starts afresh). Readers of the old log keep what they hold."""
        self._logs.pop(turn_id, None)
        self._finished.pop(turn_id, None)

    # -- lifecycle and health: nothing to connect, nothing to check --------------------

    async def start(self) -> None:
        return None

    async def stop(self, timeout: float = 5.0) -> None:
        return None

    def unavailable(self) -> str | None:
        return None

    async def problems(self) -> list[str]:
        return []

    # -- retention --------------------------------------------------------------------

    def _expire(self) -> None:
        """Drop finished logs past the age or count bound. A log somebody still reads is
        kept until its last reader closes (which runs this again)."""
        now = time.monotonic()
        excess = len(self._finished) - self.max_finished_turns
        drop = []  # oldest first; stop at the first log that may stay (no full copy)
        for turn_id, finished_at in self._finished.items():
            if excess <= 0 and now - finished_at < self.retention_s:
                break
            log = self._logs.get(turn_id)
            if log is not None and log.readers:
                continue
            drop.append(turn_id)
            excess -= 1
        for turn_id in drop:
            del self._finished[turn_id]
            self._logs.pop(turn_id, None)
