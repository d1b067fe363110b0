"""A reader over a fixed list of events: for streams that are not a live log (a replay
from stored spans, the terminal event of a turn whose log is gone).

With ``due`` (seconds after the first read at which each event becomes available) it
paces them: that is how a replay keeps the original gaps between spans.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from relay.events import Event


class StaticReader:
    def __init__(self, events: Sequence[Event], after: int = 0,
                 due: Sequence[float] | None = None) -> None:
        kept = [(i, e) for i, e in enumerate(events) if e.seq > after]
        self._events = [e for _, e in kept]
        self._due = [due[i] for i, _ in kept] if due is not None else [0.0] * len(kept)
        self._next = 0
        self._start: float | None = None
        self.cursor = after

    @property
    def exhausted(self) -> bool:
        """True once every event has been taken: nothing more will ever come."""
        return self._next >= len(self._events)

    def _elapsed(self) -> float:
        if self._start is None:
            self._start = time.monotonic()
        return time.monotonic() - self._start

    def take(self, limit: int = 256) -> list[Event]:
        elapsed = self._elapsed()
        end = self._next
        while (end < len(self._events) and end - self._next < limit
               and self._due[end] <= elapsed):
            end += 1
        batch = self._events[self._next:end]
        self._next = end
        if batch:
            self.cursor = batch[-1].seq
        return batch

    async def wait(self, timeout: float | None) -> bool:
        if self.exhausted:
            await asyncio.sleep(timeout if timeout is not None else 3600)
            return False
        until_due = max(0.0, self._due[self._next] - self._elapsed())
        if timeout is not None and timeout < until_due:
            await asyncio.sleep(timeout)
            return False
        await asyncio.sleep(until_due)
        return True

    def close(self) -> None:
        self._next = len(self._events)
