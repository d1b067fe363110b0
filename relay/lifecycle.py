"""Work that a mounted route keeps beside its requests, started and stopped with the relay.

:class:`Lifecycles` is the relay's list of such work, each entry a pair:

- ``start``, a coroutine function, runs in the background once the relay has started
  (after the turns of a dead process are marked interrupted). A failure is logged, never
  raised: the server serves on without it.
- ``stop`` is called when the relay stops, before its runs are shut down, and then
  whatever ``start`` still runs is cancelled.

The client tools' start-up sweep and their timers (relay/langgraph/client_tool_limits.py)
are one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("relay.lifecycle")


class Lifecycles:
    def __init__(self) -> None:
        self._entries: list[tuple[Callable[[], Awaitable[None]], Callable[[], None]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, start: Callable[[], Awaitable[None]], stop: Callable[[], None]) -> None:
        """Run ``start()`` when the relay starts and ``stop()`` when it stops (an entry
        added to a relay that has started begins at its next start: mount before)."""
        self._entries.append((start, stop))

    def start(self) -> None:
        """Start every entry's work in the background. On the event loop."""
        loop = asyncio.get_running_loop()
        for start, _ in self._entries:
            task = loop.create_task(self._run(start))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, start: Callable[[], Awaitable[None]]) -> None:
        try:
            await start()
        except Exception:
            log.exception("relay: background work %r failed", getattr(start, "__qualname__", start))

    async def stop(self, timeout_s: float = 2.0) -> None:
        """Every entry's ``stop()``; then what still runs of their work is cancelled and
        waited for (at most ``timeout_s``)."""
        for _, stop in self._entries:
            try:
                stop()
            except Exception:
                log.exception("relay: stopping %r failed", getattr(stop, "__qualname__", stop))
        tasks = set(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
