"""The receiver's way out: what it maps is admitted, then published and indexed, in order.

Every batch the receiver maps (a settle window that closes, a request when there is no
window, a run the sweep ends) goes through :class:`Outbox` as a :class:`Batch`: the
events mapped, and the index entries of the runs they belong to (our run roots, and the
runs of other instrumentations the mapping noted). One task takes the batches in the
order they were mapped and, for each, awaits ``admit`` (which may look up turn records:
I/O, so never on the span path), then calls ``send`` (the bus, the store's index queue
and the turn records' own ordered writer, all without waiting). One task, so a turn's
events reach the bus in the order its spans ran, whatever the loop does meanwhile.
:meth:`Outbox.put` answers a future that is done once its batch is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from relay.events import Event
from relay.spans import SpanRecord
from relay.store import RunIndex

log = logging.getLogger("relay.receiver")


@dataclasses.dataclass(slots=True)
class Batch:
    """What one mapping step produced: its events, the index entries of its runs, and
    the spans of runs whose turn another instance publishes (to hand over to it:
    :mod:`relay.ingest.strays`)."""

    events: list[Event]
    runs: list[RunIndex]
    spans: list[SpanRecord] = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.events or self.runs or self.spans)


class Outbox:
    def __init__(
        self, admit: Callable[[Batch], Awaitable[None]], send: Callable[[Batch], None]
    ) -> None:
        self._admit = admit
        self._send = send
        self._queue: deque[tuple[Batch, asyncio.Future[None]]] = deque()
        self._task: asyncio.Task[None] | None = None

    def put(self, batch: Batch) -> asyncio.Future[None]:
        """Queue a batch; the future is done once it is sent."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        if not batch:
            done.set_result(None)
            return done
        self._queue.append((batch, done))
        if self._task is None:
            self._task = loop.create_task(self._run(), name="otlp receiver outbox")
        return done

    async def _run(self) -> None:
        try:
            while self._queue:
                batch, done = self._queue.popleft()
                try:
                    await self._admit(batch)
                    self._send(batch)
                except Exception:  # nobody above this task to answer (the spans are stored)
                    log.exception("relay: sending %d received event(s) failed", len(batch.events))
                if not done.done():
                    done.set_result(None)
        finally:
            self._task = None

    async def drain(self, timeout: float) -> None:
        """Wait (up to ``timeout``) for what is queued to be sent."""
        task = self._task
        if task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), timeout)
