"""A reader over a fixed list of events: for streams that are not a live log (the terminal
event of a turn whose log is gone, a replay)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from relay.events import Event


class StaticReader:
    def __init__(self, events: Sequence[Event], after: int = 0) -> None:
        self._events = [e for e in events if e.seq > after]
        self.cursor = after

    def take(self, limit: int = 256) -> list[Event]:
        batch, self._events = self._events[:limit], self._events[limit:]
        if batch:
            self.cursor = batch[-1].seq
        return batch

    async def wait(self, timeout: float | None) -> bool:
        if self._events:
            return True
        await asyncio.sleep(timeout if timeout is not None else 3600)
        return False

    def close(self) -> None:
        self._events = []
