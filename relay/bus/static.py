"""Readers over events that are not a live log: a fixed list (the terminal event of a turn
whose log is gone, :class:`StaticReader`), or a list that grows as a worker derives it (a
streaming replay from stored spans, :class:`DerivedReader`), paced by :func:`gap_s`:
that is how a replay keeps the original gaps between spans.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from relay.events import Event


def gap_s(previous_ts: float, ts: float, speed: float, max_gap_s: float | None) -> float:
    """Seconds a paced replay waits between two events (``ts`` in ms): their gap, at most
    ``max_gap_s``, divided by ``speed``; 0 = all at once."""
    if speed == 0:
        return 0.0
    gap = max(0.0, (ts - previous_ts) / 1000.0)
    if max_gap_s is not None:
        gap = min(gap, max_gap_s)
    return gap / speed


class StaticReader:
    """The events of a fixed list after ``after``, all available at once."""

    def __init__(self, events: Sequence[Event], after: int = 0) -> None:
        self._events = [e for e in events if e.seq > after]
        self._next = 0
        self.cursor = after

    @property
    def exhausted(self) -> bool:
        """True once every event has been taken: nothing more will ever come."""
        return self._next >= len(self._events)

    def take(self, limit: int = 256) -> list[Event]:
        batch = self._events[self._next : self._next + limit]
        self._next += len(batch)
        if batch:
            self.cursor = batch[-1].seq
        return batch

    async def wait(self, timeout: float | None) -> bool:
        if self.exhausted:
            await asyncio.sleep(timeout if timeout is not None else 3600)
            return False
        return True

    def close(self) -> None:
        self._next = len(self._events)


class Derived:
    """Events that a worker derives while they are being sent (a streaming replay): the
    worker hands batches to the loop (:meth:`add`, :meth:`fail`, :meth:`finish`, called
    on the loop), readers take them as they come."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.done = False
        self.failure: BaseException | None = None
        self.changed = asyncio.Event()
        #: the reader left: the worker stops at its next batch
        self.cancelled = False

    def add(self, batch: Sequence[Event]) -> None:
        self.events.extend(batch)
        self.changed.set()

    def fail(self, exc: BaseException) -> None:
        self.failure = exc
        self.finish()

    def finish(self) -> None:
        self.done = True
        self.changed.set()

    async def until(self, count: int) -> None:
        """Return once more than ``count`` events exist, or no more will."""
        while len(self.events) <= count and not self.done:
            self.changed.clear()
            await self.changed.wait()


class DerivedReader:
    """:class:`StaticReader` over :class:`Derived` events: the same pacing (each event due
    ``min(gap, max_gap_s) / speed`` after the one before it, counted from the first
    event of the turn even when reading after a cursor), over a list still growing.
    A derivation that failed raises its error once the events before it are taken."""

    def __init__(
        self, source: Derived, after: int = 0, speed: float = 0.0, max_gap_s: float | None = None
    ) -> None:
        self._source = source
        self._speed = speed
        self._max_gap_s = max_gap_s
        self._due: list[float] = []
        self._next = after  # events are numbered from 1: index == seq - 1
        self._start: float | None = None
        self.cursor = after

    @property
    def exhausted(self) -> bool:
        source = self._source
        return source.done and source.failure is None and self._next >= len(source.events)

    def _due_at(self, k: int) -> float:
        events = self._source.events
        due = self._due
        while len(due) <= k:
            n = len(due)
            due.append(
                0.0
                if n == 0
                else due[-1] + gap_s(events[n - 1].ts, events[n].ts, self._speed, self._max_gap_s)
            )
        return due[k]

    def _elapsed(self) -> float:
        if self._start is None:
            self._start = time.monotonic()
        return time.monotonic() - self._start

    def take(self, limit: int = 256) -> list[Event]:
        elapsed = self._elapsed()
        events = self._source.events
        end = self._next
        while end < len(events) and end - self._next < limit and self._due_at(end) <= elapsed:
            end += 1
        batch = events[self._next : end]
        self._next = end
        if batch:
            self.cursor = batch[-1].seq
        elif self._source.failure is not None and end >= len(events):
            raise self._source.failure
        return batch

    async def wait(self, timeout: float | None) -> bool:
        source = self._source
        if self._next < len(source.events):
            until_due = max(0.0, self._due_at(self._next) - self._elapsed())
            if timeout is not None and timeout < until_due:
                await asyncio.sleep(timeout)
                return False
            await asyncio.sleep(until_due)
            return True
        if source.done:
            if source.failure is not None:
                return True  # take() raises it
            await asyncio.sleep(timeout if timeout is not None else 3600)
            return False
        source.changed.clear()
        try:
            async with asyncio.timeout(timeout):
                await source.changed.wait()
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        self._next = len(self._source.events)
        self._source.cancelled = True
